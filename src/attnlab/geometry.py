"""Norms of attention matrices and the Bregman divergences of the l_p potential, one value per run.

Spec: mirror-descent-lp §1 (entrywise l_p norms), §3 (``psi = ||.||_p^p / p``, its Bregman divergence and the
directional divergence that measures convergence). Re-exported by :mod:`attnlab.metrics`.

The public functions check their arguments (matrices of real numbers, exponents in range, non-zero directions) and
call the unchecked ``_`` versions, which the training loop's recorder calls directly with its own typed tensors.
"""

from __future__ import annotations

from typing import Any

import torch

from attnlab._numerics import mirror_map
from attnlab._validation import (
    ValidationError,
    as_float64_tensor,
    check_finite_result,
    check_nonzero,
    check_scalar,
)

__all__ = ["bregman_divergence", "directional_bregman", "entrywise_norm", "matrix_norm"]

_ORDS = {"fro": "fro", "nuc": "nuc", "op": 2}


def _floats(name: str, value: Any) -> torch.Tensor:
    """``value`` as a tensor of real floats: a floating-point tensor as it is (no copy), anything else (an integer
    tensor, a NumPy array, nested lists) converted to float64; complex, text and 'meta' values are refused."""
    if isinstance(value, torch.Tensor) and value.is_floating_point() and not value.is_meta:
        return value
    return as_float64_tensor(name, value)


def _axes(name: str, tensor: torch.Tensor, least: int, shape: str) -> torch.Tensor:
    """Refuse ``tensor`` with fewer than ``least`` axes; ``shape`` is the expected one, e.g. ``"([R,] d, d_q)"``."""
    if tensor.dim() < least:
        raise ValidationError(f"{name} has shape {tuple(tensor.shape)}, expected {shape}; reshape it")
    return tensor


def _matrices(name: str, value: Any) -> torch.Tensor:
    """``value`` as matrices of floats, shape ``([R,] d, d_q)`` (:func:`_floats`)."""
    return _axes(name, _floats(name, value), 2, "([R,] d, d_q): one matrix per run")


def _alike(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The tensors in one dtype: as they are when they share one, else all float64 (float32 beside float64 data
    is converted, not refused: attnlab computes in float64)."""
    if len({t.dtype for t in tensors}) == 1:
        return tensors
    return tuple(t.to(torch.float64) for t in tensors)


def _broadcast(what: str = "leading (runs) axes", **shapes: tuple[int, ...]) -> torch.Size:
    """The broadcast of the named shapes (``what`` they are); refused, naming them, when they do not broadcast."""
    try:
        return torch.broadcast_shapes(*shapes.values())
    except RuntimeError:
        listed = ", ".join(f"{k} {tuple(s)}" for k, s in shapes.items())
        raise ValidationError(
            f"the {what} of {listed} do not broadcast; give them one shape (the same runs axis, or none)"
        ) from None


def _exponent(name: str, p: Any, strict: bool) -> float:
    """An exponent ``p >= 1`` (``inf`` allowed) of a norm, or ``p > 1`` (finite) of the potential (``strict``)."""
    if strict:
        return check_scalar(name, p, low=1.0, low_inclusive=False)
    return check_scalar(name, p, low=1.0, allow_inf=True)


def _norm_kind(kind: Any) -> str | float:
    """A norm's ``kind``: ``"fro"``, ``"nuc"``, ``"op"`` or a number ``p >= 1``; refused otherwise."""
    if isinstance(kind, str):
        if kind not in _ORDS:
            raise ValidationError(f"kind == {kind!r}, must be 'fro', 'nuc', 'op' or a number p >= 1")
        return kind
    return _exponent("kind", kind, strict=False)


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
    W : torch.Tensor, shape ([R,] d, d_q)
        The matrices.
    p : float
        The exponent, >= 1 (``inf`` for the largest entry).

    Returns
    -------
    torch.Tensor, shape ([R,])
        ``(sum_ij |W_ij|^p)^(1/p)``.

    Raises
    ------
    ValidationError
        When ``W`` has fewer than two axes or is not real, or ``p < 1``.
    """
    W = _matrices("W", W)
    return _entrywise_norm(W, _exponent("p", p, strict=False))


def _entrywise_norm(W: torch.Tensor, p: float) -> torch.Tensor:
    unit, s = _unit_scale(W, (-2, -1))
    return s * torch.linalg.vector_norm(unit, ord=p, dim=(-2, -1))


def matrix_norm(W: torch.Tensor, kind: str | float = "fro") -> torch.Tensor:
    """``"fro"``, ``"nuc"``, ``"op"`` or an entrywise ``p`` norm of ``W``, shape ``([R,])``.

    Computed on ``W / max |W_ij|`` and scaled back, so a norm of 4.2e304 is reported as such, not as ``inf``
    (the sum of squares would overflow), and one of 1e-200 not as 0.

    Parameters
    ----------
    W : torch.Tensor, shape ([R,] d, d_q)
        The matrices.
    kind : {"fro", "nuc", "op"} or float, default="fro"
        Frobenius, nuclear or operator (largest singular value) norm, or an entrywise ``l_p`` norm, p >= 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The norm of each matrix.

    Raises
    ------
    ValidationError
        When ``W`` has fewer than two axes or is not real, or ``kind`` is another string or a number below 1.
    """
    W = _matrices("W", W)
    return _matrix_norm(W, _norm_kind(kind))


def _matrix_norm(W: torch.Tensor, kind: str | float) -> torch.Tensor:
    if not isinstance(kind, str):
        return _entrywise_norm(W, float(kind))
    unit, s = _unit_scale(W, (-2, -1))
    return s * torch.linalg.matrix_norm(unit, _ORDS[kind])


def bregman_divergence(A: torch.Tensor, B: torch.Tensor, p: float) -> torch.Tensor:
    """``D_psi(A, B)`` for ``psi = (1/p) ||.||_p^p`` (entrywise), shape ``([R,])``.

    Spec: mirror-descent-lp §3 Def. 1: ``(1/p)||A||_p^p + ((p-1)/p)||B||_p^p - <grad psi(B), A>``, summed entry by
    entry without cancellation (:func:`_entry_divergences`): exact to 1e-13 relative (for ``p >= 1.1``) also where
    ``A`` is close to ``B`` (the three terms of Def. 1 nearly cancel there), and computed on ``A`` and ``B`` divided
    by a power of two near their largest entry, so entries near 1e200 do not overflow where the divergence is finite.

    Parameters
    ----------
    A, B : torch.Tensor, shape ([R,] d, d_q)
        The two points; ``B`` is where the potential is linearised.
    p : float
        The potential's exponent, > 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The divergence, >= 0 (0 when ``A == B``).

    Raises
    ------
    ValidationError
        When ``p <= 1``, ``A`` and ``B`` are not matrices of one shape (leading axes that broadcast), or the
        divergence is not finite (NaN or inf entries in ``A`` or ``B``, or a divergence beyond float64's range).
    """
    p = _exponent("p", p, strict=True)
    A, B = _alike(_matrices("A", A), _matrices("B", B))
    _broadcast("shapes", A=A.shape, B=B.shape)
    return check_finite_result(
        "bregman_divergence(A, B, p)",
        _bregman_divergence(A, B, p),
        "A or B has NaN or inf entries, or the divergence (of the order of max |entry|^p) passes float64's largest "
        "number 1.8e308; pass finite A and B, scaled down",
    )


# Entries with |a/b - 1| below this (and below 1/p) take the binomial series of (1 + u)^p - 1 - p u, whose terms fall by
# a factor 3 or more there; above it the form with expm1 loses a factor of at most 2 / ((p - 1) u) of its digits (4e-13
# relative at p = 1.1)
_SERIES_BELOW = 0.05


def _bregman_divergence(A: torch.Tensor, B: torch.Tensor, p: float) -> torch.Tensor:
    dims = (-2, -1)
    if A.shape[-2:].numel() == 0:  # matrices without entries: a sum of none (amax has no value to give)
        return (A * B).sum(dims)
    largest = torch.maximum(A.abs().amax(dim=dims), B.abs().amax(dim=dims))
    largest = torch.where((largest > 0) & torch.isfinite(largest), largest, torch.ones_like(largest))
    scale = torch.ldexp(torch.ones_like(largest), torch.frexp(largest).exponent)  # D(sA, sB) = s^p D(A, B)
    unit = scale[..., None, None]  # a power of two: A / unit and B / unit are exact, and so is their difference
    half = scale ** (p / 2)  # s^p in two factors: s^p alone overflows before a small divergence times it does
    return _entry_divergences(A / unit, B / unit, p).sum(dims) * half * half


def _entry_divergences(a: torch.Tensor, b: torch.Tensor, p: float) -> torch.Tensor:
    """``|a|^p/p - |b|^p/p - sign(b) |b|^(p-1) (a - b)`` entrywise (spec md §3 Def. 1 per entry), each ``>= 0``.

    Where ``a`` and ``b`` share their sign and ``|a| <= 2 |b|`` it is ``|b|^p g(u) / p`` with ``u = (a - b) / b``
    and ``g(u) = (1 + u)^p - 1 - p u``, whose three terms no longer cancel: a binomial series for small ``u``,
    ``expm1(p log1p(u)) - p u`` beyond; elsewhere (opposite signs, a zero, ``|a| > 2 |b|``) Def. 1's terms do not
    cancel much, and they are summed as they are.
    """
    grad_b = mirror_map(b, p)  # spec md §3: grad psi(b) = sign(b) |b|^(p-1)
    power_b = grad_b * b  # |b|^p
    near = (a * b > 0) & (a.abs() <= 2 * b.abs())
    u = torch.where(near, (a - b) / torch.where(near, b, 1.0), 0.0)
    small = u.abs() < min(_SERIES_BELOW, 1.0 / p)
    g = torch.where(small, _binomial_tail(torch.where(small, u, 0.0), p), torch.expm1(p * torch.log1p(u)) - p * u)
    direct = a.abs() ** p / p + (p - 1) / p * power_b - grad_b * a  # spec md §3 Def. 1
    return torch.where(near, power_b * g / p, direct)


def _binomial_tail(u: torch.Tensor, p: float) -> torch.Tensor:
    """``(1 + u)^p - 1 - p u = sum_{k >= 2} C(p, k) u^k`` for ``|u| < min(0.05, 1/p)``, by Horner's rule, with the
    terms up to where they fall below 1e-18 of the first (successive terms shrink by ``|p - k| |u| / (k + 1)``,
    at most 1/3 here)."""
    bound = min(_SERIES_BELOW, 1.0 / p)
    coefficients = [p * (p - 1) / 2]  # C(p, 2)
    while abs(coefficients[-1]) * bound ** (len(coefficients) - 1) > 1e-18 * abs(coefficients[0]):
        k = len(coefficients) + 1
        coefficients.append(coefficients[-1] * (p - k) / (k + 1))  # C(p, k + 1) = C(p, k) (p - k) / (k + 1)
    total = torch.full_like(u, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        total = total.mul_(u).add_(c)
    return total * u * u


def directional_bregman(W_ref: torch.Tensor, W: torch.Tensor, p: float) -> torch.Tensor:
    """``D_psi(W_ref/||W_ref||_p, W/||W||_p)``, shape ``([R,])``. Spec: mirror-descent-lp §3 (convergence metric).

    Parameters
    ----------
    W_ref : torch.Tensor, shape ([R,] d, d_q)
        The reference direction (an l_p SVM solution ``W^mm``), non-zero for every run.
    W : torch.Tensor, shape ([S,] [R,] d, d_q)
        The iterates (a path when ``S`` is given); a zero iterate (``W_0 = 0``) has no direction yet: its
        divergence is nan.
    p : float
        The potential's exponent, > 1.

    Returns
    -------
    torch.Tensor, shape ([S,] [R,])
        The Bregman divergence between the two directions, each normalised to unit l_p norm.

    Raises
    ------
    ValidationError
        When ``p <= 1``, ``W_ref`` is zero for some run, or the shapes of ``W_ref`` and ``W`` do not broadcast.
    """
    p = _exponent("p", p, strict=True)
    W_ref = check_nonzero("W_ref", _matrices("W_ref", W_ref), 2)
    W_ref, W = _alike(W_ref, _matrices("W", W))
    _broadcast("shapes", W_ref=W_ref.shape, W=W.shape)
    return _directional_bregman(W_ref, W, p)


def _directional_bregman(W_ref: torch.Tensor, W: torch.Tensor, p: float) -> torch.Tensor:
    a = W_ref / _entrywise_norm(W_ref, p)[..., None, None]
    b = W / _entrywise_norm(W, p)[..., None, None]
    return _bregman_divergence(a, b, p)
