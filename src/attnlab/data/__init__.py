"""Typed token-selection data sets, the papers' data models, and assumption predicates.

Spec: implicit-bias-ngd §6-7, mirror-descent-lp §6-7, kq-nuclear-norm §5-6.
"""

from attnlab.data.batch import StackedData, stack
from attnlab.data.dataset import TokenSelectionData
from attnlab.data.implicit_bias import dm, example1
from attnlab.data.kq_nuclear import AlignedPairs, aligned_pairs, scores_equal
from attnlab.data.mirror_descent import joint_toy, unit_gaussian
from attnlab.data.registry import GENERATORS

__all__ = [
    "GENERATORS",
    "AlignedPairs",
    "StackedData",
    "TokenSelectionData",
    "aligned_pairs",
    "dm",
    "example1",
    "joint_toy",
    "scores_equal",
    "stack",
    "unit_gaussian",
]
