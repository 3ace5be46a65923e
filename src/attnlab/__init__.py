"""attnlab: models, data, max-margin programs, optimizers and reproductions of the theory of softmax attention.

Spec: docs/theory (one page per paper); every formula cites its section.

Everything but the version and :class:`ValidationError` loads on first use (``attnlab.svm`` pulls in cvxpy,
:func:`attnlab.train` torch), so ``import attnlab`` and ``attnlab --help`` stay fast. The function
:func:`attnlab.train` is defined in the module :mod:`attnlab.training`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"  # the one place the version is written; pyproject.toml reads it (tool.setuptools.dynamic)

_SUBMODULES = (
    "batched",
    "callbacks",
    "data",
    "engine",
    "experiments",
    "explain",
    "flow",
    "losses",
    "metrics",
    "models",
    "nets",
    "ntk",
    "optim",
    "plotting",
    "probe",
    "regression",
    "report",
    "runner",
    "svm",
    "trackers",
    "training",
    "verify",
)

# Public names that live in a submodule: name -> module that defines it.
_ATTRIBUTES = {"train": "attnlab.training", "ValidationError": "attnlab._errors"}

__all__ = ["ValidationError", "__version__", "train", *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _ATTRIBUTES:
        value = getattr(importlib.import_module(_ATTRIBUTES[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"attnlab.{name}")
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, the lazily loaded subpackages among them (the module's own globals hide those)."""
    return sorted(__all__)
