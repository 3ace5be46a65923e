"""attnlab: models, data, max-margin programs, optimizers and reproductions of the theory of softmax attention.

Spec: docs/theory (one page per paper); every formula cites its section.

Everything but the version and :class:`ValidationError` loads on first use (``attnlab.svm`` pulls in cvxpy,
:func:`attnlab.train` torch), so ``import attnlab`` and ``attnlab --help`` stay fast.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"  # the one place the version is written; pyproject.toml reads it (tool.setuptools.dynamic)

_SUBMODULES = (
    "batched",
    "callbacks",
    "data",
    "engine",
    "experiments",
    "flow",
    "losses",
    "metrics",
    "models",
    "ntk",
    "optim",
    "probe",
    "regression",
    "report",
    "runner",
    "svm",
    "trackers",
)

# Public names that live in a submodule: name -> module that defines it.
_ATTRIBUTES = {"train": "attnlab.train", "ValidationError": "attnlab._errors"}

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


class _Package(types.ModuleType):
    """The ``attnlab`` module, whose ``train`` stays the function when the submodule ``attnlab.train`` loads.

    Importing a submodule binds it on its package (``setattr(attnlab, "train", <module attnlab.train>)``);
    ``attnlab.train`` is the function :func:`attnlab.train.train`, as it was when it was imported eagerly.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "train" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
