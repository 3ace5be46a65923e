"""Argument checks shared by every public entry point.

Each check raises :class:`ValidationError` (a ``ValueError``) whose message says which argument is wrong,
what was expected, what was received, and how to fix it -- in the form ``"name == value, must be > bound"``
used by scikit-learn's ``check_scalar``.

The same rules hold at every public entry point: integers of any integral type (``int``, ``np.int64``, a 0-d
integer tensor), booleans only as booleans, labels in {-1, +1}, ``T >= 2``, token selections of integer type and in
range, and arrays copied to float64 (float32 and integer input is converted, never aliased: an in-place edit of
the caller's array cannot reach validated data).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np
import torch

from attnlab._errors import ValidationError
from attnlab._numerics import all_finite

__all__ = [
    "ValidationError",
    "as_float64_tensor",
    "check_bool",
    "check_count",
    "check_device",
    "check_finite_result",
    "check_grid",
    "check_in",
    "check_instance",
    "check_labels",
    "check_scalar",
    "check_seed",
    "check_seed_range",
    "check_select",
    "check_shape",
    "check_tensor",
    "check_runs",
    "check_token_data",
    "model_as_float64",
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

    Returns the value: an integer of any integral type (``np.int64``, a 0-d integer tensor) as a Python ``int``
    when ``kind`` is ``int``, a 0-d real tensor as a Python number, anything else unchanged. Bounds are inclusive
    unless told otherwise. Booleans are never numbers here.

    Raises
    ------
    ValidationError
        ``"lr == -1.0, must be > 0"`` style messages.
    """
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_complex() and value.dtype != torch.bool:
        value = value.item()  # a 0-d tensor is a number
    kinds = kind if isinstance(kind, tuple) else (kind,)
    accepted = tuple(Integral if k is int else k for k in kinds)  # np.int64 and friends are integers too
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, accepted):
        expected = " or ".join(k.__name__ for k in kinds)
        raise ValidationError(f"{name} must be a {expected}, got {value!r} of type {type(value).__name__}")
    if int in kinds and isinstance(value, Integral):
        value = int(value)
    v = value if isinstance(value, int) else float(value)  # type: ignore[arg-type]  # an int compares exactly
    if isinstance(v, float) and (math.isnan(v) or (math.isinf(v) and not allow_inf)):
        raise ValidationError(f"{name} == {value!r}, must be a finite number")
    if low is not None and (v < low or (v == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValidationError(f"{name} == {value!r}, must be {op} {low}")
    if high is not None and (v > high or (v == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ValidationError(f"{name} == {value!r}, must be {op} {high}")
    return value  # type: ignore[return-value]


SEED_MAX = 2**63 - 1
"""The largest seed accepted: torch's generators take up to ``2**64 - 1``, which leaves room for the offsets
(``seed + 7``) that experiments add to draw independent streams."""


def check_seed(name: str, value: object) -> int:
    """Check that ``value`` is a whole number in ``[0, 2**63 - 1]`` (:data:`SEED_MAX`), a seed every generator takes.

    Raises
    ------
    ValidationError
        ``"seed == -1, must be >= 0"`` style messages (a larger seed raised torch's "Overflow when unpacking long
        long" once).
    """
    return int(check_scalar(name, value, kind=int, low=0, high=SEED_MAX))


def check_seed_range(seed: object, last: int, setting: str, what: str = "the runs") -> int:
    """A seed whose runs are seeded ``seed ... seed + last``: every one of them a seed (:func:`check_seed`).

    Parameters
    ----------
    seed : int
        The config's ``seed``.
    last : int
        The largest offset a run adds to it.
    setting : str
        The setting that makes ``last``, as the message shows it (``"max_draws == 1000"``).
    what : str, default="the runs"
        What is seeded, for the message.

    Raises
    ------
    ValidationError
        When ``seed`` is not a seed, or ``seed + last`` passes :data:`SEED_MAX`.
    """
    seed = check_seed("seed", seed)
    if seed > SEED_MAX - last:
        raise ValidationError(
            f"seed == {seed} with {setting}: {what} are seeded seed ... seed + {last}, so seed must be "
            f"<= {SEED_MAX - last}"
        )
    return seed


def check_count(name: str, value: object, low: int, high: int, why: str) -> int:
    """A whole number in ``[low, high]``; ``why`` says where ``high`` comes from, in the message.

    Raises
    ------
    ValidationError
        ``"seeds == 1000, must be <= 100 (ours: ...)"`` style messages.
    """
    value = check_scalar(name, value, kind=int, low=low)
    if value > high:
        raise ValidationError(f"{name} == {value}, must be <= {high} ({why})")
    return int(value)


def check_grid(
    name: str,
    values: Sequence[float],
    low: float,
    *,
    kind: type = int,
    even: bool = False,
    points: int = 1,
    why: str = "",
    low_why: str = "",
    example: str = "",
) -> None:
    """Refuse a grid of a config: fewer than ``points`` entries (``why``: what needs them; ``example``: a grid to
    suggest), an entry not of type ``kind`` or below ``low`` (``low_why``: where ``low`` comes from), an odd entry
    with ``even``, or a repeated entry.

    Raises
    ------
    ValidationError
        Naming ``name``, the entry or the grid, and the fix.
    """
    suggest = f"; pass e.g. {name}={example}" if example else ""
    if not values:
        raise ValidationError(
            f"{name} is empty ({name} == ()); pass at least {points} value(s)" + (f" ({why})" if why else "") + suggest
        )
    for value in values:
        if check_scalar(f"{name} entry", value, kind=kind) < low:
            raise ValidationError(f"{name} entry == {value!r}, must be >= {low}" + (f" ({low_why})" if low_why else ""))
        if even and value % 2:
            raise ValidationError(
                f"{name} entry == {value}, must be even (the symmetric initialization pairs the neurons); use {value + 1}"
            )
    check_distinct(name, values)
    if len(values) < points:
        raise ValidationError(f"{name} == {tuple(values)}, must hold at least {points} values ({why}){suggest}")


def check_distinct(name: str, values: Sequence[object]) -> None:
    """Refuse a grid ``values`` of a config that repeats an entry: a repeated point would be run twice and weigh twice
    in every fit and share over the grid. The message names ``name`` and the repeated entries."""
    repeated = sorted({v for v in values if list(values).count(v) > 1})
    if repeated:
        raise ValidationError(f"{name} == {tuple(values)} repeats {repeated}; pass distinct values")


def check_in(name: str, value: object, allowed: Sequence[object]) -> object:
    """Check that ``value`` is one of ``allowed``; the message lists the allowed values."""
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed)
        raise ValidationError(f"{name} == {value!r}, must be one of {choices}")
    return value


def check_instance(name: str, value: Any, kind: type, fix: str) -> Any:
    """``value`` when it is a ``kind``; else a :class:`ValidationError` naming ``name``, what it got, and ``fix``."""
    if not isinstance(value, kind):
        raise ValidationError(f"{name} must be a {kind.__name__}, got {type(value).__name__}; {fix}")
    return value


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` as a ``bool``; only ``True``, ``False`` (and NumPy's booleans) are accepted.

    ``"no"``, ``0`` or ``None`` are refused: reading a flag by truthiness turns ``"no"`` into ``True``.
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"{name} == {value!r}, must be a bool (True or False), got type {type(value).__name__}")
    return bool(value)


def check_device(name: str, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Refuse ``tensor`` when it lives on another device than ``device``; the message says how to move it."""
    if tensor.device != torch.device(device):
        raise ValidationError(
            f"{name} is on device {tensor.device}, but the rest is on {device}; move it with .to({str(device)!r})"
        )
    return tensor


def as_float64_tensor(name: str, value: object) -> torch.Tensor:
    """Copy an array-like (NumPy array, list, tensor) into a new float64 tensor, naming ``name`` on failure.

    Always a copy, never a view of the caller's data (a float64 tensor is cloned too); float32, integer and boolean
    input is converted (``True`` is 1). 'meta' tensors (shapes without data), complex values (their imaginary part
    would be dropped) and text or Python objects (``"1"`` would be parsed as 1) are refused.

    Parameters
    ----------
    name : str
        Argument name used in error messages.
    value : array-like
        Real numbers: a tensor, a NumPy array of bool, integer or float dtype, or (nested) lists of numbers.

    Returns
    -------
    torch.Tensor
        A new float64 tensor of ``value``'s shape.

    Raises
    ------
    ValidationError
        On a complex, text, object or 'meta' ``value``, or one NumPy cannot make an array of (ragged lists).
    """
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            raise ValidationError(f"{name} is complex ({value.dtype}); pass a real-valued array")
        if value.is_meta:
            raise ValidationError(f"{name} is a 'meta' tensor (a shape without values); pass a tensor with data")
        return value.detach().to(torch.float64, copy=True)
    try:
        raw = np.asarray(value)  # its own dtype first: converting complex or text to float64 would not say so
        _check_real_dtype(name, raw)
        arr = raw if raw.dtype == np.float64 else np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        if isinstance(err, ValidationError):
            raise
        raise ValidationError(f"{name} could not be converted to a float64 array: {err}") from err
    return torch.from_numpy(arr.copy())  # copy: contiguous, writable, keeps 0-d arrays 0-d


def _check_real_dtype(name: str, arr: np.ndarray) -> None:
    """Refuse an array that is not of real numbers: complex, text, Python objects other than numbers, dates."""
    kind = arr.dtype.kind
    if kind == "c":
        raise ValidationError(
            f"{name} is complex ({arr.dtype}); pass a real-valued array (np.real({name}) or np.abs({name}) if you "
            "mean one of them: converting would drop the imaginary part)"
        )
    if kind in "US":
        raise ValidationError(
            f"{name} holds text (dtype {arr.dtype}), not numbers; pass a numeric array (convert it yourself, e.g. "
            f"np.asarray({name}, dtype=float), once you have checked the values)"
        )
    if kind == "O" and not all(isinstance(a, Real) for a in arr.flat):  # numbers too large for int64 are fine
        found = next(type(a).__name__ for a in arr.flat if not isinstance(a, Real))
        raise ValidationError(
            f"{name} holds Python objects (dtype object, e.g. a {found}), not only real numbers; pass a numeric "
            "array of bool, int or float"
        )
    if kind not in "biufO":
        raise ValidationError(f"{name} has dtype {arr.dtype}, not numbers; pass a numeric array of bool, int or float")


def check_nonzero(name: str, tensor: torch.Tensor, axes: int) -> torch.Tensor:
    """Refuse a reference direction that is zero: each slice over the last ``axes`` axes (one per run) must hold a
    non-zero entry, since a cosine or a normalised divergence against zero is 0/0."""
    zero = (tensor.flatten(-axes) == 0).all(dim=-1) if tensor.numel() else torch.ones((), dtype=torch.bool)
    if bool(zero.any()):
        runs = torch.nonzero(zero.reshape(-1)).flatten().tolist() if zero.dim() else []
        where = f" (runs {runs[:5]})" if zero.dim() else ""
        raise ValidationError(
            f"{name} is zero{where}: a direction of reference must be non-zero (the alignment with 0 is 0/0); pass "
            "the reference you mean, e.g. the SVM solution of the data"
        )
    return tensor


def check_token_data(name: str, data: object) -> object:
    """Refuse anything without the fields ``X, Z, y, v`` of a token-selection data set (a tuple, a dict, arrays)."""
    if (
        not all(hasattr(data, k) for k in ("X", "Z", "y", "v"))
        or isinstance(data, tuple)
        and not hasattr(data, "_fields")
    ):
        raise ValidationError(
            f"{name} must be a TokenSelectionData or StackedData, got {type(data).__name__}; wrap arrays with "
            "attnlab.data.TokenSelectionData(X, Z, y, v) (or attnlab.data.stack([...]) for several data sets)"
        )
    for k in ("X", "Z", "y"):
        if not isinstance(getattr(data, k), torch.Tensor):
            raise ValidationError(
                f"{name}.{k} is a {type(getattr(data, k)).__name__}; build {name} with "
                "attnlab.data.TokenSelectionData, which converts arrays to float64 tensors"
            )
    return data


def check_labels(name: str, y: torch.Tensor) -> torch.Tensor:
    """Refuse labels outside {-1, +1}; the message lists some bad values and the map from 0/1 labels."""
    bad = (y != 1) & (y != -1)
    if bool(bad.any()):
        found = sorted({float(a) for a in y[bad].flatten().tolist()})[:5]
        raise ValidationError(
            f"{name} must hold only -1 and +1, found {found}; map labels with y = 2*label - 1 for 0/1 labels"
        )
    return y


def check_select(name: str, value: object, n: int, T: int, runs: int | None = None) -> torch.Tensor:
    """Token indices, one per sequence: integers of shape ``(n,)`` (or ``(R, n)`` when ``runs`` is given) in
    ``[0, T - 1]``, as a new int64 tensor.

    Floats are refused even when whole (``1.0``): a float selection is a computed value gone wrong, and
    truncating it would silently select another token.
    """
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            raise ValidationError(f"{name} is a 'meta' tensor (a shape without values); pass token indices")
        arr = value.detach().cpu().numpy()
    else:
        try:
            arr = np.asarray(value)
        except ValueError:  # ragged: lists of different lengths, token sets
            raise ValidationError(
                f"{name} must be {n} integer token indices (one per sequence), got lists of different lengths; "
                "token sets (several tokens per sequence) go to set_direction_svm or attention_svm(norm='fro')"
            ) from None
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
        raise ValidationError(
            f"{name} must be {n} integer token indices (one per sequence), got dtype {arr.dtype}; floats are not "
            f"rounded: pass an integer array (np.asarray({name}).astype(int) if the values are whole)"
        )
    shapes = [(n,)] + ([(runs, n)] if runs is not None else [])
    if arr.shape not in shapes:
        expected = " or ".join(str(s) for s in shapes)
        raise ValidationError(
            f"{name} must be {n} integer token indices (one per sequence), got shape {arr.shape}; expected {expected}"
        )
    out = torch.as_tensor(arr.astype(np.int64)).clone()
    if bool(((out < 0) | (out >= T)).any()):
        bad = sorted({int(a) for a in out[(out < 0) | (out >= T)].tolist()})[:5]
        raise ValidationError(f"{name} holds indices outside [0, {T - 1}] (T = {T} tokens per sequence): {bad}")
    return out


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
    if finite and not all_finite(tensor):
        bad = int((~torch.isfinite(tensor)).sum())
        raise ValidationError(f"{name} has {bad} non-finite (NaN or inf) entries; remove or impute them first")
    return tensor


def check_finite_result(name: str, value: torch.Tensor, cause: str) -> torch.Tensor:
    """Refuse a computed result with NaN or inf entries: the inputs were valid, the arithmetic left float64's range.

    Parameters
    ----------
    name : str
        What was computed, e.g. ``"gram(net, X)"``.
    value : torch.Tensor
        The result.
    cause : str
        The likely cause and its fix, in the caller's words, e.g. ``"exp(w^T x) overflows; scale X into the unit
        ball"``.

    Returns
    -------
    torch.Tensor
        ``value`` itself.
    """
    if not all_finite(value):
        bad = int((~torch.isfinite(value)).sum())
        raise ValidationError(f"{name} has {bad} non-finite (NaN or inf) entries: {cause}")
    return value


def model_as_float64(model: object) -> None:
    """Convert a model's floating-point parameters and buffers to float64 in place (attnlab computes in float64).

    ``nn.Module.to`` keeps each ``Parameter`` object (only its data changes), so an optimizer built on the model
    still holds them.
    """
    if any(t.is_floating_point() and t.dtype != torch.float64 for t in [*model.parameters(), *model.buffers()]):
        model.to(torch.float64)


def check_runs(model: object, data: object, broadcast: bool) -> int:
    """The number of runs R of ``model`` on ``data``, after checking that ``d``, ``d_q`` and the runs axes agree.

    A model without a runs axis on data with one trains one copy per data set only when ``broadcast`` is True.
    """
    W, X, Z = model.W, data.X, data.Z
    d, d_q = getattr(model, "d", W.shape[-2]), getattr(model, "d_q", W.shape[-1])
    if d != X.shape[-1]:
        raise ValidationError(
            f"model has d = {d} but the data's tokens have d = {X.shape[-1]}; build the model with d={X.shape[-1]}"
        )
    if d_q != Z.shape[-1]:
        raise ValidationError(
            f"model has queries of width d_q = {d_q} but the data's queries Z have width {Z.shape[-1]}; build the "
            f"model with d_q={Z.shape[-1]} (W of shape ({d}, {Z.shape[-1]}))"
        )
    model_runs = W.shape[0] if W.dim() == 3 else None
    data_runs = X.shape[0] if X.dim() == 4 else None
    if model_runs is not None and data_runs is not None and model_runs != data_runs:
        raise ValidationError(
            f"the model has a runs axis of {model_runs} runs but the data has {data_runs}; give both the same "
            "number of runs, or pass data without a runs axis to train every run on one data set"
        )
    if model_runs is None and data_runs is not None and not broadcast:
        raise ValidationError(
            f"data has a runs axis of {data_runs} runs but the model has none; pass broadcast=True to train one "
            f"copy of the model per data set (the model then keeps all {data_runs} runs), or build the model with "
            f"a runs axis (W0 of shape ({data_runs}, d, d))"
        )
    return model_runs or data_runs or 1
