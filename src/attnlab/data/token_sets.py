"""Token sets ``O_i``: the tokens each sequence keeps with finite, non-zero softmax mass.

Spec: multi-token §2 (selected sets, the thresholds that read them off a trained softmax, degenerate selections).

A selection of sets is a boolean mask of shape ``(n, T)`` (``True`` for ``tau in O_i``). One token per sequence is
the special case of singleton sets; every function that takes ``select=`` as ``(n,)`` token indices also takes
such a mask (or a list of ``n`` lists of indices).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from attnlab._validation import ValidationError, check_scalar, check_tensor

__all__ = ["as_token_sets", "is_token_sets", "sets_from_probabilities", "whole_sequences"]

#: The source's thresholds (TF-as-SVM, multi_token_converge.ipynb): a token is in O_i when its softmax exceeds
#: ``HIGH``, out of it when at most ``LOW``; anything in between is refused.
LOW, HIGH = 1e-6, 1e-3


def _shown(rows: Sequence[int]) -> str:
    rows = list(rows)
    more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
    return f"{rows[:5]}{more}"


def is_token_sets(select: object) -> bool:
    """Whether ``select`` is a selection of sets (a 2-D mask or a list of lists) rather than ``(n,)`` indices."""
    if select is None:
        return False
    if isinstance(select, (torch.Tensor, np.ndarray)):
        return select.ndim == 2
    if isinstance(select, Sequence) and not isinstance(select, str):
        return any(
            isinstance(s, (Sequence, set, frozenset)) or (isinstance(s, (np.ndarray, torch.Tensor)) and s.ndim > 0)
            for s in select
        )
    return False


def as_token_sets(select: object, n: int, T: int, name: str = "select") -> torch.Tensor:  # noqa: N803 (spec's)
    """A validated ``(n, T)`` boolean mask of token sets.

    Spec: multi-token §2.

    Parameters
    ----------
    select : array-like of bool, shape (n, T), or sequence of n sequences of int
        The sets ``O_i``: a mask, or the token indices of each set.
    n, T : int
    name : str, default="select"
        The caller's name for ``select``, used in every message.

    Returns
    -------
    torch.Tensor, shape (n, T), bool

    Raises
    ------
    ValidationError
        On a wrong shape, an index outside ``[0, T - 1]``, or an empty set; the message names the sequences.

    Notes
    -----
    A set may be its whole sequence: in the source's program such a sequence asks only for equal logits (no token
    is separated from the set there, so it has no margin constraint). The programs that read the sets warn about
    those sequences (:func:`whole_sequences`) and refuse a selection in which every set is its whole sequence.
    """
    if isinstance(select, (torch.Tensor, np.ndarray)) and select.ndim == 2:
        arr = np.asarray(select.cpu() if isinstance(select, torch.Tensor) else select)
        if arr.shape != (n, T):
            raise ValidationError(f"{name} as a mask of token sets must have shape ({n}, {T}), got {arr.shape}")
        if arr.dtype != bool and not np.isin(arr, (0, 1)).all():
            raise ValidationError(f"{name} as a mask of token sets must hold only 0/1 (or bool) entries")
        mask = torch.as_tensor(arr.astype(bool))
    else:
        if not isinstance(select, Sequence) or len(select) != n:
            raise ValidationError(
                f"{name} as token sets must be a (n, T) = ({n}, {T}) mask or {n} lists of token indices, got "
                f"{type(select).__name__}"
            )
        mask = torch.zeros(n, T, dtype=torch.bool)
        for i, tokens in enumerate(select):
            idx = np.atleast_1d(np.asarray(tokens if not isinstance(tokens, (set, frozenset)) else sorted(tokens)))
            if idx.size and (not np.issubdtype(idx.dtype, np.integer) or idx.min() < 0 or idx.max() >= T):
                raise ValidationError(
                    f"{name}[{i}] = {idx.tolist()} must hold token indices in [0, {T - 1}]; fix sequence {i}'s set"
                )
            mask[i, torch.as_tensor(idx.astype(np.int64))] = True
    empty = torch.nonzero(~mask.any(dim=1)).flatten().tolist()
    if empty:
        raise ValidationError(f"the token sets of sequences {_shown(empty)} are empty; every O_i needs a token")
    return mask


def whole_sequences(mask: torch.Tensor) -> list[int]:
    """The sequences whose set is the whole sequence (no token outside it: equalities only, no margin).

    Spec: multi-token §2.

    Parameters
    ----------
    mask : torch.Tensor, shape (n, T), bool
        Token sets (:func:`as_token_sets`).

    Returns
    -------
    list of int
        Their indices, ascending.
    """
    return torch.nonzero(mask.all(dim=1)).flatten().tolist()


def refuse_no_margin(mask: torch.Tensor, what: str) -> list[int]:
    """Refuse sets that are all whole sequences (no margin constraint anywhere); return the whole ones.

    Spec: multi-token §2-3 (a whole-sequence set contributes equalities only; with no other set the direction
    program has no margin to maximise).
    """
    whole = whole_sequences(mask)
    if len(whole) == mask.shape[0]:
        raise ValidationError(
            f"{what}: the token sets of sequences {_shown(whole)} (every sequence) hold the whole sequence (all "
            f"{mask.shape[1]} tokens), so no token is separated from a set anywhere and no margin constraint is "
            "left; leave at least one token out of some set (or train longer: the softmax has not saturated)"
        )
    return whole


# A row of softmax weights sums to 1 up to rounding: float32 rows of T entries sum within T * 6e-8 of it, so 1e-5
# passes any softmax a model computes (T up to ~100) and refuses a row that is no distribution (a sum of 1.8).
_ROW_SUM_TOL = 1e-5


def sets_from_probabilities(probabilities: object, low: float = LOW, high: float = HIGH) -> torch.Tensor:
    """The sets ``O_i = {tau : s_{i,tau} > high}`` of a trained softmax, refusing tokens between the thresholds.

    Spec: multi-token §2 (the source's rule: a token is kept above ``high``, dropped at or below ``low``).

    Parameters
    ----------
    probabilities : array-like, shape (n, T)
        Softmax attention of each sequence: entries ``>= 0``, rows summing to 1 (within ``1e-5``).
    low, high : float, default=1e-6, 1e-3
        Thresholds, ``0 < low < high < 1``.

    Returns
    -------
    torch.Tensor, shape (n, T), bool
        A set may be its whole sequence (every token above ``high``): the source's program keeps it, with
        equal logits only (:func:`whole_sequences`).

    Raises
    ------
    ValidationError
        On a row that is not a distribution (a negative entry, a sum away from 1), when a probability lies in
        ``(low, high]`` (the thresholds leave it neither kept nor dropped), when no token of any sequence is
        dropped (the softmax has saturated nowhere: every set is its whole sequence), or on bad thresholds; the
        message names the sequences.
    """
    check_scalar("low", low, low=0.0, low_inclusive=False)
    check_scalar("high", high, low=float(low), low_inclusive=False, high=1.0, high_inclusive=False)
    s = check_tensor("probabilities", probabilities, "nT", min_size={"n": 1, "T": 1})
    negative = torch.nonzero((s < 0).any(dim=1)).flatten().tolist()
    if negative:
        raise ValidationError(
            f"probabilities of sequences {_shown(negative)} have negative entries: pass softmax weights (each row "
            "a distribution over the sequence's tokens), not logits"
        )
    sums = s.sum(dim=1)
    off = torch.nonzero((sums - 1).abs() > _ROW_SUM_TOL).flatten().tolist()
    if off:
        raise ValidationError(
            f"probabilities of sequences {_shown(off)} do not sum to 1 (sums {_shown([round(float(sums[i]), 6) for i in off])}"
            f", tolerance {_ROW_SUM_TOL:g}): pass one softmax row per sequence (e.g. torch.softmax(logits, -1))"
        )
    between = ((s > low) & (s <= high)).any(dim=1)
    if bool(between.any()):
        rows = torch.nonzero(between).flatten().tolist()
        raise ValidationError(
            f"sequences {_shown(rows)} have softmax probabilities in ({low:g}, {high:g}]: the thresholds leave "
            "those tokens neither in the set nor out of it; train longer (the softmax saturates) or move the "
            "thresholds"
        )
    mask = as_token_sets(s > high, s.shape[0], s.shape[1])
    refuse_no_margin(mask, f"sets read off the softmax at the thresholds ({low:g}, {high:g}]")
    return mask
