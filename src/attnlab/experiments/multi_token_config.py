"""The setting of ``multi-token.equivalence`` (:mod:`attnlab.experiments.multi_token`), checked when it is built.

Spec: multi-token §5 (data model and training), §6 (the acceptance rule).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab._validation import ValidationError, check_in, check_scalar, check_seed_range
from attnlab.optim.spec import parse_optimizer

__all__ = ["MAX_DRAWS", "MultiTokenConfig"]

MAX_DRAWS = 1_000_000  # ours: a bound on the run's time, 50 x the default max_draws


@dataclass(frozen=True)
class MultiTokenConfig:
    """The source notebook's setting; ``runs``, ``chunk`` and ``max_draws`` are ours (the source keeps 500 runs).

    Attributes
    ----------
    n : int
        Sequences per data set; >= 1.
    T : int
        Tokens per sequence; >= 2.
    ds : tuple of int
        Token dimensions d, one panel each; at least one, distinct, each >= 1.
    lr : float
        Step size of normalised GD (the source's form); > 0.
    optimizer : str
        The optimizer of every run, in the optimizer grammar (``attnlab.optim.spec``): "ngd" (the source's form),
        or e.g. "ngd:momentum=0.5", "gd", "md:1.5".
    steps : int
        Training steps of every run; >= 2 (the growth rows read ``W`` at T/2 and T).
    record_every : int
        Steps between recorded alignments in the replay; from 1 to ``steps // 2`` (the growth rows need a recorded
        step near T/2 besides 0 and T).
    low, high : float
        Acceptance thresholds on the final softmax: a token is out of the selected set at or below ``low``, and no
        probability may lie in ``(low, high]``; ``0 < low < high < 1``.
    runs : int
        Accepted runs wanted per d (ours); from 2 (a share over runs needs two) to ``max_draws``.
    chunk : int
        Draws trained as one batched program (ours); >= 1.
    max_draws : int
        Draws tried per d before giving up (ours); from ``runs`` to 1000000 (ours: a bound on the run's time, 50 x
        the default).
    seed : int
        Seed of the first draw; the draws of each d are seeded ``seed ... seed + max_draws - 1``, so ``seed <= 2**63
        - max_draws``.
    acceptance : str
        Which runs are kept: "source" (the notebook's rule: a set may be its whole sequence, adding equalities
        only) or "ours" (no set equal to its whole sequence). Both rules' rates are reported either way.
    """

    n: int = 3
    T: int = 4
    ds: tuple[int, ...] = (4, 6, 8, 10)
    lr: float = 0.1
    optimizer: str = "ngd"
    steps: int = 2000
    record_every: int = 100
    low: float = 1e-6
    high: float = 1e-3
    runs: int = 100
    chunk: int = 2000
    max_draws: int = 20000
    seed: int = 1
    acceptance: str = "source"

    OURS = ("runs", "chunk", "max_draws")

    def __post_init__(self) -> None:
        check_scalar("n", self.n, kind=int, low=1)
        check_scalar("T", self.T, kind=int, low=2)  # a selection among T tokens
        if not self.ds:
            raise ValidationError("ds is empty; pass at least one token dimension, e.g. ds=(8,)")
        for d in self.ds:
            check_scalar("ds entry", d, kind=int, low=1)
        if len(set(self.ds)) < len(self.ds):
            raise ValidationError(f"ds == {tuple(self.ds)} repeats a dimension; pass distinct dimensions")
        check_scalar("lr", self.lr, low=0.0, low_inclusive=False)
        parse_optimizer(self.optimizer)  # the grammar's own message names a bad part and lists what is accepted
        check_scalar("steps", self.steps, kind=int, low=2)  # the growth rows read W at T/2 and at T
        check_scalar("record_every", self.record_every, kind=int, low=1)
        if self.record_every > self.steps // 2:
            raise ValidationError(
                f"record_every == {self.record_every} with steps == {self.steps}: the growth rows read W at the "
                f"recorded step nearest T/2, which needs record_every <= steps // 2 = {self.steps // 2}; lower "
                "record_every or raise steps"
            )
        check_scalar("low", self.low, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        if check_scalar("high", self.high, high=1.0, high_inclusive=False) <= self.low:
            raise ValidationError(
                f"high == {self.high}, must be > low == {self.low}: no probability may lie in (low, high]; raise high "
                "or lower low"
            )
        check_scalar("chunk", self.chunk, kind=int, low=1)
        if check_scalar("max_draws", self.max_draws, kind=int, low=2) > MAX_DRAWS:
            raise ValidationError(
                f"max_draws == {self.max_draws}, must be <= {MAX_DRAWS} (ours: a bound on the run's time, 50 x the "
                "default)"
            )
        check_scalar("runs", self.runs, kind=int, low=2)  # enough / enough-pushed: a share needs two runs
        if self.runs > self.max_draws:
            raise ValidationError(
                f"runs == {self.runs} with max_draws == {self.max_draws}: no more runs can be kept than draws are "
                f"tried; lower runs or raise max_draws to >= {self.runs}"
            )
        check_seed_range(self.seed, self.max_draws - 1, f"max_draws == {self.max_draws}", "the draws")
        check_in("acceptance", self.acceptance, ("source", "ours"))
