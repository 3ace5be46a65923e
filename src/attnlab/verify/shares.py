"""Confidence bounds on a share of runs: how many runs a majority needs before a row may call it one.

A theory row that reads "most runs do X" judges a share of runs against 1/2; over a handful of runs a share clears
1/2 by chance under a mechanism that favours neither side. :func:`share_lower_bound` gives the exact one-sided
binomial (Clopper-Pearson) lower bound that such a row compares instead.
"""

from __future__ import annotations

import operator

from scipy.stats import binomtest

from attnlab._validation import ValidationError

__all__ = ["share_lower_bound"]


def share_lower_bound(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, str]:
    """One-sided Clopper-Pearson lower confidence bound on a share, and the sentence that says so.

    A share over a handful of runs passes "> 1/2" by chance half the time under a mechanism that favours neither
    side; its exact binomial lower bound passes only when the runs show the majority at the stated confidence.

    Parameters
    ----------
    successes : int
        Runs where the event held, ``0 <= successes <= trials``.
    trials : int
        Runs, ``>= 1``.
    confidence : float, default=0.95
        One-sided confidence level, in (0, 1).

    Returns
    -------
    bound : float
        The largest share ``p`` with ``P(Binomial(trials, p) >= successes) <= 1 - confidence`` (0 when
        ``successes == 0``).
    text : str
        E.g. ``"one-sided 95% Clopper-Pearson lower bound of 27/32 runs (share 0.844)"``.

    Raises
    ------
    ValidationError
        When the counts are not integers with ``0 <= successes <= trials`` and ``trials >= 1``, or ``confidence`` is
        outside (0, 1).

    Examples
    --------
    >>> round(share_lower_bound(7, 7)[0], 3)  # 0.05 ** (1 / 7)
    0.652
    """
    try:
        successes, trials = operator.index(successes), operator.index(trials)
    except TypeError:
        raise ValidationError(
            f"share_lower_bound takes integer counts, got successes={successes!r}, trials={trials!r}; count runs"
        ) from None
    if trials < 1 or not 0 <= successes <= trials:
        raise ValidationError(
            f"share_lower_bound needs 0 <= successes <= trials and trials >= 1, got {successes} of {trials}"
        )
    if not 0.0 < confidence < 1.0:
        raise ValidationError(f"share_lower_bound's confidence must lie in (0, 1), e.g. 0.95; got {confidence!r}")
    interval = binomtest(successes, trials, alternative="greater").proportion_ci(confidence, method="exact")
    bound = float(interval.low)
    text = (
        f"one-sided {confidence:.0%} Clopper-Pearson lower bound of {successes}/{trials} runs "
        f"(share {successes / trials:.3g})"
    )
    return bound, text
