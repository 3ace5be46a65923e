"""Input checks shared by the public functions of :mod:`attnlab.regression` (batched shapes, SPD matrices)."""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError, check_in, check_tensor

__all__ = ["TOKENS", "check_batched", "check_orthonormal", "check_spd", "check_tokens"]

TOKENS = ("covariates", "joint")
"""Token readings of spec §0 / §10.1: covariates only (default) or ``z_j = (x_j; y_j)``."""


def check_tokens(tokens: object) -> str:
    """Check the token reading; the message lists both readings."""
    return str(check_in("tokens", tokens, TOKENS))


def check_batched(name: str, value: object, axes: str, sizes: dict[str, int]) -> torch.Tensor:
    """A float64 tensor with axes ``axes``, optionally preceded by a runs axis ``R`` (``([R,] *axes)``)."""
    tensor = torch.as_tensor(value) if not isinstance(value, torch.Tensor) else value
    batched = tensor.dim() == len(axes) + 1
    return check_tensor(name, value, ("R" + axes) if batched else axes, sizes)


def check_spd(name: str, value: object, sizes: dict[str, int], letter: str = "d") -> torch.Tensor:
    """A symmetric positive definite ``([R,] d, d)`` matrix; names the failing property and the fix (spec §7 A1)."""
    matrix = check_batched(name, value, letter + letter, sizes)
    scale = matrix.abs().amax().clamp_min(1.0)
    if not torch.allclose(matrix, matrix.transpose(-1, -2), rtol=0.0, atol=1e-10 * float(scale)):
        defect = float((matrix - matrix.transpose(-1, -2)).abs().amax())
        raise ValidationError(
            f"{name} is not symmetric (max |{name} - {name}^T| = {defect:.3g}); pass (S + S^T) / 2 of a covariance"
        )
    smallest = float(torch.linalg.eigvalsh(matrix).amin())
    if smallest <= 0.0:
        raise ValidationError(
            f"{name} is not positive definite (smallest eigenvalue {smallest:.3g}, must be > 0, assumption A1); "
            f"use a full-rank covariance, e.g. with more samples than dimensions or a small ridge"
        )
    return matrix


def check_covariances(Sigma: object, Sigma_z: object) -> tuple[torch.Tensor, torch.Tensor, dict[str, int]]:
    """SPD ``Sigma`` ``([R,] d, d)`` and ``Sigma_z`` ``([R,] p, p)`` (``Sigma`` itself when None), with ``{d, p}``."""
    sizes: dict[str, int] = {}
    Sigma = check_spd("Sigma", Sigma, sizes)
    Sigma_z = Sigma if Sigma_z is None else check_spd("Sigma_z", Sigma_z, sizes, letter="p")
    sizes.setdefault("p", sizes["d"])
    return Sigma, Sigma_z, sizes


def check_orthonormal(name: str, value: object, sizes: dict[str, int]) -> torch.Tensor:
    """A ``([R,] p, d)`` matrix with orthonormal columns (``R^T R = I_d`` to 1e-8, what a QR or SVD gives to
    ~1e-15): a point of the manifold of minima needs one (spec §4.2); names the defect and the fix."""
    R = check_batched(name, value, "pd", sizes)
    if R.shape[-2] < R.shape[-1]:
        raise ValidationError(
            f"{name} has shape {tuple(R.shape)}: its {R.shape[-1]} columns cannot be orthonormal in "
            f"{R.shape[-2]} dimensions; pass a (p, d) matrix with p >= d"
        )
    gram = R.transpose(-1, -2) @ R
    defect = float((gram - torch.eye(R.shape[-1], dtype=R.dtype)).abs().amax())
    if defect > 1e-8:
        raise ValidationError(
            f"{name} does not have orthonormal columns: max |{name}^T {name} - I| = {defect:.3g}; pass one, e.g. "
            f"the Q factor of torch.linalg.qr or attnlab.regression.random_rotation"
        )
    return R
