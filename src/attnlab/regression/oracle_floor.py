"""The error floor of Algorithm 1 under the Monte-Carlo oracle, split into the oracle's noise and its bias.

Spec: preconditioned-regression §6.2 (the oracle), §8 T2 (the ``O(1/n)`` floor). Theorem 2 assumes the exact
expected empirical gradient ``E grad L_n``, which has no closed form; the Monte-Carlo oracle averages ``B`` fresh
samples of size n per step. Its noise adds ``~ v / B`` to the floor and its bias a ``b`` that does not depend on
``B``, so running at ``B`` and ``B / 2`` separates them (Richardson in 1/B): ``noise = F(B/2) - F(B)``,
``bias = 2 F(B) - F(B/2)``. The preconditioner and the regularizer use the true Sigma, whose sample versions would
add an error of their own (Lemma 3, Theorem 5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.regression.algorithm import fit
from attnlab.regression.data import RegressionProblem
from attnlab.regression.metrics import gap_metrics
from attnlab.regression.oracles import MonteCarloOracle

__all__ = ["noise_and_bias", "oracle_floors"]


def oracle_floors(
    problem: RegressionProblem,
    start: tuple[torch.Tensor, torch.Tensor],
    ns: Sequence[int],
    batches: int,
    make_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
    *,
    steps: int,
    mu: float,
    seed: int,
    record_every: int = 2,
    bar: Callable[[Iterable], Iterable] = iter,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Algorithm 1 (true-Sigma regularizer) with the Monte-Carlo oracle at every n, at ``batches`` and
    ``batches // 2`` fresh samples per step.

    Parameters
    ----------
    problem : RegressionProblem
    start : tuple of torch.Tensor
        ``(V0, Q0)`` of shapes (R, k, d) and (R, d, d): R runs (e.g.
        :func:`~attnlab.regression.manifold.perturbed_manifold_point`).
    ns : sequence of int
        Sample sizes (context lengths) of the oracle.
    batches : int
        Fresh samples per step, even and >= 2; each n also runs at ``batches // 2`` with the same seed.
    make_optimizer : callable
        ``make_optimizer([V, Q]) -> torch.optim.Optimizer``, as in :func:`~attnlab.regression.fit`; Algorithm 1's
        is :meth:`attnlab.optim.PreconditionedGD.for_attention` with the true Sigma.
    steps : int
    mu : float
        Regularizer weight of Algorithm 1.
    seed : int
        The oracle at n is seeded ``seed + n``.
    record_every : int, default=2
    bar : callable, default=iter
        Progress over ``ns``.

    Returns
    -------
    floors : pandas.DataFrame
        Columns n, batches, run, floor: the mean gap ``L - L_irr`` over the second half of the steps (NaN for a run
        that diverged).
    trajectories : pandas.DataFrame
        Columns n, batches, run, step, gap, dist, diverged_at (>= 0 for a run that blew up and kept its last
        iterate).
    """
    check_scalar("batches", batches, kind=int, low=2)
    if batches % 2:
        raise ValidationError(f"batches must be even (the floor is also run at batches // 2), got {batches}")
    V0, Q0 = start
    runs = V0.shape[0]
    Sigma = problem.Sigma.expand(runs, -1, -1)
    floors, trajectories = [], []
    for n in bar(ns):
        for b in (batches // 2, batches):
            result = fit(
                V0,
                Q0,
                MonteCarloOracle(problem, n, b, seed=seed + n),  # the same seed at B/2 and B
                make_optimizer,
                steps=steps,
                record_every=record_every,
                regularizer_weight=mu,
                covariance=Sigma,
                metrics=gap_metrics(problem),
            )
            frame = result.frame.assign(n=n, batches=b)
            frame["diverged_at"] = frame.run.map(dict(enumerate(result.diverged_at.tolist())))
            trajectories.append(frame)
            tail = frame[frame.step >= steps // 2].groupby("run").gap.mean()
            for run in range(runs):
                floor = float("nan") if result.diverged[run] else float(tail.get(run, float("nan")))
                floors.append({"n": n, "batches": b, "run": run, "floor": floor})
    return pd.DataFrame(floors), pd.concat(trajectories, ignore_index=True)


def noise_and_bias(floors: pd.DataFrame, batches: int) -> pd.DataFrame:
    """Per (n, run): ``F(B)``, the oracle's ``noise = F(B/2) - F(B)`` and the ``bias = 2 F(B) - F(B/2)``.

    Parameters
    ----------
    floors : pandas.DataFrame
        The ``floors`` of :func:`oracle_floors`.
    batches : int
        The ``B`` it was run with.

    Returns
    -------
    pandas.DataFrame
        Columns n, run, floor, noise, bias.
    """
    wide = floors.pivot_table(index=["n", "run"], columns="batches", values="floor", dropna=False)
    full, half = wide[batches], wide[batches // 2]  # spec §8 T2: Richardson in 1/B
    return pd.DataFrame({"floor": full, "noise": half - full, "bias": 2 * full - half}).reset_index()
