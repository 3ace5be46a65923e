"""How well samples match a target: mode coverage and energy distance (spec §9, diffusion experiment)."""

from __future__ import annotations

import torch

from attnlab._validation import check_scalar, check_tensor

__all__ = ["energy_distance", "mode_coverage"]


def mode_coverage(samples: torch.Tensor, means: torch.Tensor, radius: float) -> tuple[float, torch.Tensor]:
    """Fraction of samples within ``radius`` of their nearest mode, and the share of samples at each mode.

    Parameters
    ----------
    samples : torch.Tensor, shape (n, d)
    means : torch.Tensor, shape (K, d)
    radius : float
        E.g. three standard deviations of a mode.

    Returns
    -------
    covered : float
        Fraction of all samples within ``radius`` of some mode.
    shares : torch.Tensor, shape (K,)
        Fraction of all samples within ``radius`` of mode ``k`` (equal-weight targets give ``covered / K`` each).

    Raises
    ------
    ValidationError
        When ``samples`` is not a finite (n, d) array with n >= 1, ``means`` not a finite (K, d) array with
        K >= 1, or ``radius <= 0``.
    """
    sizes: dict[str, int] = {}
    samples = check_tensor("samples", samples, "nd", sizes, min_size={"n": 1})
    means = check_tensor("means", means, "Kd", sizes, min_size={"K": 1})
    check_scalar("radius", radius, low=0.0, low_inclusive=False)
    dist = torch.cdist(samples, means)  # (n, K)
    nearest = dist.argmin(dim=1)
    inside = dist.min(dim=1).values <= radius
    shares = torch.stack([(inside & (nearest == k)).double().mean() for k in range(means.shape[0])])
    return float(inside.double().mean()), shares


def energy_distance(x: torch.Tensor, y: torch.Tensor) -> float:
    """``2 E||X - Y|| - E||X - X'|| - E||Y - Y'||`` (unbiased within-sample terms); 0 iff the laws agree.

    Parameters
    ----------
    x : torch.Tensor, shape (n, d)
    y : torch.Tensor, shape (p, d)

    Returns
    -------
    float
    """
    sizes: dict[str, int] = {}
    x = check_tensor("x", x, "nd", sizes, min_size={"n": 2})
    y = check_tensor("y", y, "pd", sizes, min_size={"p": 2})
    n, p = x.shape[0], y.shape[0]
    between = torch.cdist(x, y).mean()
    within_x = torch.cdist(x, x).sum() / (n * (n - 1))
    within_y = torch.cdist(y, y).sum() / (p * (p - 1))
    return float(2 * between - within_x - within_y)
