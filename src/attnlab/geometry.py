"""Norms of attention matrices and the Bregman divergences of the l_p potential, one value per run.

Spec: mirror-descent-lp §1 (entrywise l_p norms), §3 (``psi = ||.||_p^p / p``, its Bregman divergence and the
directional divergence that measures convergence). Re-exported by :mod:`attnlab.metrics`.
"""

from __future__ import annotations

import torch

from attnlab._numerics import mirror_map
from attnlab._validation import ValidationError, check_scalar

__all__ = ["bregman_divergence", "directional_bregman", "entrywise_norm", "matrix_norm"]


def _unit_scale(A: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A / s, s)`` with ``s`` the largest ``|entry|`` per run (1 where that is 0 or not finite), shape of ``s``
    ``([R,])``: norms of ``A / s`` neither overflow nor underflow (``||A|| = s ||A / s||`` for any norm)."""
    s = A.abs().amax(dim=dims)
    s = torch.where((s > 0) & torch.isfinite(s), s, torch.ones_like(s))
    return A / s.reshape(s.shape + (1,) * len(dims)), s


def entrywise_norm(W: torch.Tensor, p: float) -> torch.Tensor:
    """Entrywise ``l_p`` norm over the last two axes, shape ``([R,])``. Spec: mirror-descent-lp §1.

    Computed as ``s ||W / s||_p`` with ``s = max |W_ij|``, so ``|W_ij|^p`` never overflows or underflows.

    Parameters
    ----------
    W : torch.Tensor, shape ([R,] d, d)
        The matrices.
    p : float
        The exponent, >= 1 (``inf`` for the largest entry).

    Returns
    -------
    torch.Tensor, shape ([R,])
        ``(sum_ij |W_ij|^p)^(1/p)``.
    """
    unit, s = _unit_scale(W, (-2, -1))
    return s * torch.linalg.vector_norm(unit, ord=p, dim=(-2, -1))


def matrix_norm(W: torch.Tensor, kind: str | float = "fro") -> torch.Tensor:
    """``"fro"``, ``"nuc"``, ``"op"`` or an entrywise ``p`` norm of ``W``, shape ``([R,])``.

    Computed on ``W / max |W_ij|`` and scaled back, so a norm of 4.2e304 is reported as such, not as ``inf``
    (the sum of squares would overflow), and one of 1e-200 not as 0.

    Parameters
    ----------
    W : torch.Tensor, shape ([R,] d, d)
        The matrices.
    kind : {"fro", "nuc", "op"} or float, default="fro"
        Frobenius, nuclear or operator (largest singular value) norm, or an entrywise ``l_p`` norm, p >= 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The norm of each matrix.
    """
    if isinstance(kind, (int, float)) and not isinstance(kind, bool):
        return entrywise_norm(W, float(kind))
    ords = {"fro": "fro", "nuc": "nuc", "op": 2}
    if kind not in ords:
        raise ValidationError(f"kind == {kind!r}, must be 'fro', 'nuc', 'op' or a number p >= 1")
    unit, s = _unit_scale(W, (-2, -1))
    return s * torch.linalg.matrix_norm(unit, ords[kind])


def bregman_divergence(A: torch.Tensor, B: torch.Tensor, p: float) -> torch.Tensor:
    """``D_psi(A, B)`` for ``psi = (1/p) ||.||_p^p`` (entrywise), shape ``([R,])``.

    Spec: mirror-descent-lp §3 Def. 1: ``(1/p)||A||_p^p + ((p-1)/p)||B||_p^p - <grad psi(B), A>``.

    Parameters
    ----------
    A, B : torch.Tensor, shape ([R,] d, d)
        The two points; ``B`` is where the potential is linearised.
    p : float
        The potential's exponent, > 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The divergence, >= 0 (0 when ``A == B``).
    """
    check_scalar("p", p, low=1.0, low_inclusive=False)
    dims = (-2, -1)
    grad_b = mirror_map(B, p)  # spec md §3: grad psi(B)
    return (A.abs() ** p).sum(dims) / p + (p - 1) / p * (B.abs() ** p).sum(dims) - (grad_b * A).sum(dims)


def directional_bregman(W_ref: torch.Tensor, W: torch.Tensor, p: float) -> torch.Tensor:
    """``D_psi(W_ref/||W_ref||_p, W/||W||_p)``, shape ``([R,])``. Spec: mirror-descent-lp §3 (convergence metric).

    Parameters
    ----------
    W_ref : torch.Tensor, shape ([R,] d, d)
        The reference direction (an l_p SVM solution ``W^mm``).
    W : torch.Tensor, shape ([R,] d, d)
        The iterate; neither may be zero.
    p : float
        The potential's exponent, > 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The Bregman divergence between the two directions, each normalised to unit l_p norm.
    """
    a = W_ref / entrywise_norm(W_ref, p)[..., None, None]
    b = W / entrywise_norm(W, p)[..., None, None]
    return bregman_divergence(a, b, p)
