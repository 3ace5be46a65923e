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


def check_sizes(
    name: str,
    values: tuple[int, ...],
    low: int,
    *,
    even: bool = False,
    points: int = 1,
    why: str = "",
    example: str = "",
) -> None:
    """Refuse an empty tuple of sizes, an entry below ``low`` (or odd, with ``even``), a repeated entry, or fewer than
    ``points`` entries (``why``: what needs them; ``example``: a value to suggest), in a config's ``__post_init__``."""
    if not values:
        raise ValidationError(f"{name} is empty; pass at least {points} value(s), e.g. {name}={example or low}")
    for v in values:
        check_scalar(f"{name} entry", v, kind=int, low=low)
        if even and v % 2:
            raise ValidationError(
                f"{name} entry == {v}, must be even (the symmetric initialization pairs the neurons); use {v + 1}"
            )
    repeated = sorted({v for v in values if list(values).count(v) > 1})
    if repeated:
        raise ValidationError(f"{name} == {tuple(values)} repeats {repeated}; pass distinct sizes")
    if len(values) < points:
        raise ValidationError(
            f"{name} == {tuple(values)}, must hold at least {points} sizes ({why}); pass e.g. {name}={example}"
        )


def check_count(name: str, value: object, low: int, high: int, why: str) -> int:
    """A count in ``[low, high]``; ``why`` says where ``high`` comes from, in the message."""
    value = check_scalar(name, value, kind=int, low=low)
    if value > high:  # compared as ints: a float would round a large count
        raise ValidationError(f"{name} == {value}, must be <= {high} ({why})")
    return value


def log_factor_allowance(x: list[float], power: float = 2.0) -> float:
    """Change of a log-log slope over ``x`` that a factor ``log(x)^power`` can cause (the theorems' log factors)."""
    return power * math.log(math.log(max(x)) / math.log(min(x))) / math.log(max(x) / min(x))
