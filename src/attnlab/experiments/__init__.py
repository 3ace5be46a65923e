"""Named experiments, one package or module per paper; :mod:`attnlab.experiments.catalog` lists them all.

Run one with ``attnlab run <name>`` or :func:`run_experiment`; list them with ``attnlab list``. The catalog names
each experiment once, with its paper, its summary and the module that defines it. Importing this package loads
neither the experiments nor torch; :func:`get_experiment` imports the one module it needs and
:func:`list_experiments` all of them. What an experiment is (its config, checks, claims and falsifiers) is the
library's :mod:`attnlab.verify`.
"""

from __future__ import annotations

import importlib
from typing import Any

from attnlab._deprecation import moved_names

__all__ = ["get_experiment", "list_experiments", "register", "run_experiment"]

# attnlab.experiments.<name> of the experiment framework, which moved to attnlab.verify: warn for one release
_MOVED = moved_names(
    __name__,
    {
        name: f"attnlab.verify.{name}"
        for name in (
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
            "count_checks",
            "make_config",
            "observation",
            "spread_observation",
            "spread_tolerance",
        )
    },
)


def __getattr__(name: str) -> Any:
    """The registry's names (loaded, with torch, on first use); the framework's old names warn and forward."""
    if name in __all__:
        value = getattr(importlib.import_module("attnlab.experiments.registry"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    return _MOVED(name)
