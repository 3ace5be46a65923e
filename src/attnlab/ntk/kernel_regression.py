"""NTK regression: the closed-form limit of its gradient descent (Algorithm D, run by :mod:`attnlab.training.ntk`).

Spec: softmax-ntk-diffusion §6.1 (Definition F.1), §8 (Algorithm D).
"""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError, check_tensor

__all__ = ["check_regression", "kernel_regression_limit", "unvec", "vec"]

_SYMMETRY_RTOL = 1e-10  # a Gram's rounding asymmetry, relative to its largest entry (about 1e-16 for gram(net, X))


def vec(Y: torch.Tensor) -> torch.Tensor:
    """``vec Y``: the (n, L) targets as one (L * n,) vector, entry ``l * n + i`` (the Gram's index order).

    Parameters
    ----------
    Y : torch.Tensor, shape (n, L)

    Returns
    -------
    torch.Tensor, shape (L * n,)
    """
    return Y.T.reshape(-1)  # (n, L) -> (L * n,), entry l * n + i


def unvec(v: torch.Tensor, L: int) -> torch.Tensor:
    """The inverse of :func:`vec`: an (L * p,) vector as a (p, L) matrix.

    Parameters
    ----------
    v : torch.Tensor, shape (L * p,)
    L : int
        Output width.

    Returns
    -------
    torch.Tensor, shape (p, L)
    """
    return v.reshape(L, -1).T  # (L * p,) -> (p, L)


def check_regression(H: object, K_test: object, Y: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The arguments of an NTK regression, as float64 tensors: ``H`` (n L, n L), ``K_test`` (p L, n L), ``Y`` (n, L).

    Raises
    ------
    ValidationError
        When an argument is not finite or not of these shapes (``K_test``'s rows: one per test point and output),
        ``Y`` has no training point or no output, or ``H`` is not symmetric (a Gram is, to rounding).
    """
    Y = check_tensor("Y", Y, "nL", min_size={"n": 1, "L": 1})
    sizes = {"N": Y.numel()}  # H* of the n L training outputs
    H = check_tensor("H", H, "NN", sizes)
    gap, top = float((H - H.T).abs().max()), float(H.abs().max())
    if gap > _SYMMETRY_RTOL * top:
        raise ValidationError(
            f"H is not symmetric: max |H - H^T| == {gap:.3g}, must be <= {_SYMMETRY_RTOL:g} max |H| = "
            f"{_SYMMETRY_RTOL * top:.3g}; pass the Gram H* of the training inputs (gram(net, X)), which is symmetric"
        )
    K_test = check_tensor("K_test", K_test, "PN", sizes)
    if K_test.shape[0] % Y.shape[1]:
        raise ValidationError(
            f"K_test has {K_test.shape[0]} rows, must be p * L = p * {Y.shape[1]} (one row per test point and "
            "output, the layout of cross_kernel(net, X_test, X)); pass the whole cross kernel"
        )
    return H, K_test, Y


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
        When an argument is not finite, ``H`` is not ``(n * L, n * L)``, not symmetric or singular, ``K_test`` is
        not ``(p * L, n * L)``, or ``Y`` holds no training point (n = 0).
    """
    H, K_test, Y = check_regression(H, K_test, Y)
    try:
        coefficients = torch.linalg.solve(H, vec(Y))
    except torch.linalg.LinAlgError as error:
        raise ValidationError(
            f"H is singular ({error}); the limit needs an invertible Gram: use distinct training inputs, or add a "
            "ridge, H + eps I"
        ) from None
    return unvec(K_test @ coefficients, Y.shape[1])  # spec §6.1: limit of F_ker
