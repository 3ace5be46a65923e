"""Diagnostics of token selection: alignment, margins, softmax saturation, norms, Bregman divergences.

Spec: implicit-bias-ngd §5 (alignment ``corr``), §8.4 (softmax saturation), kq-nuclear-norm §4 (margin ``mu(W)``
and margin-normalised direction), mirror-descent-lp §3 (Bregman and directional Bregman divergence).

Pure functions take tensors with an optional leading runs axis and return one value per run. The metric objects
at the bottom (``alignment(W_ref)``, ``opt_softmax()``, ...) follow the one metric protocol of training
(:class:`Metric`): each is called as ``metric(state)`` on a front door's state and returns one value per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attnlab._numerics import mirror_map
from attnlab._validation import ValidationError, check_in, check_scalar, check_select, check_tensor
from attnlab.losses import LOSSES, mean_loss
from attnlab.models.functional import attention_logits, attention_probabilities, loss_gradients, token_scores

__all__ = [
    "Metric",
    "alignment",
    "as_metrics",
    "attention_margin",
    "bregman_divergence",
    "cosine",
    "directional_bregman",
    "entrywise_norm",
    "gradient_direction",
    "largest_gap",
    "head_alignment",
    "log_one_minus_selected",
    "margin",
    "margin_normalized",
    "matrix_norm",
    "metric_columns",
    "norm",
    "opt_softmax",
    "optimal_loss",
    "selected_probabilities",
    "selected_probability",
    "selected_logistic_probability",
    "sequence_margins",
    "token_bound",
    "bregman",
]


def _unit_scale(A: torch.Tensor, dims: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A / s, s)`` with ``s`` the largest ``|entry|`` per run (1 where that is 0 or not finite), shape of ``s``
    ``([R,])``: norms of ``A / s`` neither overflow nor underflow (``||A|| = s ||A / s||`` for any norm)."""
    s = A.abs().amax(dim=dims)
    s = torch.where((s > 0) & torch.isfinite(s), s, torch.ones_like(s))
    return A / s.reshape(s.shape + (1,) * len(dims)), s


def cosine(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """``<A, B> / (||A||_F ||B||_F)`` over the last two axes (or last axis for vectors); shape ``([R,])``.

    Spec: implicit-bias-ngd §5 (``corr(W_t, W_mm)``). Scale-free, so it is computed on ``A`` and ``B`` divided by
    their largest entries: entries near 1e300 or 1e-300 give the same cosine as entries near 1.

    Parameters
    ----------
    A, B : torch.Tensor, shape ([R,] d, d) or ([R,] d)
        Matrices (or vectors when either is one-dimensional), broadcast against each other.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The cosine, in [-1, 1].
    """
    dims = (-2, -1) if A.dim() >= 2 and B.dim() >= 2 else (-1,)
    A, _ = _unit_scale(A, dims)
    B, _ = _unit_scale(B, dims)
    inner = (A * B).sum(dim=dims)
    return inner / (torch.linalg.vector_norm(A, dim=dims) * torch.linalg.vector_norm(B, dim=dims))


def _selected(select: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return select.reshape(select.shape + (1,)).expand(shape[:-1] + (1,))


def sequence_margins(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``min_{t != sel_i} (x_{i,sel_i} - x_{it})^T W z_i`` per sequence, shape ``([R,] n)``.

    Spec: implicit-bias-ngd §5 (``<A_it, W>`` with ``A_it = (x_opt - x_t) z_i^T``), kq-nuclear-norm §4 Def. 4.1.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,] n)
        Each sequence's margin; the W-SVM constraint of sequence i holds when it is >= 1.
    """
    s = attention_logits(X, W, Z)
    idx = _selected(select, s.shape)
    gaps = torch.gather(s, -1, idx) - s  # spec kq §4: (x_sel - x_t)^T W z
    return gaps.scatter(-1, idx, math.inf).amin(dim=-1)


def attention_margin(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``mu(W) = min_{i, t != sel_i} (x_{i,sel_i} - x_{it})^T W z_i``, shape ``([R,])``. Spec: kq-nuclear-norm §4 Def. 4.1.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,])
        The attention margin; negative while some sequence prefers another token.
    """
    return sequence_margins(X, Z, W, select).amin(dim=-1)  # spec kq §4 Def. 4.1: min over sequences


def margin_normalized(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """The margin-normalised direction ``W / mu(W)``. Spec: kq-nuclear-norm §4 (and §8 for runs not yet separating).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence.

    Returns
    -------
    torch.Tensor, shape ([R,] d, d)
        ``W`` divided by its attention margin (:func:`attention_margin`); all ``nan`` for a run whose margin is not
        yet positive.
    """
    mu = attention_margin(X, Z, W, select)
    mu = torch.where(mu > 0, mu, torch.nan)
    return W / mu[..., None, None]


def log_one_minus_selected(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``log(1 - phi_{i,sel_i})`` per sequence from the log-softmax of the other tokens (no ``1 - phi``), ``([R,] n)``.

    Spec: implicit-bias-ngd §8.4 (Lemma 1 slope).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,] n)
        ``log(1 - phi_{i,sel_i})``, finite even when the softmax saturates.
    """
    log_phi = torch.log_softmax(attention_logits(X, W, Z), dim=-1)
    idx = _selected(select, log_phi.shape)
    others = log_phi.scatter(-1, idx, -math.inf)
    return torch.logsumexp(others, dim=-1)


def selected_probabilities(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """Softmax probability ``phi_{i,sel_i}(W)`` of each sequence's selected token, shape ``([R,] n)``.

    Spec: implicit-bias-ngd §8.12 (iii) (``min_i phi_{i,opt}``), §9 fig. 2.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,] n)
    """
    s = attention_probabilities(X, W, Z)
    return torch.gather(s, -1, _selected(select, s.shape)).squeeze(-1)


def selected_probability(X: torch.Tensor, Z: torch.Tensor, W: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """Mean softmax probability of the selected tokens, shape ``([R,])``. Spec: implicit-bias-ngd §9 fig. 2.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    Z : torch.Tensor, shape ([R,] n, d)
        Query tokens.
    W : torch.Tensor, shape ([R,] d, d)
        Key-query weights.
    select : torch.Tensor of int, shape ([R,] n)
        The selected token of each sequence (its optimal token, or an SVM's selection).

    Returns
    -------
    torch.Tensor, shape ([R,])
        The mean over sequences of the selected token's attention probability.
    """
    return selected_probabilities(X, Z, W, select).mean(dim=-1)


def selected_logistic_probability(
    X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, select: torch.Tensor
) -> torch.Tensor:
    """Mean logistic probability ``(1/n) sum_i sigmoid(gamma_{i,sel_i})`` of the selected tokens, shape ``([S,] [R,])``.

    Spec: mirror-descent-lp §9 (the official code's "logistic probability": ``(1 + e^{-y_i v^T x_hat_i})^{-1}`` with
    ``x_hat_i`` the token of largest attention).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The linear head.
    select : torch.Tensor of int, shape ([S,] [R,] n)
        The selected token of each sequence; leading axes beyond X's (recorded steps) broadcast.

    Returns
    -------
    torch.Tensor, shape ([S,] [R,])
        In (0, 1).
    """
    if not isinstance(select, torch.Tensor) or select.is_floating_point() or select.shape[-1:] != X.shape[-3:-2]:
        raise ValidationError(
            f"select must be an integer tensor of shape ([S,] [R,] n) with n = {X.shape[-3]} token indices per row, "
            f"got {getattr(select, 'dtype', type(select).__name__)} of shape {tuple(getattr(select, 'shape', ()))}"
        )
    gamma = token_scores(X, y, v)  # spec md §9: gamma_it = y_i v^T x_it, ([R,] n, T)
    gamma = gamma.expand(select.shape + gamma.shape[-1:]).gather(-1, select[..., None]).squeeze(-1)
    return torch.sigmoid(gamma).mean(dim=-1)  # spec md §9: (1/n) sum (1 + e^{-y_i v^T x_hat_i})^{-1}


def token_bound(X: torch.Tensor) -> torch.Tensor:
    """``B = max_{i,t} ||x_{i,t}||``, the largest token norm, shape ``([R,])``. Spec: implicit-bias-ngd §1.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.

    Returns
    -------
    torch.Tensor, shape ([R,])
    """
    X = check_tensor("X", X)
    if X.dim() not in (3, 4):
        raise ValidationError(f"X has shape {tuple(X.shape)}, expected ([R,] n, T, d): one token matrix per sequence")
    return torch.linalg.vector_norm(X, dim=-1).flatten(-2).amax(dim=-1)  # spec ngd §1: B


def _selected_scores(X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, select: torch.Tensor):
    gamma = token_scores(X, y, v)  # spec ngd §1: gamma_it = y_i v^T x_it, ([R,] n, T)
    idx = _selected(select, gamma.shape)
    return gamma, idx, torch.gather(gamma, -1, idx).squeeze(-1)


def largest_gap(X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, select: torch.Tensor) -> torch.Tensor:
    """``Delta_max = max_i (gamma_{i,sel_i} - max_{t != sel_i} gamma_{it})``, shape ``([R,])``.

    Spec: implicit-bias-ngd §1 (``Delta_i``, the score gap of sequence i).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The linear head.
    select : torch.Tensor of int, shape ([R,] n)
        The optimal token of each sequence.

    Returns
    -------
    torch.Tensor, shape ([R,])
    """
    gamma, idx, best = _selected_scores(X, y, v, select)
    return (best - gamma.scatter(-1, idx, -math.inf).amax(dim=-1)).amax(dim=-1)  # spec ngd §1: max_i Delta_i


def optimal_loss(
    X: torch.Tensor, y: torch.Tensor, v: torch.Tensor, select: torch.Tensor, loss: str = "exp"
) -> torch.Tensor:
    """``L_* = (1/n) sum_i l(gamma_{i,sel_i})``: the loss with all attention on the selected tokens, shape ``([R,])``.

    Spec: implicit-bias-ngd §3 (with a fixed head the infimum of the loss, not attained).

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
        Token sequences.
    y : torch.Tensor, shape ([R,] n)
        Labels in {-1, +1}.
    v : torch.Tensor, shape ([R,] d)
        The fixed linear head.
    select : torch.Tensor of int, shape ([R,] n)
        The optimal token of each sequence.
    loss : {"exp", "logistic"}, default="exp"

    Returns
    -------
    torch.Tensor, shape ([R,])
    """
    check_in("loss", loss, LOSSES)
    return mean_loss(_selected_scores(X, y, v, select)[2], loss)  # spec ngd §3: L_* = (1/n) sum l(gamma_opt)


def gradient_direction(
    X: torch.Tensor, Z: torch.Tensor, y: torch.Tensor, v: torch.Tensor, W: torch.Tensor, loss: str = "exp"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The descent direction ``-grad L / ||grad L||_F`` (exact after the gradient underflows), ``log ||grad L||_F``
    and ``log L``.

    Spec: implicit-bias-ngd §5 (NGD moves along ``-grad L / ||grad L||``), §8.5.

    Parameters
    ----------
    X : torch.Tensor, shape ([R,] n, T, d)
    Z : torch.Tensor, shape ([R,] n, d)
    y : torch.Tensor, shape ([R,] n)
    v : torch.Tensor, shape ([R,] d)
        The fixed linear head.
    W : torch.Tensor, shape ([R,] d, d)
    loss : {"exp", "logistic"}, default="exp"

    Returns
    -------
    direction : torch.Tensor, shape ([R,] d, d)
    log_grad_norm : torch.Tensor, shape ([R,])
    log_risk : torch.Tensor, shape ([R,])
    """
    check_in("loss", loss, LOSSES)
    grad, _, log_risk = loss_gradients(X, Z, y, v, W, loss)  # log-scaled: grad = mantissa * e^{log_scale}
    norm = torch.linalg.matrix_norm(grad.mantissa)
    return -grad.mantissa / norm[..., None, None], torch.log(norm) + grad.log_scale, log_risk


def entrywise_norm(W: torch.Tensor, p: float) -> torch.Tensor:
    """Entrywise ``l_p`` norm over the last two axes, shape ``([R,])``. Spec: mirror-descent-lp §1.

    Computed as ``s ||W / s||_p`` with ``s = max |W_ij|``, so ``|W_ij|^p`` never overflows or underflows.

    Parameters
    ----------
    W : torch.Tensor, shape ([R,] d, d)
        The matrices.
    p : float
        The exponent, >= 1 (``inf`` for the largest entry).

    Returns
    -------
    torch.Tensor, shape ([R,])
        ``(sum_ij |W_ij|^p)^(1/p)``.
    """
    unit, s = _unit_scale(W, (-2, -1))
    return s * torch.linalg.vector_norm(unit, ord=p, dim=(-2, -1))


def matrix_norm(W: torch.Tensor, kind: str | float = "fro") -> torch.Tensor:
    """``"fro"``, ``"nuc"``, ``"op"`` or an entrywise ``p`` norm of ``W``, shape ``([R,])``.

    Computed on ``W / max |W_ij|`` and scaled back, so a norm of 4.2e304 is reported as such, not as ``inf``
    (the sum of squares would overflow), and one of 1e-200 not as 0.

    Parameters
    ----------
    W : torch.Tensor, shape ([R,] d, d)
        The matrices.
    kind : {"fro", "nuc", "op"} or float, default="fro"
        Frobenius, nuclear or operator (largest singular value) norm, or an entrywise ``l_p`` norm, p >= 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The norm of each matrix.
    """
    if isinstance(kind, (int, float)) and not isinstance(kind, bool):
        return entrywise_norm(W, float(kind))
    ords = {"fro": "fro", "nuc": "nuc", "op": 2}
    if kind not in ords:
        raise ValidationError(f"kind == {kind!r}, must be 'fro', 'nuc', 'op' or a number p >= 1")
    unit, s = _unit_scale(W, (-2, -1))
    return s * torch.linalg.matrix_norm(unit, ords[kind])


def bregman_divergence(A: torch.Tensor, B: torch.Tensor, p: float) -> torch.Tensor:
    """``D_psi(A, B)`` for ``psi = (1/p) ||.||_p^p`` (entrywise), shape ``([R,])``.

    Spec: mirror-descent-lp §3 Def. 1: ``(1/p)||A||_p^p + ((p-1)/p)||B||_p^p - <grad psi(B), A>``.

    Parameters
    ----------
    A, B : torch.Tensor, shape ([R,] d, d)
        The two points; ``B`` is where the potential is linearised.
    p : float
        The potential's exponent, > 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The divergence, >= 0 (0 when ``A == B``).
    """
    check_scalar("p", p, low=1.0, low_inclusive=False)
    dims = (-2, -1)
    grad_b = mirror_map(B, p)  # spec md §3: grad psi(B)
    return (A.abs() ** p).sum(dims) / p + (p - 1) / p * (B.abs() ** p).sum(dims) - (grad_b * A).sum(dims)


def directional_bregman(W_ref: torch.Tensor, W: torch.Tensor, p: float) -> torch.Tensor:
    """``D_psi(W_ref/||W_ref||_p, W/||W||_p)``, shape ``([R,])``. Spec: mirror-descent-lp §3 (convergence metric).

    Parameters
    ----------
    W_ref : torch.Tensor, shape ([R,] d, d)
        The reference direction (an l_p SVM solution ``W^mm``).
    W : torch.Tensor, shape ([R,] d, d)
        The iterate; neither may be zero.
    p : float
        The potential's exponent, > 1.

    Returns
    -------
    torch.Tensor, shape ([R,])
        The Bregman divergence between the two directions, each normalised to unit l_p norm.
    """
    a = W_ref / entrywise_norm(W_ref, p)[..., None, None]
    b = W / entrywise_norm(W, p)[..., None, None]
    return bregman_divergence(a, b, p)


# ---------------------------------------------------------------------------------------------------------------
# The one metric protocol of training: metric(state) -> a value per run.


@dataclass(frozen=True)
class Metric:
    """A named diagnostic of a training state: ``metric(state)`` gives one value per run, recorded as a column.

    The one metric protocol of attnlab's training: every front door records its metrics by calling them on its
    state, a mapping of names to values:

    - token selection (:func:`attnlab.train`, :func:`attnlab.training.batched.train`, the flow): ``"W"``
      (R, d, d); the parametrisation's tensors by name (``"K"``, ``"Q"``, ``"xi_k"``, ``"xi_q"``, and ``"v"`` when
      the head trains); the data ``"X"`` (R, n, T, d), ``"Z"`` (R, n, d), ``"y"`` (R, n), ``"v"`` (the head) and
      ``"select"`` (R, n; the data's selection, else its optimal tokens, when known); ``"rule_state"``;
    - in-context regression: ``"V"`` (R, k, p), ``"Q"`` (R, p, d);
    - NTK gradient descent: ``"W"`` (d_in, m), ``"step"``, ``"net"``;
    - the real-model classifier: ``"model"``, ``"epoch"``.

    A plain function of the state is a metric too, named by the mapping it is passed in (:func:`as_metrics`).
    Calling the metric calls ``fn`` under :func:`torch.no_grad`.

    Attributes
    ----------
    name : str
        The column it fills in the frame.
    fn : callable
        ``fn(state)``: one value per run (shape (R,)), one value for all runs, or a mapping of column names to such
        values (several columns at once, e.g. from one shared computation).
    """

    name: str
    fn: Callable[[Mapping[str, Any]], Any]

    def __call__(self, state: Mapping[str, Any]) -> Any:
        with torch.no_grad():
            return self.fn(state)


def as_metrics(metrics: Sequence[Metric] | Mapping[str, Callable[[Mapping[str, Any]], Any]] | None) -> dict[str, Any]:
    """The metrics by column name, from named :class:`Metric` objects or a mapping of names to functions.

    Parameters
    ----------
    metrics : sequence of Metric, mapping of str to callable, or None
        What a front door's ``metrics`` argument takes.

    Returns
    -------
    dict of str to callable
        ``name -> metric``; each is called as ``metric(state)``.

    Raises
    ------
    ValidationError
        When an entry of a sequence is not a :class:`Metric`, or a value of a mapping is not callable.
    """
    if metrics is None:
        return {}
    if isinstance(metrics, Mapping):
        bad = [k for k, m in metrics.items() if not callable(m)]
        if bad:
            raise ValidationError(f"metrics {bad} are not callable; pass functions state -> value per run")
        return dict(metrics)
    bad = [type(m).__name__ for m in metrics if not isinstance(m, Metric)]
    if bad:
        raise ValidationError(
            f"metrics must be attnlab.metrics.Metric objects (or a mapping name -> function of the state), got {bad}"
        )
    return {m.name: m for m in metrics}


def metric_columns(metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]], state: Mapping[str, Any]) -> dict:
    """Every metric evaluated on ``state``: one column per metric, or the columns of a metric that returns a mapping.

    Parameters
    ----------
    metrics : mapping of str to callable
        ``name -> metric`` (:func:`as_metrics`).
    state : mapping of str to object
        The front door's state (see :class:`Metric`).

    Returns
    -------
    dict of str to object
        Column name -> the metric's value (a tensor of shape (R,) or (), a float, ...).
    """
    columns: dict[str, Any] = {}
    for name, metric in metrics.items():
        value = metric(state)
        if isinstance(value, Mapping):
            columns.update(value)
        else:
            columns[name] = value
    return columns


def _selection(select: Any) -> Callable[[Mapping[str, Any]], torch.Tensor]:
    """The selected tokens of a state: ``select`` checked once against the data's (n, T), else the state's own."""
    checked: list[torch.Tensor] = []

    def get(state: Mapping[str, Any]) -> torch.Tensor:
        if select is None:
            return state["select"]
        if not checked:
            X = state["X"]
            runs = X.shape[0] if X.dim() == 4 else None
            checked.append(check_select("select", select, X.shape[-3], X.shape[-2], runs=runs))
        return checked[0]

    return get


def _reference(name: str, value: Any, axes: int) -> torch.Tensor:
    """A reference direction: a float64 copy of ``value`` with ``axes`` axes, or one more (a runs axis)."""
    ref = check_tensor(name, value)
    if ref.dim() not in (axes, axes + 1) or (axes == 2 and ref.shape[-1] != ref.shape[-2]):
        shape = "(d, d) or (R, d, d)" if axes == 2 else "(d,) or (R, d)"
        raise ValidationError(f"{name} has shape {tuple(ref.shape)}, expected {shape}")
    return ref


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
    W_ref : array_like, shape (d, d) or (R, d, d)
        The reference direction: one for every run, or one per run.
    name : str, default="alignment"
        The column name.

    Returns
    -------
    Metric
        Records :func:`cosine` of the model's ``W`` and ``W_ref``, shape ([R,]).

    Raises
    ------
    ValidationError
        When ``W_ref`` is not of shape (d, d) or (R, d, d); when recorded, if its shape does not match the model's
        ``W``.
    """
    ref = _reference("W_ref", W_ref, 2)
    return Metric(name, lambda state: cosine(state["W"], _against("W_ref", ref, state["W"], "W")))


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
    return Metric(name, lambda state: cosine(state["v"], _against("v_ref", ref, state["v"], "head v")))


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
        When recorded, if ``select`` does not fit the data's (n, T).
    """
    tokens = _selection(select)
    return Metric(name, lambda state: selected_probability(state["X"], state["Z"], state["W"], tokens(state)))


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
        When recorded, if ``select`` does not fit the data's (n, T).
    """
    tokens = _selection(select)
    return Metric(name, lambda state: attention_margin(state["X"], state["Z"], state["W"], tokens(state)))


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
        When ``kind`` is a string other than ``"fro"``, ``"nuc"`` or ``"op"``.
    """
    if not isinstance(kind, (int, float)):
        check_in("kind", kind, ("fro", "nuc", "op"))
    return Metric(name or f"norm_{kind}", lambda state: matrix_norm(state["W"], kind))


def bregman(W_ref: Any, p: float, name: str | None = None) -> Metric:
    """Directional Bregman divergence ``dB_p(W_ref, W_t)``. Spec: mirror-descent-lp §3.

    Parameters
    ----------
    W_ref : array_like, shape (d, d) or (R, d, d)
        The reference direction (an l_p SVM solution ``W^mm``): one for every run, or one per run.
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
        When ``p <= 1``, when ``W_ref`` is not of shape (d, d) or (R, d, d), or, when recorded, if its shape does
        not match the model's ``W``.
    """
    check_scalar("p", p, low=1.0, low_inclusive=False)
    ref = _reference("W_ref", W_ref, 2)
    return Metric(
        name or f"bregman_p{p:g}",
        lambda state: directional_bregman(_against("W_ref", ref, state["W"], "W"), state["W"], p),
    )
