"""Diagnostics of token selection, and the one metric protocol of training.

Spec: implicit-bias-ngd §5 (alignment ``corr``), §8.4 (softmax saturation), kq-nuclear-norm §4 (margin ``mu(W)``
and margin-normalised direction), mirror-descent-lp §3 (Bregman and directional Bregman divergence).

The pure functions (:mod:`attnlab.metrics.diagnostics`) take tensors with an optional leading runs axis and return
one value per run. What training records is a :class:`Metric`: ``metric(state)`` on a front door's state
(:mod:`attnlab.metrics.protocol`), such as ``alignment(W_ref)`` or ``opt_softmax()``.
"""

from attnlab.metrics.diagnostics import (
    attention_margin,
    bregman_divergence,
    cosine,
    directional_bregman,
    entrywise_norm,
    gradient_direction,
    largest_gap,
    log_one_minus_selected,
    margin_normalized,
    matrix_norm,
    optimal_loss,
    selected_logistic_probability,
    selected_probabilities,
    selected_probability,
    sequence_margins,
    token_bound,
)
from attnlab.metrics.protocol import (
    Metric,
    alignment,
    as_metrics,
    bregman,
    head_alignment,
    margin,
    metric_columns,
    norm,
    opt_softmax,
)

__all__ = [
    "Metric",
    "alignment",
    "as_metrics",
    "attention_margin",
    "bregman",
    "bregman_divergence",
    "cosine",
    "directional_bregman",
    "entrywise_norm",
    "gradient_direction",
    "head_alignment",
    "largest_gap",
    "log_one_minus_selected",
    "margin",
    "margin_normalized",
    "matrix_norm",
    "metric_columns",
    "norm",
    "opt_softmax",
    "optimal_loss",
    "selected_logistic_probability",
    "selected_probabilities",
    "selected_probability",
    "sequence_margins",
    "token_bound",
]
