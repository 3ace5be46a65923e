"""Algorithm 1 (and its baselines) as one loop: oracle gradient + regularizer, any torch optimizer, renormalization.

Spec: preconditioned-regression §6.2 (Algorithm 1), §6.3 (minibatch variant), §6.4 (renormalization), §6.5
(baselines and ablations: a baseline is the same loop with another optimizer, start or regularizer weight).
A run that blows up (non-finite or huge iterate) follows the one divergence policy of :mod:`attnlab.training.callbacks`: it
stops, keeps its last good iterate, is marked ``"diverged"``, and its rows stop at the step before the blow-up, so
tables and figures never hold NaN. Progress and recording go through callbacks, as in every attnlab loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar, check_tensor
from attnlab.regression.data import RegressionProblem
from attnlab.regression.metrics import gap_metrics
from attnlab.regression.oracles import MonteCarloOracle
from attnlab.regression.regularizer import gradient as regularizer_gradient
from attnlab.regression.renormalization import RENORMALIZATIONS, renormalize
from attnlab.training.callbacks import COMPLETED, DIVERGED, STOPPED, Record, TrainingResult, callback_list, tidy_frame

__all__ = ["Fit", "fit", "oracle_floors"]

Oracle = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
Metric = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class Fit(TrainingResult):
    """Result of :func:`fit`.

    Attributes
    ----------
    V : torch.Tensor, shape (R, k, p), float64
        Last good value matrices.
    Q : torch.Tensor, shape (R, p, d), float64
        Last good key-query matrices.
    frame : pandas.DataFrame
        Tidy table: ``run``, ``step`` and one column per metric, one row per recorded (run, step).
    diverged_at : torch.Tensor, shape (R,), int64
        Step at which each run blew up (-1: never); its iterate is the one before that step.
    status : list of str
        Per run: ``"completed"``, ``"diverged"`` or ``"stopped"`` (a callback asked to stop).
    """

    V: torch.Tensor
    Q: torch.Tensor
    frame: pd.DataFrame
    diverged_at: torch.Tensor
    status: list[str]

    @property
    def diverged(self) -> torch.Tensor:
        """Which runs blew up, shape (R,), bool."""
        return self.diverged_at >= 0


def fit(
    V0: object,
    Q0: object,
    oracle: Oracle,
    make_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
    *,
    steps: int,
    metrics: Mapping[str, Metric],
    record_every: int = 1,
    record_steps: Collection[int] = (),
    regularizer_weight: float = 0.0,
    covariance: torch.Tensor | None = None,
    token_covariance: torch.Tensor | None = None,
    renormalization: str = "none",
    tau_Q: float = 1.0,
    max_norm: float = 1e6,
    callbacks: Iterable[Any] | None = None,
    progress: bool | None = False,
    desc: str = "regression",
) -> Fit:
    """Run ``steps`` iterations of ``theta <- optimizer step on oracle(theta) + mu grad R_hat(theta)`` for R runs at once.

    Spec: preconditioned-regression §6.2-6.5. With ``PreconditionedGD.for_attention``, the spectral start and
    ``regularizer_weight = 1/4`` this is Algorithm 1; with ``torch.optim.SGD``, a random start and weight 0 it is the
    SGD baseline; mixing the parts gives the ablations of §6.5.

    Parameters
    ----------
    V0 : array-like, shape (R, k, p), float64
        Start value matrices, one per run (use R = 1 for a single run).
    Q0 : array-like, shape (R, p, d), float64
    oracle : callable
        ``oracle(V, Q) -> (grad_V, grad_Q)``, e.g. :class:`~attnlab.regression.MinibatchOracle`.
    make_optimizer : callable
        Builds a ``torch.optim.Optimizer`` over ``[V, Q]`` (the iterates are updated in place).
    steps : int
        Number of iterations T.
    metrics : mapping of str to callable
        ``metric(V, Q) -> (R,)`` tensors recorded every ``record_every`` steps (and at 0 and T).
    record_every : int, default=1
    record_steps : collection of int, optional
        Extra steps to record (e.g. the steps of a reference table).
    regularizer_weight : float, default=0.0
        mu >= 0 (spec §3.4 default 1/4 for Algorithm 1).
    covariance : torch.Tensor, shape ([R,] d, d), optional
        ``Sigma_hat`` for the empirical regularizer and the renormalization (needed when either is on).
    token_covariance : torch.Tensor, shape ([R,] p, p), optional
        ``Sigma_z_hat``; default ``covariance`` (covariate tokens).
    renormalization : {"none", "balance", "cap"}, default="none"
        Rule of spec §6.4 applied after each step.
    tau_Q : float, default=1.0
        Bound of the "cap" rule.
    max_norm : float, default=1e6
        A run whose ``||V||_F`` or ``||Q||_F`` exceeds this (or turns non-finite) has blown up and is stopped.
    callbacks : sequence of attnlab.training.callbacks.Callback or callable, optional
        Called at every recorded step with a :class:`~attnlab.training.callbacks.Record` (its ``rows`` the runs still
        alive); one that returns True stops every live run (status ``"stopped"``).
    progress : bool or None, default=False
        A progress bar over the steps: True always, None only on a terminal (pass ``RunContext.progress``).
    desc : str, default="regression"
        Label of the progress bar.

    Returns
    -------
    Fit

    Raises
    ------
    ValidationError
        Bad shapes or settings; a regularizer or renormalization without ``covariance``.
    """
    sizes: dict[str, int] = {}
    V = check_tensor("V0", V0, "Rkp", sizes).clone()
    Q = check_tensor("Q0", Q0, "Rpd", sizes).clone()
    check_scalar("steps", steps, kind=int, low=0)
    check_scalar("record_every", record_every, kind=int, low=1)
    check_scalar("regularizer_weight", regularizer_weight, low=0.0)
    check_scalar("max_norm", max_norm, low=0.0, low_inclusive=False)
    check_in("renormalization", renormalization, RENORMALIZATIONS)
    if (regularizer_weight > 0 or renormalization != "none") and covariance is None:
        raise ValidationError(
            "covariance is None, but the regularizer or the renormalization needs Sigma_hat; pass covariance="
            "X^T X / n of the training sample"
        )
    token_covariance = covariance if token_covariance is None else token_covariance
    optimizer = make_optimizer([V, Q])
    runs = V.shape[0]
    alive = torch.ones(runs, dtype=torch.bool)
    diverged_at = torch.full((runs,), -1, dtype=torch.int64)
    rows: list[pd.DataFrame] = []
    calls = callback_list(callbacks, progress, desc)

    def record(step: int) -> bool:
        values = {name: metric(V, Q).detach() for name, metric in metrics.items()}
        index = torch.nonzero(alive).flatten()
        rows.append(tidy_frame({"run": index, **{k: v[index] for k, v in values.items()}}, step=step))
        return calls.record(Record(step, steps, rows[-1], {"V": V, "Q": Q, "alive": alive}))

    calls.start(steps)
    step, stopped = 0, record(0)
    for step in range(1, steps + 1):
        if stopped:
            break
        grad_V, grad_Q = oracle(V, Q)  # spec §6.2 step a
        if regularizer_weight > 0:
            reg_V, reg_Q = regularizer_gradient(V, Q, covariance, token_covariance)  # spec §6.2 step b
            grad_V, grad_Q = grad_V + regularizer_weight * reg_V, grad_Q + regularizer_weight * reg_Q
        dead = ~alive[:, None, None]
        V.grad, Q.grad = grad_V.masked_fill(dead, 0.0), grad_Q.masked_fill(dead, 0.0)
        last_V, last_Q = V.detach().clone(), Q.detach().clone()
        optimizer.step()  # spec §6.2 step c
        with torch.no_grad():
            new_V, new_Q = renormalize(V, Q, covariance, token_covariance, renormalization, tau_Q)  # spec §6.2 step d
            V.copy_(new_V)
            Q.copy_(new_Q)
            norms = torch.maximum(torch.linalg.matrix_norm(V), torch.linalg.matrix_norm(Q))
            blown = ~torch.isfinite(norms) | (norms > max_norm)
            diverged_at[blown & alive] = step
            alive &= ~blown
            V.copy_(torch.where(alive[:, None, None], V, last_V))  # a blown-up run keeps its last good iterate
            Q.copy_(torch.where(alive[:, None, None], Q, last_Q))
        calls.step(step)
        if not bool(alive.any()):
            break
        if step % record_every == 0 or step == steps or step in record_steps:
            stopped = record(step)
    calls.end()
    frame = pd.concat(rows, ignore_index=True)
    done = STOPPED if stopped and step < steps else COMPLETED
    status = [DIVERGED if int(at) >= 0 else done for at in diverged_at]
    return Fit(V=V.detach(), Q=Q.detach(), frame=frame, diverged_at=diverged_at, status=status)


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
        ``make_optimizer([V, Q]) -> torch.optim.Optimizer``, as in :func:`~attnlab.training.regression.fit`; Algorithm 1's
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
