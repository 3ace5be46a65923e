"""NTK regression trained by gradient descent (Algorithm D) and its closed-form limit.

Spec: softmax-ntk-diffusion §6.1 (Definition F.1), §8 (Algorithm D).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab._validation import check_scalar, check_tensor

__all__ = ["kernel_regression_limit", "kernel_regression_path"]


def _vec(Y: torch.Tensor) -> torch.Tensor:
    return Y.T.reshape(-1)  # (n, L) -> (L * n,), entry l * n + i


def _unvec(v: torch.Tensor, L: int) -> torch.Tensor:
    return v.reshape(L, -1).T  # (L * p,) -> (p, L)


def kernel_regression_path(
    H: torch.Tensor,
    K_test: torch.Tensor,
    Y: torch.Tensor,
    *,
    lr: float,
    scale: float,
    steps: Sequence[int],
) -> torch.Tensor:
    """Predictions ``F_ker(gamma(t), X_test) = s K(X_test, X) gamma(t)`` at the given steps, ``gamma(0) = 0``.

    Spec: §6.1, Algorithm D: ``gamma <- gamma - lr (s H* gamma - vec Y)``; on the training inputs this is the
    linearized network ``F(t+1) = F(t) - lr s H* (F(t) - Y)`` with the same ``lr``.

    Parameters
    ----------
    H : torch.Tensor, shape (n * L, n * L)
        ``H*``, the Gram at initialization.
    K_test : torch.Tensor, shape (p * L, n * L)
        ``K(X_test, X)`` at initialization (``cross_kernel``).
    Y : torch.Tensor, shape (n, L)
    lr : float
        The step of the network's GD.
    scale : float
        ``s = net.kernel_scale`` (``m`` for softmax).
    steps : sequence of int
        Increasing steps at which to report.

    Returns
    -------
    torch.Tensor, shape (len(steps), p, L)
    """
    H = check_tensor("H", H, "NM")
    Y = check_tensor("Y", Y, "nL")
    n, L = Y.shape
    K_test = check_tensor("K_test", K_test, "PN", {"N": n * L})
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("scale", scale, low=0.0, low_inclusive=False)
    y = _vec(Y)
    gamma = torch.zeros_like(y)
    out = []
    done = 0
    for target in steps:
        for _ in range(target - done):
            gamma = gamma - lr * (scale * (H @ gamma) - y)  # spec §8 Alg. D
        done = target
        out.append(_unvec(scale * (K_test @ gamma), L))  # spec §6.1: F_ker = m K(x, X) gamma
    return torch.stack(out)


def kernel_regression_limit(H: torch.Tensor, K_test: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """``K(X_test, X) H*^{-1} vec Y``: the limit of :func:`kernel_regression_path` as the steps grow (spec §6.1).

    Parameters
    ----------
    H : torch.Tensor, shape (n * L, n * L)
        ``H*``, the Gram at initialization; invertible.
    K_test : torch.Tensor, shape (p * L, n * L)
        ``K(X_test, X)`` at initialization (:func:`~attnlab.ntk.cross_kernel`).
    Y : torch.Tensor, shape (n, L)
        Training targets.

    Returns
    -------
    torch.Tensor, shape (p, L), float64
        The limit predictions at the p test inputs.

    Raises
    ------
    ValidationError
        When an argument is not finite or ``K_test`` has not ``n * L`` columns.
    """
    H = check_tensor("H", H, "NM")
    Y = check_tensor("Y", Y, "nL")
    K_test = check_tensor("K_test", K_test, "PN", {"N": Y.numel()})
    return _unvec(K_test @ torch.linalg.solve(H, _vec(Y)), Y.shape[1])  # spec §6.1: limit of F_ker
