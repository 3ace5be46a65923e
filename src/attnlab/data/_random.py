"""Seeded random draws shared by the data generators: one explicit ``torch.Generator`` per call, no global state."""

from __future__ import annotations

import torch

from attnlab._validation import check_seed

__all__ = ["generator", "random_labels", "random_orthogonal"]


def generator(seed: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with ``seed`` (a non-negative int); the global RNG is never touched."""
    check_seed("seed", seed)
    return torch.Generator().manual_seed(seed)


def random_labels(n: int, gen: torch.Generator) -> torch.Tensor:
    """Labels uniform on {-1, +1}, shape (n,), float64."""
    return 2.0 * torch.randint(0, 2, (n,), generator=gen).to(torch.float64) - 1.0


def random_orthogonal(d: int, gen: torch.Generator) -> torch.Tensor:
    """A Haar-random orthogonal matrix, shape (d, d), float64 (QR of a Gaussian, R's diagonal made positive)."""
    q, r = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    signs = torch.sign(torch.diagonal(r))
    signs[signs == 0] = 1.0
    return q * signs  # column j of q times sign(r_jj): the Haar measure (Mezzadri 2007)
