"""Data models of the l_p mirror-descent paper: the unit-norm Gaussian generator and the 2x3x2 joint toy set.

Spec: mirror-descent-lp §6 (data generators of the official code).
"""

from __future__ import annotations

import torch

from attnlab._validation import check_scalar
from attnlab.data._random import check_entries, generator
from attnlab.data.dataset import TokenSelectionData

__all__ = ["joint_toy", "unit_gaussian"]


def _unit_rows(A: torch.Tensor) -> torch.Tensor:
    return A / torch.linalg.vector_norm(A, dim=-1, keepdim=True)  # spec §6: each row scaled to unit l2 norm


def unit_gaussian(n: int = 6, T: int = 8, d: int = 10, *, seed: int = 0) -> TokenSelectionData:  # noqa: N803
    """The official synthetic generator: unit-norm Gaussian tokens, queries and head, random labels.

    Spec: mirror-descent-lp §6 (official ``generate_data.py``; sizes of experiment E1 in §9).

    Parameters
    ----------
    n : int, default=6
        Number of sequences.
    T : int, default=8
        Tokens per sequence (>= 2).
    d : int, default=10
        Token dimension.
    seed : int, default=0
        Seed of the ``torch.Generator`` (the paper's experiments use seeds 1-100).

    Returns
    -------
    TokenSelectionData
        ``X`` (n, T, d) with unit rows, separate queries ``Z`` (n, d) with unit rows, ``y`` (n,), unit head
        ``v`` (d,); no ``select`` (the paper selects tokens after training, from the final softmax).

    Notes
    -----
    Draw order v, Y, X, Z from one generator, as in the official code: ``v ~ N(0, I_d)`` normalised,
    ``Y_i = +1`` if ``N(0, 1) > 0`` else ``-1``, ``X ~ N(0, I)`` and ``Z ~ N(0, I)`` with every row normalised.
    We draw in float64; the official script's exact numbers are not reproduced (not verified against it).

    Examples
    --------
    >>> data = unit_gaussian(seed=1)
    >>> (data.n, data.T, data.d)
    (6, 8, 10)
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("T", T, kind=int, low=2)
    check_scalar("d", d, kind=int, low=1)
    check_entries("n T d + n d", n * T * d + n * d, n=n, T=T, d=d)
    gen = generator(seed)
    v = _unit_rows(torch.randn(d, generator=gen, dtype=torch.float64))  # spec §6: v ~ N(0, I), v / ||v||
    y = torch.where(torch.randn(n, generator=gen, dtype=torch.float64) > 0, 1.0, -1.0)  # spec §6: Y = ±1
    X = _unit_rows(torch.randn(n, T, d, generator=gen, dtype=torch.float64))  # spec §6: (n, T, d), unit rows
    Z = _unit_rows(torch.randn(n, d, generator=gen, dtype=torch.float64))  # spec §6: (n, d), unit rows
    return TokenSelectionData(X, Z=Z, y=y.to(torch.float64), v=v)


def joint_toy() -> TokenSelectionData:
    """The 2x3x2 toy set of the joint-training experiment, with queries ``z_i = x_{i,1}``.

    Spec: mirror-descent-lp §6 (joint toy dataset) and §9 E3.

    Returns
    -------
    TokenSelectionData
        ``X`` (2, 3, 2), ``Z = X[:, 0]`` (2, 2), ``y = (1, -1)``; no head (the experiment trains it from
        ``v_0 = 0``) and no ``select``.

    Examples
    --------
    >>> joint_toy().X[1, 0].tolist()
    [0.4, -2.2]
    """
    X = torch.tensor(  # spec §6: X_1, X_2 of the official joint_training.py
        [
            [[-2.7, 1.2], [1.4, 2.1], [1.3, -0.1]],
            [[0.4, -2.2], [-1.1, -0.4], [0.9, 0.1]],
        ],
        dtype=torch.float64,
    )
    return TokenSelectionData(X, y=torch.tensor([1.0, -1.0], dtype=torch.float64))
