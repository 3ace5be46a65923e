"""Input checks shared by the public functions of :mod:`attnlab.regression` (batched shapes, SPD matrices)."""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError, as_float64_tensor, check_in, check_tensor

__all__ = [
    "TOKENS",
    "check_batched",
    "check_definite",
    "check_factor",
    "check_joint",
    "check_orthonormal",
    "check_spd",
    "check_tokens",
]

TOKENS = ("covariates", "joint")
"""Token readings of spec §0 / §10.1: covariates only (default) or ``z_j = (x_j; y_j)``."""


def check_tokens(tokens: object) -> str:
    """Check the token reading; the message lists both readings."""
    return str(check_in("tokens", tokens, TOKENS))


def check_batched(
    name: str, value: object, axes: str, sizes: dict[str, int], min_size: dict[str, int] | None = None
) -> torch.Tensor:
    """A float64 tensor with axes ``axes``, optionally preceded by a runs axis ``R`` (``([R,] *axes)``) of at least
    one run; ``min_size`` as :func:`~attnlab._validation.check_tensor`'s."""
    tensor = value if isinstance(value, torch.Tensor) else as_float64_tensor(name, value)  # text, objects: refused
    if tensor.dim() == len(axes) + 1:
        return check_tensor(name, tensor, "R" + axes, sizes, min_size={"R": 1, **(min_size or {})})
    return check_tensor(name, tensor, axes, sizes, min_size=min_size)


def check_joint(X: torch.Tensor, Y: torch.Tensor, tokens: str) -> None:
    """Refuse joint tokens ``(x; y)`` from ``X`` and ``Y`` of which only one has the runs axis R."""
    if tokens == "joint" and X.dim() != Y.dim():
        raise ValidationError(
            f"X has shape {tuple(X.shape)} and Y has shape {tuple(Y.shape)}: the joint tokens (x; y) need both with a "
            "runs axis R or neither; add it to the other, e.g. Y.expand(R, -1, -1)"
        )


SYMMETRY_RTOL = 1e-10
"""Largest ``|S - S^T|`` accepted, relative to the largest ``|S|`` (round-off of a product is ~1e-16)."""
SEMIDEFINITE_RTOL = 1e-12
"""Most negative eigenvalue read as 0 (round-off) by a positive semidefinite check, relative to the largest ``|S|``."""


def check_spd(
    name: str, value: object, sizes: dict[str, int], letter: str = "d", *, require: str = "definite"
) -> torch.Tensor:
    """A ``([R,] d, d)`` matrix (``d >= 1``) that passes :func:`check_definite` with ``require``."""
    return check_definite(name, check_batched(name, value, letter + letter, sizes, min_size={letter: 1}), require)


def check_definite(name: str, matrix: torch.Tensor, require: str = "definite") -> torch.Tensor:
    """Refuse a float64 ``matrix`` (..., d, d) that is not symmetric (to a relative :data:`SYMMETRY_RTOL`) or, by
    ``require``, not positive definite (``"definite"``, spec §7 A1) or semidefinite (``"semidefinite"``: eigenvalues
    ``>= 0`` up to :data:`SEMIDEFINITE_RTOL`); ``"symmetric"`` asks symmetry alone. Names the failing property and
    the fix."""
    scale = float(matrix.abs().amax())
    defect = float((matrix - matrix.transpose(-1, -2)).abs().amax())
    if defect > SYMMETRY_RTOL * scale:
        raise ValidationError(
            f"{name} is not symmetric (max |{name} - {name}^T| = {defect:.3g}, max |{name}| = {scale:.3g}); pass "
            f"(S + S^T) / 2 of a covariance"
        )
    if require == "symmetric":
        return matrix
    smallest = float(torch.linalg.eigvalsh(matrix).amin())
    if require == "semidefinite" and smallest < -SEMIDEFINITE_RTOL * scale:
        raise ValidationError(
            f"{name} is not positive semidefinite (smallest eigenvalue {smallest:.3g}, must be >= 0); pass a "
            f"covariance, e.g. X^T X / n"
        )
    if require == "definite" and smallest <= 0.0:
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


def check_factor(name: str, value: object, axes: str, sizes: dict[str, int]) -> torch.Tensor:
    """:func:`check_batched` for a factor that gradients may flow through: a tensor in an autograd graph stays in it
    (as its float64 version, a copy only for another dtype) instead of being detached; anything else is the checked
    float64 copy."""
    checked = check_batched(name, value, axes, sizes)
    return value.to(torch.float64) if isinstance(value, torch.Tensor) and value.requires_grad else checked
