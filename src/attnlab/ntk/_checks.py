"""Argument checks shared by the NTK and diffusion modules (the generic ones live in :mod:`attnlab._validation`)."""

from __future__ import annotations

import torch

from attnlab._validation import ValidationError

__all__ = ["check_generator"]


def check_generator(name: str, generator: object) -> torch.Generator:
    """Refuse anything but a ``torch.Generator``: ``None`` would fall back to torch's global RNG silently.

    Raises
    ------
    ValidationError
        Naming ``name`` and the fix, ``torch.Generator().manual_seed(seed)``.
    """
    if not isinstance(generator, torch.Generator):
        raise ValidationError(
            f"{name} must be a torch.Generator, got {type(generator).__name__}; pass "
            "torch.Generator().manual_seed(seed) (the generator is the only source of randomness, so that runs "
            "repeat)"
        )
    return generator
