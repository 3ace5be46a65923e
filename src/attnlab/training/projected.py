"""Projected normalised l_p mirror descent on the ball ``||W||_p <= R``: a solver of l_p-constrained problems.

Spec: mirror-descent-lp §4 (normalised l_p-AttGD step), §3 (psi, its Bregman divergence), §8.1 (the constrained
ERM of the regularisation path, which :func:`attnlab.svm.constrained_erm` solves by SLSQP).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from attnlab._validation import ValidationError, check_scalar, check_tensor
from attnlab.metrics import entrywise_norm
from attnlab.optim.mirror_descent import mirror_descent

__all__ = ["projected_mirror_descent"]


def projected_mirror_descent(
    grad: Callable[[torch.Tensor], torch.Tensor], W0: torch.Tensor, *, p: float, radius: float, steps: int
) -> torch.Tensor:
    """Minimise a convex function on ``{||W||_p <= radius}`` by projected normalised l_p mirror descent.

    Spec: mirror-descent-lp §4, §3. Each step is the normalised mirror step of :func:`mirror_descent` with
    ``eta_k = radius^(p-1) / sqrt(k + 1)`` (``||grad psi(W)||_q = radius^(p-1)`` on the sphere), followed by the
    Bregman projection of ``psi = ||.||_p^p / p`` onto the ball, a radial rescaling (its KKT condition is
    ``(1 + lambda) grad psi(W) = grad psi(Y)``).

    Parameters
    ----------
    grad : callable
        ``grad(W)`` returns the gradient at ``W``, shape of ``W``, or any positive multiple of it (the step is
        normalised by its dual norm), such as a gradient's mantissa.
    W0 : torch.Tensor, shape (...)
        Start (converted to float64).
    p : float
        Exponent ``p > 1`` of the potential and of the ball.
    radius : float
        Radius ``R > 0`` of the ball.
    steps : int
        Steps, ``>= 1``.

    Returns
    -------
    torch.Tensor, shape of ``W0``, float64
        The last iterate, inside the ball.
    """
    if not callable(grad):
        raise ValidationError(f"grad must be a callable W -> gradient at W, got {type(grad).__name__}")
    W = check_tensor("W0", W0)
    check_scalar("p", p, low=1.0, low_inclusive=False)
    check_scalar("radius", radius, low=0.0, low_inclusive=False)
    check_scalar("steps", steps, kind=int, low=1)
    for k in range(steps):
        lr = radius ** (p - 1.0) / np.sqrt(k + 1.0)
        W = mirror_descent([W], [grad(W)], lr=lr, p=p, normalized=True)[0]  # md §4: normalised l_p step
        W = W * torch.clamp(radius / entrywise_norm(W, p), max=1.0)  # md §3: Bregman projection onto the ball
    return W
