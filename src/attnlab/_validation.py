"""Argument checks shared by every public entry point.

Each check raises :class:`ValidationError` (a ``ValueError``) whose message says which argument is wrong,
what was expected, what was received, and how to fix it -- in the form ``"name == value, must be > bound"``
used by scikit-learn's ``check_scalar``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real

import numpy as np
import torch

from attnlab._errors import ValidationError

__all__ = [
    "ValidationError",
    "as_float64_tensor",
    "check_in",
    "check_scalar",
    "check_shape",
    "check_tensor",
]


def check_scalar(
    name: str,
    value: object,
    *,
    kind: type | tuple[type, ...] = Real,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_inf: bool = False,
) -> float:
    """Check that ``value`` is a number of type ``kind`` within ``[low, high]``.

    Returns the value (unchanged). Bounds are inclusive unless told otherwise.

    Raises
    ------
    ValidationError
        ``"lr == -1.0, must be > 0"`` style messages.
    """
    if isinstance(value, bool) or not isinstance(value, kind):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ValidationError(f"{name} must be a {expected}, got {value!r} of type {type(value).__name__}")
    v = float(value)  # type: ignore[arg-type]
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValidationError(f"{name} == {value!r}, must be a finite number")
    if low is not None and (v < low or (v == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValidationError(f"{name} == {value!r}, must be {op} {low}")
    if high is not None and (v > high or (v == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ValidationError(f"{name} == {value!r}, must be {op} {high}")
    return value  # type: ignore[return-value]


def check_in(name: str, value: object, allowed: Sequence[object]) -> object:
    """Check that ``value`` is one of ``allowed``; the message lists the allowed values."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ValidationError(f"{name} == {value!r}, must be one of {choices}")
    return value


def as_float64_tensor(name: str, value: object) -> torch.Tensor:
    """Convert an array-like (NumPy array, list, tensor) to a float64 tensor, naming ``name`` on failure."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            raise ValidationError(f"{name} is complex ({value.dtype}); pass a real-valued array")
        return value.detach().to(torch.float64)
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValidationError(f"{name} could not be converted to a float64 array: {err}") from err
    return torch.from_numpy(arr.copy())  # copy: contiguous, writable, keeps 0-d arrays 0-d


def check_shape(name: str, tensor: torch.Tensor, axes: str, sizes: dict[str, int] | None = None) -> dict[str, int]:
    """Check that ``tensor`` has one dimension per letter of ``axes`` and consistent named sizes.

    ``axes`` is a string of axis names such as ``"ntd"``; ``sizes`` holds sizes fixed by earlier arguments and
    is updated in place with the sizes read from ``tensor``. Returns ``sizes``.

    Examples
    --------
    >>> sizes = check_shape("X", torch.zeros(4, 3, 2), "nTd")
    >>> sizes["T"]
    3
    """
    sizes = {} if sizes is None else sizes
    if tensor.dim() != len(axes):
        raise ValidationError(
            f"{name} has shape {tuple(tensor.shape)}, expected {len(axes)} axes ({', '.join(axes)}); "
            f"reshape it to ({', '.join(axes)})"
        )
    for letter, size in zip(axes, tensor.shape):
        if letter in sizes and sizes[letter] != size:
            raise ValidationError(
                f"{name} has shape {tuple(tensor.shape)}: axis {letter!r} has size {size}, "
                f"but earlier arguments fixed {letter} = {sizes[letter]}"
            )
        sizes[letter] = int(size)
    return sizes


def check_tensor(
    name: str,
    value: object,
    axes: str | None = None,
    sizes: dict[str, int] | None = None,
    *,
    finite: bool = True,
    min_size: dict[str, int] | None = None,
) -> torch.Tensor:
    """Convert ``value`` to a float64 tensor and check its axes and finiteness.

    Parameters
    ----------
    name : str
        Argument name used in error messages.
    value : array-like
    axes : str, optional
        One letter per axis, e.g. ``"ntd"``; sizes already in ``sizes`` must match.
    sizes : dict, optional
        Named sizes shared across arguments; updated in place.
    finite : bool, default=True
        Refuse NaN and inf entries.
    min_size : dict, optional
        Minimum size per axis letter, e.g. ``{"T": 2}``.
    """
    tensor = as_float64_tensor(name, value)
    if axes is not None:
        check_shape(name, tensor, axes, sizes)
        for letter, lo in (min_size or {}).items():
            idx = axes.index(letter)
            if tensor.shape[idx] < lo:
                raise ValidationError(
                    f"{name} has {tensor.shape[idx]} entries along axis {letter!r}, needs at least {lo}"
                )
    if finite and tensor.numel() and not bool(torch.isfinite(tensor).all()):
        bad = int((~torch.isfinite(tensor)).sum())
        raise ValidationError(f"{name} has {bad} non-finite (NaN or inf) entries; remove or impute them first")
    return tensor
