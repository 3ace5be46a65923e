"""The failure classes of the max-margin programs.

Spec: mirror-descent-lp §7 and kq-nuclear-norm §5 ("SVM feasible": the solver status must be optimal).
"""

from __future__ import annotations

from attnlab._validation import ValidationError

__all__ = [
    "InfeasibleProgramError",
    "SolverAccuracyWarning",
    "SolverToleranceError",
    "TieWarning",
    "WholeSequenceWarning",
]


class InfeasibleProgramError(ValidationError):
    """A max-margin program has no solution (or the solver failed); the message names the status, sizes and cause.

    A subclass of :class:`~attnlab._validation.ValidationError`, because in practice the cause is the input data
    (a selected token equal to another token, contradictory constraints), so the command line reports it as bad
    input.
    """


class SolverToleranceError(InfeasibleProgramError):
    """The solver reported a non-optimal status on separable constraints: near ties put the solution beyond its
    tolerances at this scale. The message gives the smallest constraint and what to try (the exact dual, the other
    solver). A subclass of :class:`InfeasibleProgramError`, so callers that skip infeasible programs skip it too."""


class SolverAccuracyWarning(UserWarning):
    """A solve finished but its KKT residual (or its status, ``optimal_inaccurate``) says it is not accurate."""


class TieWarning(UserWarning):
    """The optimal token of some sequences is not unique (equal scores), so the selection took the lowest index."""


class WholeSequenceWarning(UserWarning):
    """Some token sets are their whole sequence: those sequences contribute equal logits only (no margin).

    The source's multi-token program keeps such sequences (multi-token §2); the message names them, so a caller can
    drop them (a different program, with another direction) or accept them.
    """
