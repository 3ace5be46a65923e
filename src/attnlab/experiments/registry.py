"""The registry of the project's named experiments (:class:`attnlab.verify.Registry` over the catalog).

:mod:`attnlab.experiments.catalog` names every experiment once, with its paper, summary and module;
:func:`register` takes the paper and the summary from there, :func:`get_experiment` imports only the module the
catalog names, and :func:`run_experiment` runs an experiment by name.
"""

from __future__ import annotations

from attnlab.experiments.catalog import EXPERIMENTS, PAPER_IDS
from attnlab.verify.registry import Registry

__all__ = ["REGISTRY", "get_experiment", "list_experiments", "register", "run_experiment"]

REGISTRY = Registry(EXPERIMENTS, package="attnlab.experiments", papers=PAPER_IDS)
register = REGISTRY.register
get_experiment = REGISTRY.get
list_experiments = REGISTRY.list
run_experiment = REGISTRY.run
