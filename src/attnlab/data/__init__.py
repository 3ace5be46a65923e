"""Typed token-selection data sets, the papers' data models, and assumption predicates.

Spec: implicit-bias-ngd §6-7, mirror-descent-lp §6-7, kq-nuclear-norm §5-6.
"""

from attnlab.data.dataset import TokenSelectionData

__all__ = ["TokenSelectionData"]
