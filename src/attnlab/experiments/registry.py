"""The registry of the project's named experiments: each module registers its :class:`~attnlab.verify.Experiment`.

:mod:`attnlab.experiments.catalog` names every experiment once, with its paper, summary and module;
:func:`register` takes the paper and the summary from there, :func:`get_experiment` imports only the module the
catalog names, and :func:`run_experiment` runs an experiment by name through :func:`attnlab.verify.run_experiment`.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnlab._validation import ValidationError
from attnlab.experiments.catalog import EXPERIMENTS, find_entry
from attnlab.verify import experiment as _verify
from attnlab.verify.experiment import Experiment, RunRecord

__all__ = ["get_experiment", "list_experiments", "register", "run_experiment"]

_REGISTRY: dict[str, Experiment[Any]] = {}


def register(experiment: Experiment[Any]) -> Experiment[Any]:
    """Add ``experiment`` to the registry, with the paper and summary the catalog gives it.

    Parameters
    ----------
    experiment : Experiment
        An experiment whose name the catalog lists (or one of your own that gives ``paper=`` and ``summary=``).

    Returns
    -------
    Experiment
        ``experiment`` with its catalog text filled in; the registry holds this one.

    Raises
    ------
    ValidationError
        When the name is registered twice, is not in the catalog and comes without paper and summary, or gives a
        paper or summary that differs from the catalog's.
    """
    if experiment.name in _REGISTRY:
        raise ValidationError(f"experiment {experiment.name!r} is registered twice")
    entry = find_entry(experiment.name)
    if entry is None:
        if not (experiment.paper and experiment.summary):
            raise ValidationError(
                f"experiment {experiment.name!r} is not in attnlab/experiments/catalog.py; add an Entry there, or "
                "pass paper= and summary= for an experiment of your own"
            )
    else:
        for key in ("paper", "summary"):
            given, listed = getattr(experiment, key), getattr(entry, key)
            if given and given != listed:
                raise ValidationError(
                    f"experiment {experiment.name!r}: {key}={given!r} differs from the catalog's {listed!r}; leave "
                    "it out (the catalog, attnlab/experiments/catalog.py, is where it is written)"
                )
        experiment = dataclasses.replace(experiment, paper=entry.paper, summary=entry.summary)
    _REGISTRY[experiment.name] = experiment
    return experiment


def list_experiments(paper: str | None = None) -> list[Experiment[Any]]:
    """All registered experiments, sorted by name.

    Parameters
    ----------
    paper : str, optional
        Keep those of this paper (theory page stem) or name prefix; ``None`` or ``"all"`` keeps every one.

    Returns
    -------
    list of Experiment
    """
    _load_all()
    found = sorted(_REGISTRY.values(), key=lambda e: e.name)
    if paper is not None and paper != "all":
        found = [e for e in found if e.paper == paper or e.name.split(".")[0] == paper]
    return found


def get_experiment(name: str) -> Experiment[Any]:
    """The experiment called ``name``, importing only the module the catalog names.

    Parameters
    ----------
    name : str
        An experiment name (``attnlab list``).

    Returns
    -------
    Experiment

    Raises
    ------
    ValidationError
        When no experiment has that name; the message lists the known ones.
    """
    entry = find_entry(name)
    if entry is not None:
        importlib.import_module(f"attnlab.experiments.{entry.module}")
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted({e.name for e in EXPERIMENTS} | set(_REGISTRY)))
        raise ValidationError(f"unknown experiment {name!r}; known experiments: {known}") from None


def _load_all() -> None:
    """Import every module of the catalog, which registers every experiment."""
    for module in sorted({entry.module for entry in EXPERIMENTS}):
        importlib.import_module(f"attnlab.experiments.{module}")


def run_experiment(
    name: str,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    quick: bool = False,
    out: str | Path | None = None,
    progress: bool = True,
    overwrite: bool | None = None,
) -> RunRecord:
    """Run the named experiment and write its outputs (:func:`attnlab.verify.run_experiment`).

    Parameters
    ----------
    name : str
        A registered experiment (``attnlab list``).
    overrides, quick, out, progress, overwrite
        As for :func:`attnlab.verify.run_experiment`.

    Returns
    -------
    RunRecord
        The run directory, the check table and the run's wall time.
    """
    return _verify.run_experiment(
        get_experiment(name), overrides, quick=quick, out=out, progress=progress, overwrite=overwrite
    )
