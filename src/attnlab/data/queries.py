"""Self-attention as query-key problems: every token of a sequence (or the chosen ones) a query over the sequence.

Spec: multi-token §7 (every token a query; the causal mask keeps the keys up to the query).

Token selection has one query per sequence. In self-attention every token ``x_{i,q}`` queries the whole sequence
(or, causally, its prefix ``x_{i,0..q}``): each (sequence, query) pair is one token-selection problem with
``z = x_{i,q}`` and the sequence's label and head, so the SVMs, training and ``explain`` run on it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

from attnlab._validation import ValidationError
from attnlab.data.dataset import TokenSelectionData

__all__ = ["causal_queries", "every_query"]


def every_query(data: TokenSelectionData, queries: Sequence[int] | None = None) -> TokenSelectionData:
    """One problem per (sequence, query token): ``n * len(queries)`` problems over the sequence's ``T`` keys.

    Spec: multi-token §7.

    Parameters
    ----------
    data : TokenSelectionData
        Sequences ``X (n, T, d)``, labels, optional head (``data.Z`` and ``data.select`` are not used).
    queries : sequence of int, optional
        Query positions; default every position ``0..T-1``.

    Returns
    -------
    TokenSelectionData
        ``X`` of shape ``(n Q, T, d)`` (problem ``i Q + k`` is sequence ``i`` with query ``queries[k]``),
        ``Z[i Q + k] = x_{i, queries[k]}``, labels repeated per query, the same head.

    Examples
    --------
    >>> import torch
    >>> data = TokenSelectionData(torch.randn(2, 3, 4), y=[1, -1])
    >>> every_query(data).X.shape
    torch.Size([6, 3, 4])
    """
    positions = _positions(queries, data.T)
    Q = len(positions)
    X = data.X.repeat_interleave(Q, dim=0)  # (n Q, T, d): each sequence once per query
    Z = data.X[:, positions].reshape(data.n * Q, data.d)  # multi-token §7: z = x_{i,q}
    return TokenSelectionData(X, Z=Z, y=data.y.repeat_interleave(Q), v=data.v)


def causal_queries(data: TokenSelectionData, queries: Sequence[int] | None = None) -> list[TokenSelectionData]:
    """The causal problems: query ``q`` attends to keys ``0..q``; one data set per query position (its ``T = q + 1``).

    Spec: multi-token §7. Position 0 has a single key (nothing to select) and is left out of the default.

    Parameters
    ----------
    data : TokenSelectionData
        Sequences ``X`` of shape (n, T, d); their tokens are the keys.
    queries : sequence of int, optional
        Query positions in ``[1, T - 1]``; default every position but 0.

    Returns
    -------
    list of TokenSelectionData
        For each ``q`` in ``queries`` (default ``1..T-1``): ``X = data.X[:, :q+1]`` (n, q + 1, d), ``Z = x_{i,q}``.
    """
    positions = _positions(queries, data.T) if queries is not None else list(range(1, data.T))
    if 0 in positions:
        raise ValidationError("causal query 0 has a single key (itself): nothing to select; drop 0 from queries")
    return [TokenSelectionData(data.X[:, : q + 1], Z=data.X[:, q], y=data.y, v=data.v) for q in positions]


def _positions(queries: Sequence[int] | None, T: int) -> list[int]:  # noqa: N803 (the spec's symbol)
    if queries is None:
        return list(range(T))
    positions = [int(q) for q in queries]
    bad = [q for q in positions if not 0 <= q < T]
    if not positions or bad:
        raise ValidationError(f"queries must be positions in [0, {T - 1}], got {list(queries)}; pass e.g. [0, {T - 1}]")
    return positions
