"""The checks of the token-selection arguments, tied together: tokens ``X``, queries ``Z``, weights ``W``, labels
``y``, head ``v`` and the selected tokens.

Run once per call of a public formula function (:mod:`attnlab.models.functional`) or diagnostic
(:mod:`attnlab.metrics.diagnostics`, through :mod:`attnlab.metrics._checks`); the training loop, its recorder and the
metric objects call the unchecked versions on tensors typed where they entered.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from attnlab._validation import ValidationError, check_labels
from attnlab.geometry import _alike, _axes, _broadcast, _floats
from attnlab.losses import _real_tensor
from attnlab.models.heads import AttentionHeads, Head

__all__ = ["attention_args", "formula_args", "in_range", "labels", "nonempty", "score_args", "selection"]

_X = "([R,] n, T, d): one token matrix per sequence"


def attention_args(
    X: Any, Z: Any, W: Any, select: Any = None, *, selects: bool = True, heads: AttentionHeads | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(X, Z, W, select)`` checked and tied together: ``X ([R,] n, T, d)``, ``Z ([R,] n, d_q)``,
    ``W ([R,] d, d_q)`` (``([R,] d, heads.columns(d_q))`` for several ``heads`` side by side; leading axes that
    broadcast), in one dtype; ``select`` (when ``selects``) integer token indices of shape ``([R,] n)`` in
    ``[0, T - 1]``, as int64 on ``X``'s device."""
    X = _axes("X", _floats("X", X), 3, _X)
    Z = _axes("Z", _floats("Z", Z), 2, "([R,] n, d_q): one query per sequence")
    W = _axes("W", _floats("W", W), 2, "([R,] d, d_q)")
    n, T, d = X.shape[-3:]
    if Z.shape[-2] != n:
        raise ValidationError(
            f"Z has shape {tuple(Z.shape)}: {Z.shape[-2]} queries, but X has n = {n} sequences; pass one query each"
        )
    columns = Z.shape[-1] if heads is None else heads.columns(Z.shape[-1])
    if tuple(W.shape[-2:]) != (d, columns):
        side_by_side = "" if heads is None else f" (the {columns} columns of the heads' matrices side by side)"
        raise ValidationError(
            f"W has shape {tuple(W.shape)}, but the tokens have width d = {d} and the queries d_q = {Z.shape[-1]}; "
            f"pass W of shape ([R,] {d}, {columns}){side_by_side}"
        )
    batch = _broadcast(X=X.shape[:-3], Z=Z.shape[:-2], W=W.shape[:-2])
    X, Z, W = _alike(X, Z, W)
    return X, Z, W, selection("select", select, n, T, batch, X.device) if selects else None


def labels(y: Any, n: int) -> torch.Tensor:
    """Labels ``y ([R,] n)`` in {-1, +1}, one per sequence of the ``n``."""
    y = _axes("y", _floats("y", y), 1, "([R,] n): one label per sequence")
    if y.shape[-1] != n:
        raise ValidationError(f"y has shape {tuple(y.shape)}, but X has n = {n} sequences; pass one label each")
    return check_labels("y", y)


def score_args(
    X: Any, y: Any, v: Any, select: Any = None, *, selects: bool = True
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(X, y, v, select)`` checked and tied together: ``X ([R,] n, T, d)``, labels ``y ([R,] n)`` in
    {-1, +1}, a linear head ``v ([R,] d)``, in one dtype; ``select`` as :func:`attention_args` (None passes when
    not ``selects``)."""
    X = _axes("X", _floats("X", X), 3, _X)
    if isinstance(v, torch.nn.Module) or hasattr(v, "value_and_gradient"):  # a Head, such as ReluHead
        raise ValidationError(
            f"v is a {type(v).__name__}, a nonlinear head: these scores y_i v^T x_it need a linear head v of shape "
            "([R,] d)"
        )
    n, T, d = X.shape[-3:]
    y = labels(y, n)
    v = _axes("v", _floats("v", v), 1, "([R,] d): a linear head")
    if v.shape[-1] != d:
        raise ValidationError(f"v has shape {tuple(v.shape)}, but the tokens have width d = {d}; pass v of width {d}")
    batch = _broadcast(X=X.shape[:-3], y=y.shape[:-1], v=v.shape[:-1])
    X, y, v = _alike(X, y, v)
    chosen = None if select is None and not selects else selection("select", select, n, T, batch, X.device)
    return X, y, v, chosen


def nonempty(X: torch.Tensor) -> torch.Tensor:
    """Refuse tokens ``X ([R,] n, T, d)`` without a sequence or without a token per sequence."""
    if X.shape[-3] == 0 or X.shape[-2] == 0:
        raise ValidationError(
            f"X has shape {tuple(X.shape)}: no {'sequences' if X.shape[-3] == 0 else 'tokens'}; pass at least one "
            "sequence of at least one token"
        )
    return X


def formula_args(
    X: Any, Z: Any, W: Any, y: Any = None, v: Any = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, Any]:
    """``(X, Z, W, y, v)`` of a formula function of the model checked: each real, finite and float64 (converted on
    autograd's graph where it is on it), ``X`` with a sequence and a token, tied together as :func:`attention_args`
    and :func:`score_args` check them (``W`` with a sum of heads' columns for such a ``v``), leading axes that
    broadcast. ``y`` and ``v`` are checked when given; a
    nonlinear :class:`~attnlab.models.heads.Head` ``v`` passes as it is."""
    X, Z, W = _real_tensor("X", X), _real_tensor("Z", Z), _real_tensor("W", W)
    X, Z, W, _ = attention_args(X, Z, W, selects=False, heads=v if isinstance(v, AttentionHeads) else None)
    nonempty(X)
    leading = {"X": X.shape[:-3], "Z": Z.shape[:-2], "W": W.shape[:-2]}
    if isinstance(v, Head):
        y = labels(_real_tensor("y", y), X.shape[-3])
    elif y is not None:
        _, y, v, _ = score_args(X, _real_tensor("y", y), _real_tensor("v", v), selects=False)
        leading["v"] = v.shape[:-1]
    if y is not None:
        _broadcast(**leading, y=y.shape[:-1])
    return X, Z, W, y, v


def selection(name: str, select: Any, n: int, T: int, batch: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Integer token indices of shape ``([R,] n)`` (leading axes that fit ``batch``) in ``[0, T - 1]``, as int64 on
    ``device``; floats are refused, not rounded (a float selection is a computed value gone wrong)."""
    if select is None:
        raise ValidationError(f"{name} is required: pass ([R,] n) integer token indices, one per sequence")
    if not isinstance(select, torch.Tensor):
        try:
            arr = np.asarray(select)
        except ValueError as err:  # ragged lists: token sets, not one token per sequence
            raise ValidationError(f"{name} must be one integer token index per sequence, got ragged lists") from err
        select = torch.as_tensor(arr) if arr.dtype.kind in "iu" else select
    if not isinstance(select, torch.Tensor) or select.dtype == torch.bool or not _integral(select):
        kind = select.dtype if isinstance(select, torch.Tensor) else np.asarray(select).dtype
        raise ValidationError(
            f"{name} must be integer token indices (one per sequence), got dtype {kind}; floats are not rounded: "
            f"pass an integer array (np.asarray({name}).astype(int) if the values are whole)"
        )
    lead = tuple(select.shape[:-1])
    fits = len(lead) <= len(batch) and all(a in (1, b) for a, b in zip(reversed(lead), reversed(tuple(batch))))
    if select.dim() < 1 or select.shape[-1] != n or not fits:
        raise ValidationError(
            f"{name} has shape {tuple(select.shape)}, expected ([R,] n) with n = {n} token indices per row (leading "
            f"axes that fit the runs axes {tuple(batch)} of the other arguments)"
        )
    return in_range(name, select, T).to(device=device, dtype=torch.int64)


def _integral(t: torch.Tensor) -> bool:
    return not (t.is_floating_point() or t.is_complex())


def in_range(name: str, select: torch.Tensor, T: int) -> torch.Tensor:
    """Refuse token indices outside ``[0, T - 1]``, listing some of them."""
    bad = (select < 0) | (select >= T)
    if bool(bad.any()):
        found = sorted({int(a) for a in select[bad].flatten().tolist()})[:5]
        raise ValidationError(f"{name} holds indices outside [0, {T - 1}] (T = {T} tokens per sequence): {found}")
    return select
