"""The data model of the multi-token (SVM-equivalence) experiments: unit tokens, cross-attention queries, a ReLU head.

Spec: multi-token §5 (the TF-as-SVM multi-token setting of Tarzanagh, Li, Thrampoulidis and Oymak, arXiv 2308.16898).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from attnlab._validation import check_scalar
from attnlab.data._random import check_entries, generator, random_labels
from attnlab.data.dataset import TokenSelectionData

__all__ = ["MultiTokenDraw", "multi_token"]


class MultiTokenDraw(NamedTuple):
    """One draw of the multi-token setting.

    Attributes
    ----------
    data : TokenSelectionData
        Unit-norm tokens ``X`` (n, T, d), unit-norm cross-attention queries ``Z`` (n, d), labels ``y`` (n,); no
        linear head.
    V : torch.Tensor, shape (d, d)
        Value matrix of the head ``h(u) = v^T ReLU(V u)``, unit Frobenius norm.
    v : torch.Tensor, shape (d,)
        Output weights, all ones.
    """

    data: TokenSelectionData
    V: torch.Tensor
    v: torch.Tensor


def multi_token(n: int = 3, T: int = 4, d: int = 4, *, seed: int = 0) -> MultiTokenDraw:  # noqa: N803
    """Draw the TF-as-SVM multi-token setting: ``f(X) = 1^T ReLU(V X^T softmax(X W z))``.

    Spec: multi-token §5 (data model; defaults n = 3, T = 4 of the source's notebook).

    Parameters
    ----------
    n : int, default=3
        Sequences.
    T : int, default=4
        Tokens per sequence (>= 2).
    d : int, default=4
        Token dimension.
    seed : int, default=0
        Seed of the ``torch.Generator``.

    Returns
    -------
    MultiTokenDraw
        Build the head with ``attnlab.models.ReluHead(draw.V, draw.v)``.

    Notes
    -----
    ``V_jk ~ N(0, 1)`` scaled to ``||V||_F = 1``; ``x_it, z_i ~ N(0, I_d)`` scaled to unit norm; ``y_i`` uniform on
    {-1, +1}; ``v = 1``. The source draws in float32 (then casts) and uses the transpose of our ``V`` (its values
    are ``X V``); the draws are ours, the distribution is the same. A draw whose labels are all +1 is kept: the
    experiment rejects it, as the source does.

    Examples
    --------
    >>> draw = multi_token(d=6, seed=1)
    >>> draw.data.X.shape, round(float(draw.V.norm()), 12)
    (torch.Size([3, 4, 6]), 1.0)
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("T", T, kind=int, low=2)
    check_scalar("d", d, kind=int, low=1)
    check_entries("n T d + d^2", n * T * d + d * d, n=n, T=T, d=d)
    gen = generator(seed)
    V = torch.randn(d, d, generator=gen, dtype=torch.float64)
    V = V / torch.linalg.matrix_norm(V)  # multi-token §5: ||V||_F = 1
    X = torch.randn(n, T, d, generator=gen, dtype=torch.float64)
    X = X / torch.linalg.vector_norm(X, dim=-1, keepdim=True)  # multi-token §5: ||x_it|| = 1
    y = random_labels(n, gen)
    Z = torch.randn(n, d, generator=gen, dtype=torch.float64)
    Z = Z / torch.linalg.vector_norm(Z, dim=-1, keepdim=True)  # multi-token §5: ||z_i|| = 1
    return MultiTokenDraw(TokenSelectionData(X, Z=Z, y=y), V, torch.ones(d, dtype=torch.float64))
