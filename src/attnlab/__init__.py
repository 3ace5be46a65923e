"""attnlab: models, data, max-margin programs, optimizers and reproductions of the theory of softmax attention.

Spec: docs/theory (one page per paper); every formula cites its section.

Sub-packages load on first use (``attnlab.svm`` pulls in cvxpy), so ``import attnlab`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_SUBMODULES = (
    "batched",
    "data",
    "experiments",
    "flow",
    "losses",
    "metrics",
    "models",
    "ntk",
    "optim",
    "regression",
    "runner",
    "svm",
)

__all__ = ["__version__", "train", *_SUBMODULES]


# Bind the function over the submodule of the same name (importing the submodule sets the attribute first).
from attnlab.train import train  # noqa: E402


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"attnlab.{name}")
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}")
