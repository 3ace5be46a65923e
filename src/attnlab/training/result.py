"""What every training front door returns: one result type (built by :func:`attnlab.training.loop.run_loop`), with
one status word per run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["COMPLETED", "DIVERGED", "STATUSES", "STOPPED", "TrainingResult"]

COMPLETED = "completed"
"""Status of a run that ended its iterations (or reached its own end, such as a tolerance) in a good state."""
DIVERGED = "diverged"
"""Status of a run whose state turned bad (non-finite, or past a bound of its problem); it keeps its last good one."""
STOPPED = "stopped"
"""Status of a run that a callback stopped before its last step."""
STATUSES = (COMPLETED, DIVERGED, STOPPED)


@dataclass
class TrainingResult:
    """What a training front door returns.

    Family-specific values are entries of ``params`` (the final tensors) or ``extra`` and read as attributes too:
    ``result.W`` (the engine's combined matrices), ``result.V`` (regression), ``result.phi`` (a flow),
    ``result.best_step`` (NTK gradient descent), ``result.norms`` (the classifier).

    Attributes
    ----------
    frame : pandas.DataFrame
        Tidy rows, one per recorded (run, step): ``run`` and ``step`` first, then the recorded columns
        (:func:`attnlab.training.callbacks.tidy_frame`). A diverged run has no row past its last good state.
    status : list of str
        One of :data:`STATUSES` per run.
    last_step : list of int
        Per run, the step of the state it holds (for a diverged run, the last good one).
    params : dict of str to object
        The final state by name (tensors with the runs axis first where the problem has one).
    seconds : float
        Wall time of the loop.
    iterates : dict of str to torch.Tensor, optional
        States kept at the recorded steps, stacked along a leading axis (``"step"`` first), when asked for.
    rule_state : list
        The update rule's final state (momentum buffers, step counts), its tensors shaped as the parameters.
    model : object, optional
        The module the front door trained in place (``al.train``, the flow, NTK gradient descent, the classifier).
    extra : dict of str to object
        What else the front door reports (see its Returns).
    """

    frame: pd.DataFrame
    status: list[str]
    last_step: list[int]
    params: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    iterates: dict[str, Any] | None = None
    rule_state: list[Any] = field(default_factory=list)
    model: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # only reached when normal look-up fails; vars() avoids recursing before __init__ has run (copy, pickle)
        for where in ("params", "extra"):
            values = vars(self).get(where) or {}
            if name in values:
                return values[name]
        raise AttributeError(f"{type(self).__name__} has no attribute, parameter or extra value {name!r}")

    @property
    def diverged_runs(self) -> list[int]:
        """Indices of the runs that diverged (each holds its last good state)."""
        return [r for r, s in enumerate(self.status) if s == DIVERGED]

    @property
    def ok(self) -> bool:
        """No run diverged."""
        return DIVERGED not in self.status

    @property
    def message(self) -> str:
        """Why runs stopped early, one clause per diverged run (empty when none did). The loop's guard does not say
        which of its tests failed, so the clause names both: a non-finite state, or one past a bound of its problem
        (the regression's ``max_norm``)."""
        return "; ".join(
            f"run {r}: its state turned non-finite or out of its problem's bounds at step {self.last_step[r] + 1}; it "
            f"keeps step {self.last_step[r]}"
            for r in self.diverged_runs
        )
