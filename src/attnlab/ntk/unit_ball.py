"""Assumption 6.1 (inputs in the unit ball): detect rows outside it and rescale, saying how; and the reference
setting's random rows on the unit sphere.

Spec: softmax-ntk-diffusion §1 (``||x_i|| <= 1``), §7.6 (Assumption 6.1), §9 (unit-norm rows).
"""

from __future__ import annotations

import warnings

import torch

from attnlab._validation import check_scalar, check_tensor
from attnlab.ntk._checks import check_generator

__all__ = ["to_unit_ball", "unit_rows"]

_ROUND_OFF = 1e-12  # rows normalized to norm 1 in float64 may read 1 + 1e-16; they are inside


def to_unit_ball(X: torch.Tensor, name: str = "X") -> tuple[torch.Tensor, float]:
    """Divide all rows of ``X`` by their largest norm when some row lies outside the unit ball.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Finite rows: a tensor, a NumPy array or nested lists of real numbers (float32 and integers are converted).
    name : str, default="X"
        Argument name used in the warning.

    Returns
    -------
    X_scaled : torch.Tensor, shape (n, d), float64
        ``X / scale``; when every row has norm at most 1, ``X`` itself if it is a float64 tensor, else its float64
        copy.
    scale : float
        The divisor (1.0 when nothing changed); divide test inputs by it too.

    Warns
    -----
    UserWarning
        When rows were rescaled: how many, the largest norm, and the divisor.

    Raises
    ------
    ValidationError
        When ``X`` is not a finite real array of shape (n, d) (a NaN row has no norm to compare with 1).
    """
    checked = check_tensor(name, X, "nd")
    if not (isinstance(X, torch.Tensor) and X.dtype == torch.float64):
        X = checked  # float32, integers, arrays and lists: their float64 copy comes back
    norms = X.norm(dim=-1)
    largest = float(norms.max()) if norms.numel() else 0.0
    if largest <= 1.0 + _ROUND_OFF:
        return X, 1.0
    outside = int((norms > 1.0 + _ROUND_OFF).sum())
    warnings.warn(
        f"{name}: {outside} of {X.shape[0]} rows lie outside the unit ball (largest norm {largest:.4g}); the theory "
        f"assumes ||x_i|| <= 1 (Assumption 6.1), so all rows were divided by {largest:.4g}. Divide test inputs by "
        f"the same factor, or rescale {name} yourself to silence this warning.",
        UserWarning,
        stacklevel=3,
    )
    return X / largest, largest


def unit_rows(n: int, d: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` Gaussian rows scaled to ``||x_i|| = 1``: uniform on the unit sphere (spec §9 reference setting).

    Parameters
    ----------
    n, d : int
        Rows and their dimension.
    generator : torch.Generator
        Drawn from in order, so that successive calls give independent sets.

    Returns
    -------
    torch.Tensor, shape (n, d), float64

    Raises
    ------
    ValidationError
        When ``n`` or ``d`` is not an int >= 1, or ``generator`` is not a ``torch.Generator``.
    """
    check_scalar("n", n, kind=int, low=1)
    check_scalar("d", d, kind=int, low=1)
    check_generator("generator", generator)
    X = torch.randn(n, d, generator=generator, dtype=torch.float64)
    return X / X.norm(dim=1, keepdim=True)  # spec §9: ||x_i|| = 1
