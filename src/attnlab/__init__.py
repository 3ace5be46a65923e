"""attnlab: models, data, max-margin programs, optimizers and reproductions of the theory of softmax attention.

Spec: docs/theory (one page per paper); every formula cites its section.

Everything but the version and :class:`ValidationError` loads on first use (``attnlab.svm`` pulls in cvxpy,
:func:`attnlab.train` torch), so ``import attnlab`` and ``attnlab --help`` stay fast. The function
:func:`attnlab.train` is defined in the package :mod:`attnlab.training`, which holds the whole training wing; its
front doors keep their short names: ``attnlab.batched``, ``attnlab.flow`` and ``attnlab.callbacks`` are the
modules :mod:`attnlab.training.batched`, :mod:`attnlab.training.flow` and :mod:`attnlab.training.callbacks`
themselves (``import attnlab.flow`` gives that very module object).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

__version__ = "0.1.0"  # the one place the version is written; pyproject.toml reads it (tool.setuptools.dynamic)

# the source files' stats as this process imports attnlab, before any submodule: the runs' fingerprint checks that
# the code on disk is still the code in memory (attnlab._sources, attnlab.runner.fingerprint)
importlib.import_module("attnlab._sources")

_SUBMODULES = (
    "data",
    "experiments",
    "explain",
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
    "tasks",
    "trackers",
    "training",
    "verify",
)

# The front doors' short names: each is the module of the training package, not a copy.
_SHORT = {
    "attnlab.batched": "attnlab.training.batched",
    "attnlab.callbacks": "attnlab.training.callbacks",
    "attnlab.flow": "attnlab.training.flow",
}

# Public names that live in a submodule: name -> module that defines it.
_ATTRIBUTES = {"train": "attnlab.training", "ValidationError": "attnlab._errors"}

__all__ = ["ValidationError", "__version__", "train", *_SUBMODULES]


class _ShortNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``attnlab.batched`` (and the other short names) as the module it names, loaded on first use."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(fullname, self) if fullname in _SHORT else None

    def create_module(self, spec: Any) -> Any:
        module = importlib.import_module(_SHORT[spec.name])  # the module itself, loaded under its own name
        spec.loader_state = module.__spec__  # the import system now sets the short name's spec on it ...
        return module

    def exec_module(self, module: Any) -> None:
        """Nothing to run: give the module back its own spec (... which this undoes)."""
        module.__spec__ = module.__spec__.loader_state


sys.meta_path.append(_ShortNames())


def __getattr__(name: str) -> Any:
    if name in _ATTRIBUTES:
        value = getattr(importlib.import_module(_ATTRIBUTES[name]), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    if name in _SUBMODULES or f"attnlab.{name}" in _SHORT:
        return importlib.import_module(f"attnlab.{name}")
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, the lazily loaded subpackages and the short names among them (globals hide those)."""
    return sorted({*__all__, *(k.rpartition(".")[2] for k in _SHORT)})
