"""Typed token-selection data sets, the papers' data models, and assumption predicates.

Spec: implicit-bias-ngd §6-7, mirror-descent-lp §6-7, kq-nuclear-norm §5-6.
"""

from attnlab.data.assumptions import (
    ASSUMPTIONS,
    AssumptionReport,
    assumption4_geometry,
    check_assumptions,
    condition1,
    default_assumptions,
    equal_nonopt_scores,
    near_orthogonal,
    small_init,
    small_initial_loss,
    unique_optimal_token,
)
from attnlab.data.batch import StackedData, stack
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.files import data_files, is_data_path
from attnlab.data.implicit_bias import dm, example1
from attnlab.data.kq_nuclear import AlignedPairs, aligned_pairs, scores_equal
from attnlab.data.mirror_descent import joint_toy, unit_gaussian
from attnlab.data.multi_token import MultiTokenDraw, multi_token
from attnlab.data.queries import causal_queries, every_query
from attnlab.data.registry import GENERATORS
from attnlab.data.selection import Selection
from attnlab.data.token_sets import as_token_sets, sets_from_probabilities, whole_sequences

__all__ = [
    "ASSUMPTIONS",
    "GENERATORS",
    "AlignedPairs",
    "AssumptionReport",
    "MultiTokenDraw",
    "Selection",
    "StackedData",
    "TokenSelectionData",
    "aligned_pairs",
    "as_token_sets",
    "assumption4_geometry",
    "causal_queries",
    "check_assumptions",
    "default_assumptions",
    "condition1",
    "data_files",
    "dm",
    "equal_nonopt_scores",
    "every_query",
    "example1",
    "is_data_path",
    "joint_toy",
    "multi_token",
    "near_orthogonal",
    "scores_equal",
    "sets_from_probabilities",
    "whole_sequences",
    "small_init",
    "small_initial_loss",
    "stack",
    "unique_optimal_token",
    "unit_gaussian",
]
