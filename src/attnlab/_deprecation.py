"""Old names that keep working for one release: a module ``__getattr__`` (PEP 562) that warns and forwards.

A module whose names moved or were renamed forwards them::

    __getattr__ = moved_names(__name__, {"OldName": "package.module.NewName"})

and ``from <that module> import OldName`` then returns ``NewName`` with a ``DeprecationWarning`` that names the new
path (the regression and SVM packages forward their renamed names this way).
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved_names"]


def moved_names(old: str, targets: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the module ``old`` whose names moved.

    Parameters
    ----------
    old : str
        The old module's dotted name (its ``__name__``).
    targets : mapping of str to str
        Old name -> the dotted path of the object now (``"attnlab.nets.classifier.fit_classifier"``).

    Returns
    -------
    callable
        ``__getattr__(name)``: warns ``DeprecationWarning`` naming the new path and returns the object; raises
        ``AttributeError`` for names not in ``targets``.
    """

    def forward(name: str) -> Any:
        target = targets.get(name)
        if target is None:
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        module, _, attribute = target.rpartition(".")
        warnings.warn(
            f"{old}.{name} moved to {target}; import it from {module} (the old path goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), attribute)

    return forward
