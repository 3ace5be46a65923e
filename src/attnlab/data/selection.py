"""A token selection, parsed once: one token per sequence or a set per sequence, for one run or for R runs.

Spec: implicit-bias-ngd §1 (the selected token ``opt_i``), mirror-descent-lp §5 (a selection ``alpha``), multi-token
§2 (token sets ``O_i``).

Every ``select=`` of the library accepts the same forms: ``(n,)`` token indices (``([R,] n)`` where runs are
allowed), an ``(n, T)`` mask of token sets or ``n`` lists of indices, or a :class:`Selection`. The boundary parses
them into a :class:`Selection` (:meth:`Selection.parse`); inward, a :class:`Selection` is passed through without
being checked again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnlab._validation import ValidationError, check_select
from attnlab.data.token_sets import as_token_sets, is_token_sets

__all__ = ["Selection"]


@dataclass(frozen=True, eq=False)
class Selection:
    """Which tokens are selected: indices (one per sequence) or a mask of sets, checked when it was made.

    Attributes
    ----------
    tokens : torch.Tensor of shape ([R,] n), int64, or None
        One token per sequence (per run with a leading runs axis).
    sets : torch.Tensor of shape (n, T), bool, or None
        A set of tokens per sequence (multi-token §2).

    Examples
    --------
    >>> Selection.parse([0, 2, 1], n=3, T=4).tokens
    tensor([0, 2, 1])
    >>> Selection.parse([[0, 1], [2], [3]], n=3, T=4).is_sets
    True
    """

    tokens: torch.Tensor | None = None
    sets: torch.Tensor | None = None

    @classmethod
    def parse(cls, value: object, n: int, T: int, runs: int | None = None) -> Selection:  # noqa: N803 (spec's T)
        """The selection ``value`` names, checked against ``n`` sequences of ``T`` tokens (a Selection passes).

        Parameters
        ----------
        value : Selection, array-like of int of shape (n,) or (R, n), or token sets
            Token indices; with ``runs`` also one row per run; or an ``(n, T)`` mask, or ``n`` lists of indices.
        n, T : int
            Sequences and tokens per sequence.
        runs : int, optional
            Allow one row of indices per run, ``(runs, n)`` (token sets are then not read: one token per
            sequence).

        Returns
        -------
        Selection

        Raises
        ------
        ValidationError
            On a wrong shape or dtype, an index outside ``[0, T - 1]``, an empty set (the message names it).
        """
        if isinstance(value, Selection):
            return value
        if runs is None and is_token_sets(value):
            return cls(sets=as_token_sets(value, n, T))  # multi-token §2
        return cls(tokens=check_select("select", value, n, T, runs=runs))

    @classmethod
    def attended(cls, logits: torch.Tensor) -> Selection:
        """The token of largest logit in each sequence: the selection a head's attention makes.

        Spec: implicit-bias-ngd §2 (the softmax of ``x_t^T W z`` is largest at the largest logit).

        Parameters
        ----------
        logits : torch.Tensor, shape ([R,] n, T)
            :func:`attnlab.models.functional.attention_logits` of the head.

        Returns
        -------
        Selection
        """
        return cls(tokens=logits.argmax(dim=-1))

    @property
    def is_sets(self) -> bool:
        """Whether it holds token sets rather than one token per sequence."""
        return self.sets is not None

    @property
    def value(self) -> torch.Tensor:
        """The tensor it holds: ``tokens`` or ``sets``."""
        return self.sets if self.is_sets else self.tokens

    def one_token(self, program: str) -> torch.Tensor:
        """``tokens``, refused for token sets by name of ``program`` (a one-token program).

        Parameters
        ----------
        program : str
            The program that takes one token per sequence, for the message.

        Returns
        -------
        torch.Tensor of shape ([R,] n), int64
        """
        if self.is_sets:
            raise ValidationError(
                f"{program} takes one selected token per sequence, but the selection holds token sets (an (n, T) "
                "mask); solve sets with attention_svm(data, 'fro' or 'nuc', select=sets) or set_direction_svm"
            )
        return self.tokens
