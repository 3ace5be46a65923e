"""Deprecated: the framework moved to :mod:`attnlab.verify`, the registry to :mod:`attnlab.experiments.registry`."""

from attnlab import verify
from attnlab._deprecation import moved_names

_REGISTRY_NAMES = ("get_experiment", "list_experiments", "register", "run_experiment")

__getattr__ = moved_names(
    __name__,
    {
        **{name: f"attnlab.verify.{name}" for name in verify.__all__ if name not in _REGISTRY_NAMES},
        **{name: f"attnlab.experiments.registry.{name}" for name in _REGISTRY_NAMES},
    },
)
