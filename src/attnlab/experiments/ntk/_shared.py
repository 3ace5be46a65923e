"""What the three softmax-NTK experiments share: the source page, the networks by name, size checks, log factors.

Spec: docs/theory/softmax-ntk-diffusion.md §9 (the reference setting of unit-norm rows).
"""

from __future__ import annotations

import math

from attnlab._validation import ValidationError, check_scalar
from attnlab.ntk import ExpMLP, ReluMLP, SoftmaxMLP

SPEC = "softmax-ntk-diffusion"
SOURCE = "docs/theory/softmax-ntk-diffusion.md"
ACTIVATIONS = {"softmax": SoftmaxMLP, "relu": ReluMLP, "exp": ExpMLP}


def check_sizes(name: str, values: tuple[int, ...], low: int) -> None:
    """Refuse an empty tuple of sizes or an entry below ``low`` (config ``__post_init__``)."""
    if not values:
        raise ValidationError(f"{name} is empty; pass at least one value, e.g. {name}=({low},)")
    for v in values:
        check_scalar(f"{name} entry", v, kind=int, low=low)


def log_factor_allowance(x: list[float], power: float = 2.0) -> float:
    """Change of a log-log slope over ``x`` that a factor ``log(x)^power`` can cause (the theorems' log factors)."""
    return power * math.log(math.log(max(x)) / math.log(min(x))) / math.log(max(x) / min(x))
