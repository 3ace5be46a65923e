"""What a classifier that learned nothing scores: the majority-class rate, the accuracy a run must exceed to be said
to have learned, and whether a run did no better than chance at all.

Spec: implicit-bias-ngd §9 and mirror-descent-lp §9 E4-E5 (every optimizer trains the real models to a good
accuracy; a run left at chance is a setup defect, ours). The comparison's ``each-run-learns`` property asks for
evidence of learning (:func:`chance_bound`); the tuning's stall test (:func:`~attnlab.nets.tuning.tune_rates`)
asks for evidence of its absence (:func:`at_chance`), so that a seed still learning slowly is not taken for a stall.
"""

from __future__ import annotations

import math

import torch

from attnlab._validation import ValidationError, check_instance, check_scalar

__all__ = ["at_chance", "binomial_se", "chance_bound", "majority_rate"]


def majority_rate(labels: torch.Tensor) -> float:
    """The accuracy of always predicting the most frequent class.

    Parameters
    ----------
    labels : torch.Tensor, shape (n,)
        Non-negative integer class labels, n >= 1.

    Returns
    -------
    float
        The most frequent class's share of ``labels``.

    Raises
    ------
    ValidationError
        When ``labels`` is not a non-empty 1-D tensor of non-negative integers (a NumPy array or a list included).
    """
    check_instance("labels", labels, torch.Tensor, "pass torch.as_tensor(labels) (integer class labels)")
    integer = not (labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool)
    if labels.ndim != 1 or not len(labels) or not integer or bool((labels < 0).any()):
        raise ValidationError(
            f"labels must be a non-empty 1-D tensor of non-negative integer classes; got shape "
            f"{tuple(labels.shape)}, dtype {labels.dtype}"
        )
    return float(torch.bincount(labels).max()) / len(labels)


def binomial_se(rate: float, size: int) -> float:
    """The binomial standard error of a proportion at ``rate`` over ``size`` draws: ``sqrt(rate (1 - rate) / size)``.

    Parameters
    ----------
    rate : float
        A proportion in [0, 1]: an accuracy (e.g. the majority-class rate, :func:`majority_rate`), a coverage.
    size : int
        Draws (examples scored, samples drawn), >= 1.

    Returns
    -------
    float

    Raises
    ------
    ValidationError
        When ``rate`` or ``size`` is out of its range.
    """
    check_scalar("rate", rate, low=0.0, high=1.0)
    check_scalar("size", size, kind=int, low=1)
    return math.sqrt(rate * (1 - rate) / size)


def chance_bound(rate: float, size: int, standard_errors: float) -> float:
    """The accuracy a run must exceed to have learned: ``rate + k`` :func:`binomial_se` ``(rate, size)``.

    Parameters
    ----------
    rate : float
        The majority-class rate in [0, 1] (:func:`majority_rate`).
    size : int
        Examples scored, >= 1.
    standard_errors : float
        ``k`` >= 0: binomial standard errors of an accuracy at ``rate`` over ``size`` examples.

    Returns
    -------
    float

    Raises
    ------
    ValidationError
        When ``rate``, ``size`` or ``standard_errors`` is out of its range.
    """
    check_scalar("standard_errors", standard_errors, low=0.0)
    return rate + standard_errors * binomial_se(rate, size)


def at_chance(accuracy: float, rate: float, size: int) -> bool:
    """Whether a run answered no more of ``size`` examples correctly than always predicting the majority class.

    Compared as counts of examples (``round(accuracy size) <= round(rate size)``), so the float rounding of either
    accuracy cannot decide it. A run stalled on a constant output scores exactly the majority rate, or below it when
    it predicts another class.

    Parameters
    ----------
    accuracy : float
        The run's accuracy in [0, 1] over the ``size`` examples.
    rate : float
        Their majority-class rate in [0, 1] (:func:`majority_rate`).
    size : int
        Examples scored, >= 1.

    Returns
    -------
    bool

    Raises
    ------
    ValidationError
        When an argument is out of its range.
    """
    check_scalar("accuracy", accuracy, low=0.0, high=1.0)
    check_scalar("rate", rate, low=0.0, high=1.0)
    check_scalar("size", size, kind=int, low=1)
    return round(accuracy * size) <= round(rate * size)
