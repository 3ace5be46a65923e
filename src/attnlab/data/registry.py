"""The named data generators, for the command line and for configs that pick a data model by name.

Spec: implicit-bias-ngd §6, mirror-descent-lp §6, kq-nuclear-norm §6.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from attnlab.data.implicit_bias import dm, example1
from attnlab.data.kq_nuclear import aligned_pairs, scores_equal
from attnlab.data.mirror_descent import joint_toy, unit_gaussian

__all__ = ["GENERATORS"]

#: Generator name -> function. Each returns a ``TokenSelectionData``, except ``aligned_pairs``, which returns an
#: ``AlignedPairs`` whose ``.data`` is the data set.
GENERATORS: dict[str, Callable[..., Any]] = {
    "example1": example1,
    "dm": dm,
    "unit_gaussian": unit_gaussian,
    "joint_toy": joint_toy,
    "scores_equal": scores_equal,
    "aligned_pairs": aligned_pairs,
}
