"""Named experiments, one module per paper; :mod:`attnlab.experiments.catalog` lists them all.

Run one with ``attnlab run <name>`` or :func:`run_experiment`; list them with ``attnlab list``. The catalog names
each experiment once, with its paper, its summary and the module that defines it. Importing this package loads
neither the experiments nor torch; :func:`get_experiment` imports the one module it needs and
:func:`list_experiments` all of them.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Check",
    "CheckCounts",
    "Claim",
    "Experiment",
    "ExperimentResult",
    "Falsifier",
    "RunContext",
    "RunRecord",
    "check_close",
    "check_greater",
    "check_less",
    "check_ordering",
    "check_slope",
    "observation",
    "spread_observation",
    "spread_tolerance",
    "count_checks",
    "get_experiment",
    "list_experiments",
    "make_config",
    "parse_overrides",
    "register",
    "run_experiment",
]


def __getattr__(name: str) -> Any:
    """The names of :mod:`attnlab.experiments.base`, loaded (with torch) on first use."""
    if name in __all__:
        value = getattr(importlib.import_module("attnlab.experiments.base"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
