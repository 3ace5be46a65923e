"""The one metric protocol of training, ``metric(state)``, and the metric objects of token selection.

Spec: implicit-bias-ngd §5 (alignment), §9 (softmax on the selected tokens), kq-nuclear-norm §4 (margin),
mirror-descent-lp §3 (directional Bregman divergence).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attnlab._validation import ValidationError, check_nonzero, check_scalar, check_tensor
from attnlab.data.selection import Selection
from attnlab.geometry import _directional_bregman, _matrix_norm, _norm_kind
from attnlab.metrics.diagnostics import _attention_margin, _cosine, _selected_probability

__all__ = [
    "Metric",
    "alignment",
    "as_metrics",
    "bregman",
    "head_alignment",
    "margin",
    "metric_columns",
    "norm",
    "opt_softmax",
]


@dataclass(frozen=True)
class Metric:
    """A named diagnostic of a training state: ``metric(state)`` gives one value per run, recorded as a column.

    The one metric protocol of attnlab's training: every front door calls its metrics on its state, a mapping of
    names to values (documented by each front door): for token selection ``"W"`` (R, d, d), the tensors by name,
    the data ``"X"``, ``"Z"``, ``"y"``, the head ``"v"``, ``"select"`` (the data's selection, else its optimal
    tokens) and ``"rule_state"``; for regression ``"V"``, ``"Q"``; for NTK gradient descent ``"W"``, ``"step"``,
    ``"net"``; for the classifier ``"model"``, ``"epoch"``. A plain function of the state is a metric too, named by
    the mapping it is passed in. ``fn`` runs under :func:`torch.no_grad`.

    Attributes
    ----------
    name : str
        The column it fills in the frame.
    fn : callable
        ``fn(state)``: one value per run (shape (R,)), one for all runs, or a mapping of column names to such
        values (several columns from one computation).
    """

    name: str
    fn: Callable[[Mapping[str, Any]], Any]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError(f"Metric name == {self.name!r}, must be a non-empty str (the column it fills)")
        if not callable(self.fn):
            raise ValidationError(
                f"Metric {self.name!r}: fn is a {type(self.fn).__name__}, not callable; pass a function state -> "
                "value per run"
            )

    def __call__(self, state: Mapping[str, Any]) -> Any:
        with torch.no_grad():
            return self.fn(state)


def as_metrics(metrics: Sequence[Metric] | Mapping[str, Callable[[Mapping[str, Any]], Any]] | None) -> dict[str, Any]:
    """A front door's ``metrics`` argument (named :class:`Metric` objects, or a mapping name -> function) by name.

    Parameters
    ----------
    metrics : sequence of Metric, mapping of str to callable, or None

    Returns
    -------
    dict of str to callable

    Raises
    ------
    ValidationError
        When an entry of a sequence is not a :class:`Metric`, two of them share a name, a key of a mapping is not a
        non-empty str, or a value of a mapping is not callable.
    """
    if metrics is None:
        return {}
    if isinstance(metrics, Mapping):
        names = [k for k in metrics if not isinstance(k, str) or not k]
        if names:
            raise ValidationError(f"metrics names {names} are not non-empty str; name each column by a str")
        bad = [k for k, m in metrics.items() if not callable(m)]
        if bad:
            raise ValidationError(f"metrics {bad} are not callable; pass functions state -> value per run")
        return dict(metrics)
    bad = [type(m).__name__ for m in metrics if not isinstance(m, Metric)]
    if bad:
        raise ValidationError(
            f"metrics must be attnlab.metrics.Metric objects (or a mapping name -> function of the state), got {bad}"
        )
    named = [m.name for m in metrics]
    twice = sorted({name for name in named if named.count(name) > 1})
    if twice:
        raise ValidationError(
            f"metrics holds several Metric objects named {twice}: each fills its own column; give each its own name "
            "(the name= argument of alignment, norm, ...)"
        )
    return {m.name: m for m in metrics}


def metric_columns(
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]],
    state: Mapping[str, Any],
    taken: Collection[str] = (),
) -> dict:
    """Every metric on ``state``: one column per metric, or the columns of a metric that returns a mapping.

    Parameters
    ----------
    metrics : mapping of str to callable
        ``name -> metric`` (:func:`as_metrics`).
    state : mapping of str to object
        The front door's state (see :class:`Metric`).
    taken : collection of str, optional
        The columns the front door writes itself; a metric column of one of these names is refused.

    Returns
    -------
    dict of str to object
        Column name -> value (a tensor of shape (R,) or (), a float, ...).

    Raises
    ------
    ValidationError
        When two metrics fill one column (a metric returning a mapping with a key that another metric fills), or a
        metric fills a column in ``taken``.
    """
    columns: dict[str, Any] = {}
    for name, metric in metrics.items():
        value = metric(state)
        for column, entry in value.items() if isinstance(value, Mapping) else ((name, value),):
            if column in columns:
                raise ValidationError(
                    f"metric {name!r} fills the column {column!r}, which another metric fills too; give every "
                    "column its own name"
                )
            columns[column] = entry
    refuse_taken(columns, taken)
    return columns


def refuse_taken(metrics: Collection[str], own: Collection[str]) -> None:
    """Refuse metric columns named as a column the front door writes itself: the metric would overwrite it silently.

    Parameters
    ----------
    metrics : collection of str
        The metrics' column names.
    own : collection of str
        The columns the front door records itself.

    Raises
    ------
    ValidationError
        Naming the taken columns and how to rename the metric.
    """
    taken = sorted(set(metrics) & set(own))
    if taken:
        raise ValidationError(
            f"metric column(s) {taken} would overwrite the column(s) of that name the training loop records itself "
            f"({', '.join(sorted(own))}); rename the metric (e.g. Metric('my_{taken[0]}', fn)), or drop it and read "
            "the recorded column"
        )


def _one_head(state: Mapping[str, Any], name: str) -> None:
    """Refuse, naming the metric ``name``, a state whose ``W`` is not one head's ``(d, d_q)`` matrix for the queries
    ``Z (.., d_q)``: a sum of ``H`` heads trains ``[W_1, ..., W_H]`` of shape ``(d, H d_q)`` (multi-token §9), whose
    selected-token metrics are each head's, not one of the side-by-side matrix. A shape comparison, per record."""
    W, Z = state["W"], state["Z"]
    if W.shape[-1] != Z.shape[-1]:
        head = state.get("v")
        H = getattr(head, "H", W.shape[-1] // max(Z.shape[-1], 1))
        raise ValidationError(
            f"metric {name!r} reads one head's W of shape (d, d_q) = (d, {Z.shape[-1]}), but the model's W has shape "
            f"{tuple(W.shape)} (a {type(head).__name__} with {H} heads side by side); drop {name}() for a sum of heads, or "
            f"record each head with a Metric of your own, e.g. "
            f"Metric('{name}_0', lambda s: attnlab.metrics.attention_margin(s['X'], s['Z'], "
            f"attnlab.models.head_matrices(s['W'], {H})[..., 0, :, :], select)) for head 0"
        )


def _selection(select: Any, name: str) -> Callable[[Mapping[str, Any]], torch.Tensor]:
    """The selected tokens of a state: ``select`` checked once against the data's (n, T), else the state's own
    (refused, naming the metric ``name``, where the state has none: a nonlinear head has no optimal tokens). A state
    whose ``W`` holds several heads side by side is refused (:func:`_one_head`)."""
    checked: list[torch.Tensor] = []

    def get(state: Mapping[str, Any]) -> torch.Tensor:
        _one_head(state, name)
        if select is None:
            if state.get("select") is None:
                head = type(state.get("v")).__name__
                raise ValidationError(
                    f"metric {name!r} has no tokens to read: the data has no selection and its head is nonlinear "
                    f"(a {head} has no optimal tokens); pass select= (one token index per sequence, shape (n,) or "
                    f"(R, n)), e.g. {name}(select=...)"
                )
            if state["select"].dtype == torch.bool:  # the data's token sets, an (n, T) mask
                raise ValidationError(
                    f"metric {name!r} reads one selected token per sequence, but the data's selection holds token sets "
                    f"(a mask of shape {tuple(state['select'].shape)}); pass select= (one token index per sequence, "
                    f"shape (n,) or (R, n)), e.g. {name}(select=...)"
                )
            return state["select"]
        if not checked:
            X = state["X"]
            runs = X.shape[0] if X.dim() == 4 else None
            checked.append(Selection.parse(select, X.shape[-3], X.shape[-2], runs=runs).one_token("select"))
        return checked[0]

    return get


def _reference(name: str, value: Any, axes: int) -> torch.Tensor:
    """A reference direction: a float64 copy of ``value`` with ``axes`` axes, or one more (a runs axis); matrices
    may be rectangular (cross-attention's (d, d_q), a sum of heads' (d, H d_q)), checked against ``W`` when
    recorded."""
    ref = check_tensor(name, value)
    if ref.dim() not in (axes, axes + 1):
        shape = "(d, d) or (R, d, d), or (d, d_q) or (R, d, d_q)" if axes == 2 else "(d,) or (R, d)"
        raise ValidationError(f"{name} has shape {tuple(ref.shape)}, expected {shape}")
    return check_nonzero(name, ref, axes)


def _against(name: str, ref: torch.Tensor, current: torch.Tensor, what: str) -> torch.Tensor:
    """``ref`` checked against the runs' ``current`` tensor at recording time: same trailing shape, and the same
    runs axis when both have one."""
    if ref.dim() > current.dim() or tuple(ref.shape) != tuple(current.shape[current.dim() - ref.dim() :]):
        raise ValidationError(
            f"{name} has shape {tuple(ref.shape)}, but the trained {what} has shape {tuple(current.shape)}; pass a "
            f"reference of the model's shape (e.g. the SVM of the data the model is trained on)"
        )
    return ref


def alignment(W_ref: Any, name: str = "alignment") -> Metric:
    """``corr(W_t, W_ref)``, e.g. with ``W_ref = attention_svm(data).W``. Spec: implicit-bias-ngd §5.

    Parameters
    ----------
    W_ref : array_like, shape (d, d_q) or (R, d, d_q)
        The reference direction, non-zero, of the model's ``W`` shape: one for every run, or one per run.
    name : str, default="alignment"
        The column name.

    Returns
    -------
    Metric
        Records :func:`cosine` of the model's ``W`` and ``W_ref``, shape ([R,]).

    Raises
    ------
    ValidationError
        When ``W_ref`` is zero or not of shape (d, d_q) or (R, d, d_q); when recorded, if its shape does not match
        the model's ``W``.
    """
    ref = _reference("W_ref", W_ref, 2)
    return Metric(name, lambda state: _cosine(state["W"], _against("W_ref", ref, state["W"], "W")))


def head_alignment(v_ref: Any, name: str = "head_alignment") -> Metric:
    """``corr(v_t, v_ref)`` for a trained head, e.g. ``v_ref = head_svm(data).v``. Spec: implicit-bias-ngd §8.11.

    Parameters
    ----------
    v_ref : array_like, shape (d,) or (R, d)
        The reference head direction: one for every run, or one per run.
    name : str, default="head_alignment"
        The column name.

    Returns
    -------
    Metric
        Records :func:`cosine` of the model's head ``v`` and ``v_ref``, shape ([R,]).

    Raises
    ------
    ValidationError
        When ``v_ref`` is not of shape (d,) or (R, d); when recorded, if its shape does not match the model's ``v``.
    """
    ref = _reference("v_ref", v_ref, 1)

    def measure(state: Mapping[str, Any]) -> torch.Tensor:
        v = state["v"]
        if not isinstance(v, torch.Tensor):
            raise ValidationError(
                f"metric {name!r} reads a linear head v, but the model's head is a {type(v).__name__}; drop it for a "
                "nonlinear head"
            )
        return _cosine(v, _against("v_ref", ref, v, "head v"))

    return Metric(name, measure)


def opt_softmax(select: Any = None, name: str = "opt_softmax") -> Metric:
    """Mean softmax probability of the selected (default: optimal) tokens. Spec: implicit-bias-ngd §9.

    Parameters
    ----------
    select : array_like of int, shape ([R,] n), optional
        The selected token of each sequence; None takes the data's own ``select`` if it has one, else its optimal
        tokens.
    name : str, default="opt_softmax"
        The column name.

    Returns
    -------
    Metric
        Records :func:`selected_probability`, shape ([R,]), in [0, 1].

    Raises
    ------
    ValidationError
        When recorded, if ``select`` does not fit the data's (n, T), or is not given for a model whose head is
        nonlinear (no optimal tokens), or the model's ``W`` holds several heads side by side (a sum of heads,
        ``(d, H d_q)``: record each head with a :class:`Metric` of your own).
    """
    tokens = _selection(select, "opt_softmax")
    return Metric(name, lambda state: _selected_probability(state["X"], state["Z"], state["W"], tokens(state)))


def margin(select: Any = None, name: str = "margin") -> Metric:
    """Attention margin ``mu(W_t)`` of the selected tokens. Spec: kq-nuclear-norm §4.

    Parameters
    ----------
    select : array_like of int, shape ([R,] n), optional
        The selected token of each sequence; None takes the data's own ``select`` if it has one, else its optimal
        tokens.
    name : str, default="margin"
        The column name.

    Returns
    -------
    Metric
        Records :func:`attention_margin`, shape ([R,]).

    Raises
    ------
    ValidationError
        When recorded, if ``select`` does not fit the data's (n, T), or is not given for a model whose head is
        nonlinear (no optimal tokens), or the model's ``W`` holds several heads side by side (a sum of heads,
        ``(d, H d_q)``: record each head with a :class:`Metric` of your own).
    """
    tokens = _selection(select, "margin")
    return Metric(name, lambda state: _attention_margin(state["X"], state["Z"], state["W"], tokens(state)))


def norm(kind: str | float = "fro", name: str | None = None) -> Metric:
    """A norm of ``W_t``.

    Parameters
    ----------
    kind : {"fro", "nuc", "op"} or float, default="fro"
        Frobenius, nuclear or operator norm, or an entrywise ``l_p`` norm (see :func:`matrix_norm`).
    name : str, optional
        The column name; default ``"norm_<kind>"``.

    Returns
    -------
    Metric
        Records :func:`matrix_norm` of the model's ``W``, shape ([R,]).

    Raises
    ------
    ValidationError
        When ``kind`` is a string other than ``"fro"``, ``"nuc"`` or ``"op"``, or a number below 1.
    """
    checked = _norm_kind(kind)
    return Metric(name or f"norm_{kind}", lambda state: _matrix_norm(state["W"], checked))


def bregman(W_ref: Any, p: float, name: str | None = None) -> Metric:
    """Directional Bregman divergence ``dB_p(W_ref, W_t)``. Spec: mirror-descent-lp §3.

    Parameters
    ----------
    W_ref : array_like, shape (d, d_q) or (R, d, d_q)
        The reference direction (an l_p SVM solution ``W^mm``), non-zero: one for every run, or one per run.
    p : float
        The potential's exponent, > 1.
    name : str, optional
        The column name; default ``"bregman_p<p>"``.

    Returns
    -------
    Metric
        Records :func:`directional_bregman` of ``W_ref`` and the model's ``W``, shape ([R,]), >= 0.

    Raises
    ------
    ValidationError
        When ``p <= 1``, when ``W_ref`` is zero or not of shape (d, d_q) or (R, d, d_q), or, when recorded, if its
        shape does not match the model's ``W``.
    """
    check_scalar("p", p, low=1.0, low_inclusive=False)
    ref = _reference("W_ref", W_ref, 2)
    return Metric(
        name or f"bregman_p{p:g}",
        lambda state: _directional_bregman(_against("W_ref", ref, state["W"], "W"), state["W"], p),
    )
