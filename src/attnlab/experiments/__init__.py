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

__all__ = ["get_experiment", "list_experiments", "register", "run_experiment"]


def __getattr__(name: str) -> Any:
    """The registry's names, loaded (with torch) on first use."""
    if name in __all__:
        value = getattr(importlib.import_module("attnlab.experiments.registry"), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'attnlab.experiments' has no attribute {name!r}")
