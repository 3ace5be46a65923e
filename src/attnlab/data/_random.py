"""Seeded random draws shared by the data generators: one explicit ``torch.Generator`` per call, no global state."""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError, check_seed

__all__ = ["MAX_ENTRIES", "check_entries", "generator", "random_labels", "random_orthogonal"]

#: The most float64 entries the tokens of a generated data set may hold (ours: 512 MiB, so that a data set and its
#: few copies fit in memory); the flagship's limit on its tokens and W too.
MAX_ENTRIES = 2**26


def check_entries(formula: str, entries: int, **sizes: int) -> None:
    """Refuse data of ``entries`` float64 entries (``formula`` in the ``sizes``, e.g. ``"n T d"``) beyond
    :data:`MAX_ENTRIES`, naming the sizes.

    Raises
    ------
    ValidationError
        When ``entries > 2^26``.
    """
    if entries > MAX_ENTRIES:
        shown, names = ", ".join(f"{name} == {value}" for name, value in sizes.items()), list(sizes)
        raise ValidationError(
            f"{shown}: the data hold {formula} = {entries} float64 entries, must be <= 2^26 = {MAX_ENTRIES} "
            f"(512 MiB; ours, so that they fit in memory); lower {', '.join(names[:-1])} or {names[-1]}"
        )


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
