"""Softmax token-selection attention: pure functions and thin modules (combined W, factored K Q, diagonal, and the
diagonal variants ``beta`` and signed squares)."""

from attnlab.models.attention import (
    PARAMETRIZATIONS,
    Combined,
    Diagonal,
    Factored,
    Parametrization,
    TokenSelectionModel,
)
from attnlab.models.diagonal import DiagonalW, SignedSquares
from attnlab.models.excess_risk import log_excess_risk
from attnlab.models.functional import (
    LogScaled,
    attention_logits,
    attention_loss,
    attention_probabilities,
    centred_scores,
    loss_gradients,
    margins,
    outputs,
    token_scores,
)
from attnlab.models.heads import AttentionHeads, Head, ModuleHead, ReluHead, as_head
from attnlab.models.sum_of_heads import SummedHeads, SumOfHeads, head_matrices, side_by_side

__all__ = [
    "PARAMETRIZATIONS",
    "Parametrization",
    "Combined",
    "Diagonal",
    "DiagonalW",
    "Factored",
    "SignedSquares",
    "TokenSelectionModel",
    "AttentionHeads",
    "Head",
    "ModuleHead",
    "ReluHead",
    "SumOfHeads",
    "SummedHeads",
    "head_matrices",
    "side_by_side",
    "as_head",
    "LogScaled",
    "attention_logits",
    "attention_loss",
    "attention_probabilities",
    "centred_scores",
    "log_excess_risk",
    "loss_gradients",
    "margins",
    "outputs",
    "token_scores",
]
