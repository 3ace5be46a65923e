"""Algorithm 1 (and its baselines) as a problem of the one loop: oracle gradient + regularizer, any torch
optimizer, renormalization.

Spec: preconditioned-regression §6.2 (Algorithm 1), §6.3 (minibatch variant), §6.4 (renormalization), §6.5
(baselines and ablations: a baseline is the same loop with another optimizer, start or regularizer weight).
The guard of a run is its iterate: non-finite or past ``max_norm``, it has blown up, and the one divergence policy
(:mod:`attnlab.training.loop`) puts it back to its last good iterate, stops it and marks it ``"diverged"``; its
rows stop at the step before the blow-up, so tables and figures never hold NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar, check_tensor
from attnlab.metrics import metric_columns
from attnlab.regression._checks import check_spd
from attnlab.regression.data import RegressionProblem
from attnlab.regression.metrics import gap_metrics
from attnlab.regression.oracles import MonteCarloOracle
from attnlab.regression.regularizer import _gradient as regularizer_gradient
from attnlab.regression.renormalization import RENORMALIZATIONS, renormalize
from attnlab.training.loop import LoopProblem, run_loop
from attnlab.training.result import DIVERGED, TrainingResult

__all__ = ["fit", "oracle_floors"]

Oracle = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def fit(
    V0: object,
    Q0: object,
    oracle: Oracle,
    make_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
    *,
    steps: int,
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]],
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
) -> TrainingResult:
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
        ``metric(state) -> (R,)`` tensors of the state ``{"V": (R, k, p), "Q": (R, p, d)}``
        (:class:`attnlab.metrics.Metric`), recorded every ``record_every`` steps (and at 0 and T).
    record_every : int, default=1
    record_steps : collection of int, optional
        Extra steps to record (e.g. the steps of a reference table), each an integer in ``[0, steps]``.
    regularizer_weight : float, default=0.0
        mu >= 0 (spec §3.4 default 1/4 for Algorithm 1).
    covariance : torch.Tensor, shape ([R,] d, d), optional
        ``Sigma_hat`` for the empirical regularizer and the renormalization (needed when either is on).
    token_covariance : torch.Tensor, shape ([R,] p, p), optional
        ``Sigma_z_hat``; default ``covariance`` (covariate tokens).
    renormalization : {"none", "balance", "cap"}, default="none"
        Rule of spec §6.4 applied after each step.
    tau_Q : float, default=1.0
        Bound of the "cap" rule, finite and > 0.
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
    TrainingResult
        ``frame`` (``run``, ``step`` and one column per metric, one row per recorded (run, step)), ``status`` and
        ``last_step`` per run (a blown-up run holds its iterate of the step before), and ``params``: ``V`` (R, k, p)
        and ``Q`` (R, p, d), the last good iterates (also ``result.V``, ``result.Q``).

    Raises
    ------
    ValidationError
        Bad shapes or settings (a ``record_steps`` entry outside ``[0, steps]``, ``progress`` not a bool or None);
        ``tau_Q`` not a finite number > 0; a covariance of the wrong shape, not finite or
        not symmetric positive definite; a regularizer or renormalization without ``covariance``; a start past
        ``max_norm``.
    """
    sizes: dict[str, int] = {}
    V = check_tensor("V0", V0, "Rkp", sizes).clone()
    Q = check_tensor("Q0", Q0, "Rpd", sizes).clone()
    check_scalar("steps", steps, kind=int, low=0)
    check_scalar("record_every", record_every, kind=int, low=1)
    for i, at in enumerate(record_steps):  # a step past the run is never reached: refused, not skipped
        check_scalar(f"record_steps[{i}]", at, kind=int, low=0, high=steps)
    if progress is not None:
        progress = check_bool("progress", progress)
    check_scalar("regularizer_weight", regularizer_weight, low=0.0)
    check_scalar("max_norm", max_norm, low=0.0, low_inclusive=False)
    check_in("renormalization", renormalization, RENORMALIZATIONS)
    check_scalar(
        "tau_Q", tau_Q, low=0.0, low_inclusive=False
    )  # spec §6.4: the cap ||Sigma_z^1/2 Q Sigma^1/2|| <= tau_Q
    if (regularizer_weight > 0 or renormalization != "none") and covariance is None:
        raise ValidationError(
            "covariance is None, but the regularizer or the renormalization needs Sigma_hat; pass covariance="
            "X^T X / n of the training sample"
        )
    covariance, token_covariance = _covariances(covariance, token_covariance, sizes)
    problem = _Algorithm1(V, Q, oracle, make_optimizer([V, Q]), metrics, max_norm)
    problem.regularizer = (regularizer_weight, covariance, token_covariance)
    problem.renormalization = (renormalization, tau_Q)
    result = run_loop(
        problem,
        steps,
        record_every=record_every,
        record_at=record_steps,
        callbacks=callbacks or (),
        progress=progress,
        desc=desc,
    )
    result.params = {"V": V.detach(), "Q": Q.detach()}
    return result


def _covariances(
    covariance: object, token_covariance: object, sizes: dict[str, int]
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``Sigma_hat`` (``([R,] d, d)``) and ``Sigma_z_hat`` (``([R,] p, p)``, default ``Sigma_hat``), each finite and
    symmetric positive definite (spec §7 A1), or None; the sizes are those of ``V0`` and ``Q0``."""
    if covariance is not None:
        covariance = check_spd("covariance", covariance, sizes)
    if token_covariance is not None:
        return covariance, check_spd("token_covariance", token_covariance, sizes, letter="p")
    if covariance is not None and sizes["p"] != sizes["d"]:
        raise ValidationError(
            f"token_covariance is None, so it is covariance, of size d = {sizes['d']}, but the tokens of V0 and Q0 "
            f"have size p = {sizes['p']}; pass token_covariance of shape ([R,] {sizes['p']}, {sizes['p']})"
        )
    return covariance, covariance


class _Algorithm1(LoopProblem):
    """R runs of Algorithm 1 as a problem of the one loop (:class:`attnlab.training.loop.LoopProblem`)."""

    def __init__(
        self,
        V: torch.Tensor,
        Q: torch.Tensor,
        oracle: Oracle,
        optimizer: torch.optim.Optimizer,
        metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]],
        max_norm: float,
    ) -> None:
        self.V, self.Q, self.oracle, self.optimizer, self.metrics = V, Q, oracle, optimizer, metrics
        self.runs, self.max_norm = V.shape[0], max_norm
        self.last = (V, Q)
        self.regularizer: tuple[float, Any, Any] = (0.0, None, None)
        self.renormalization: tuple[str, float] = ("none", 1.0)

    def gradient(self, step: int, records: bool) -> None:
        """Nothing: the oracle is called in :meth:`apply` (a random oracle draws once per step)."""

    def guard(self, gradient: None) -> torch.Tensor | None:
        norms = torch.maximum(torch.linalg.matrix_norm(self.V), torch.linalg.matrix_norm(self.Q))
        blown = ~torch.isfinite(norms) | (norms > self.max_norm)
        return blown if bool(blown.any()) else None

    def record(self, step: int, gradient: None, active: torch.Tensor) -> dict[str, Any]:
        values = metric_columns(self.metrics, {"V": self.V, "Q": self.Q}, ("run", "step"))
        index = torch.nonzero(active).flatten()
        columns = {k: torch.as_tensor(v).detach().reshape(-1).expand(self.runs)[index] for k, v in values.items()}
        return {"run": index, "step": torch.full_like(index, step), **columns}

    def state(self) -> dict[str, Any]:
        """The iterates, for callbacks."""
        return {"V": self.V, "Q": self.Q}

    def apply(self, step: int, gradient: None, active: torch.Tensor) -> None:
        V, Q = self.V, self.Q
        mu, covariance, token_covariance = self.regularizer
        grad_V, grad_Q = self.oracle(V, Q)  # spec §6.2 step a
        if mu > 0:
            reg_V, reg_Q = regularizer_gradient(V, Q, covariance, token_covariance)  # spec §6.2 step b
            grad_V, grad_Q = grad_V + mu * reg_V, grad_Q + mu * reg_Q
        dead = ~active[:, None, None]
        V.grad, Q.grad = grad_V.masked_fill(dead, 0.0), grad_Q.masked_fill(dead, 0.0)
        self.last = (V.detach().clone(), Q.detach().clone())
        self.optimizer.step()  # spec §6.2 step c
        with torch.no_grad():
            new_V, new_Q = renormalize(V, Q, covariance, token_covariance, *self.renormalization)  # spec §6.2 d
            V.copy_(new_V)
            Q.copy_(new_Q)

    def keep(self, runs: torch.Tensor) -> None:
        with torch.no_grad():
            self.V[runs], self.Q[runs] = self.last[0][runs], self.last[1][runs]


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
        :func:`~attnlab.regression.manifold.near_manifold_point`).
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
            diverged_at = [s + 1 if status == DIVERGED else -1 for s, status in zip(result.last_step, result.status)]
            frame = result.frame.assign(n=n, batches=b)
            frame["diverged_at"] = frame.run.map(dict(enumerate(diverged_at)))
            trajectories.append(frame)
            tail = frame[frame.step >= steps // 2].groupby("run").gap.mean()
            for run in range(runs):
                floor = float("nan") if diverged_at[run] >= 0 else float(tail.get(run, float("nan")))
                floors.append({"n": n, "batches": b, "run": run, "floor": floor})
    return pd.DataFrame(floors), pd.concat(trajectories, ignore_index=True)
