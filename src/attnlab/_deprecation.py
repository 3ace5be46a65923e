"""Old import paths that keep working for one release: a module ``__getattr__`` (PEP 562) that warns and forwards.

A module that moved leaves a stub at its old path::

    __getattr__ = moved_module(__name__, "attnlab.nets.vit")

and ``from attnlab.experiments.real.vit import ViT`` then returns :class:`attnlab.nets.ViT` with a
``DeprecationWarning`` that names the new path.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["moved_module", "moved_names"]


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


def moved_module(old: str, new: str, renames: Mapping[str, str] | None = None) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the module ``old``, which moved to ``new``: every name of ``new.__all__``.

    ``renames`` maps an old name to its new name in ``new`` (``{"fit": "fit_classifier"}``).
    """
    targets = {name: f"{new}.{name}" for name in importlib.import_module(new).__all__}
    targets.update({name: f"{new}.{now}" for name, now in (renames or {}).items()})
    return moved_names(old, targets)
