"""Replay a recorded run: the experiment, config, seed and quick flag of its ``record.json``, run again.

``attnlab run --config runs/<name>-<hash>/record.json`` calls :func:`rerun` with the project's registry. An
experiment of your own that no registry knows is found by the module its ``record.json`` names (the module of its
``run`` function, imported from ``sys.path`` or the current directory), where it is a module-level
:class:`~attnlab.verify.Experiment` or is registered in a module-level :class:`~attnlab.verify.Registry`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from attnlab._overrides import parse_overrides
from attnlab._validation import ValidationError, check_bool
from attnlab.runner.provenance import git_state
from attnlab.runner.read import tuples_from_lists
from attnlab.runner.store import config_hash
from attnlab.verify.experiment import Experiment, RunRecord, make_config, run_experiment
from attnlab.verify.registry import Registry

__all__ = ["find_experiment", "load_record", "rerun"]

_KEYS = ("experiment", "config", "quick")


def load_record(path: str | Path) -> dict[str, Any]:
    """The ``record.json`` at ``path`` (the file, or the run directory holding it), checked for what a replay needs.

    Parameters
    ----------
    path : path
        A run's ``record.json``, or the run directory holding it.

    Returns
    -------
    dict
        The record, with at least ``experiment`` (a name), ``config`` (a mapping) and ``quick`` (a bool).

    Raises
    ------
    ValidationError
        When the file is missing, not JSON, or lacks what a replay needs; the message names the file.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "record.json"
    if not file.is_file():
        raise ValidationError(f"--config {path}: no such record; pass a run's record.json or its run directory")
    try:
        record = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:  # a binary file is not text at all
        raise ValidationError(f"--config {file}: not JSON ({err}); pass the record.json a run wrote") from None
    except OSError as err:
        raise ValidationError(f"--config {file}: cannot be read ({err.strerror or err})") from None
    missing = [key for key in _KEYS if key not in record] if isinstance(record, dict) else list(_KEYS)
    if missing:
        raise ValidationError(
            f"--config {file}: a run record needs keys {', '.join(_KEYS)}; missing {', '.join(missing)}"
        )
    if not isinstance(record["quick"], bool):  # "no" would read as true
        raise ValidationError(f"--config {file}: quick == {record['quick']!r}, must be true or false (JSON booleans)")
    if not isinstance(record["experiment"], str) or not isinstance(record["config"], dict):
        raise ValidationError(
            f"--config {file}: experiment must be a name and config a mapping, got {record['experiment']!r} and "
            f"{type(record['config']).__name__}; pass the record.json a run wrote"
        )
    if record.get("seed") is not None and record["seed"] != record["config"].get("seed"):  # a copy of config.seed
        raise ValidationError(
            f"--config {file}: its seed ({record['seed']!r}) is not its config's seed "
            f"({record['config'].get('seed')!r}); the replay runs the config: edit config.seed (or pass --set seed=...)"
        )
    return record


def rerun(
    path: str | Path,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    registry: Registry,
    out: str | Path | None = None,
    progress: bool = True,
    overwrite: bool = False,
) -> RunRecord:
    """Run the experiment of a ``record.json`` again with its config (seed included) and quick flag.

    Parameters
    ----------
    path : path
        A run's ``record.json``, or the run directory holding it.
    overrides : list of "key=value" or mapping, optional
        Changes on top of the recorded config.
    registry : Registry
        Where the recorded experiment is found by name (the project's: ``attnlab.experiments.registry.REGISTRY``).
    out : path, optional
        Run directory; default ``runs/<name>-<config hash>``, the recorded run's own when nothing is overridden.
    progress : bool, default=True
        Show progress bars on a terminal.
    overwrite : bool, default=False
        Empty an ``out`` that holds another run first; without it such a folder is refused, so that the replay's
        files never sit beside another run's (the recorded run's own folder is reused: it holds this run).

    Returns
    -------
    RunRecord
        The new run's directory, check table and wall time.

    Raises
    ------
    ValidationError
        When the record cannot be replayed (see :func:`load_record`, :func:`find_experiment`), an override is
        refused, or ``out`` holds another run and ``overwrite`` is false.

    Warns
    -----
    UserWarning
        When the recorded config no longer rebuilds to its recorded hash (the experiment's config fields changed
        since), or the code is at another git commit than the one recorded: the replay may then differ.
    """
    overwrite = check_bool("overwrite", overwrite)
    record = load_record(path)
    name = record["experiment"]
    experiment = find_experiment(record, registry)
    config = {key: tuples_from_lists(value) for key, value in record["config"].items()}
    rebuilt = dataclasses.asdict(make_config(experiment, config, record["quick"]))
    if "config_hash" in record and config_hash({"experiment": name, "config": rebuilt}) != record["config_hash"]:
        warnings.warn(
            f"the config recorded in {path} no longer rebuilds to its hash {record['config_hash']}: the fields of "
            f"{experiment.config_type.__name__} changed since the run; new fields take their defaults",
            stacklevel=2,
        )
    recorded = record.get("git", {}).get("commit")
    now = (git_state() or {}).get("commit")
    if recorded and now and recorded != now:
        warnings.warn(f"{path} was recorded at commit {recorded[:12]}; the code is now at {now[:12]}", stacklevel=2)
    config.update(parse_overrides(experiment.config_type, overrides))
    return run_experiment(experiment, config, quick=record["quick"], out=out, progress=progress, overwrite=overwrite)


def find_experiment(record: Mapping[str, Any], registry: Registry) -> Experiment[Any]:
    """The experiment a ``record.json`` ran: by name in ``registry``, else in the module the record names.

    Parameters
    ----------
    record : mapping
        A loaded record (:func:`load_record`).
    registry : Registry
        Searched first, by the recorded name.

    Returns
    -------
    Experiment

    Raises
    ------
    ValidationError
        When neither the registry nor the recorded module holds it; the message says why (a script run as
        ``__main__`` cannot be imported again) and what to do.
    """
    name = record["experiment"]
    try:
        return registry.get(name)
    except ValidationError as unknown:
        module_name = record.get("module")
        if not module_name:
            raise unknown from None
    if module_name == "__main__":
        raise ValidationError(
            f"{name!r} was defined in a script run as __main__, which cannot be imported again to replay it; move the "
            "Experiment into a module (e.g. my_experiments.py beside your script) and run it from there"
        )
    module = _import(module_name, name)
    found = [v for v in vars(module).values() if isinstance(v, Experiment) and v.name == name]
    found += [v.experiments[name] for v in vars(module).values() if isinstance(v, Registry) and name in v.experiments]
    if not found:
        raise ValidationError(
            f"module {module_name!r} holds no Experiment named {name!r} at module level (nor a Registry with it): "
            "define the Experiment as a module-level name so a replay can find it"
        )
    return found[0]


def _import(module_name: str, name: str) -> ModuleType:
    """``module_name`` imported from ``sys.path``, then from the current directory (``attnlab`` is a script)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError:
        if os.getcwd() in sys.path:
            raise ValidationError(
                f"{name!r} was run from module {module_name!r}, which is not importable here; run the replay from the "
                "folder that holds it, or put that folder on PYTHONPATH"
            ) from None
    sys.path.insert(0, os.getcwd())
    return _import(module_name, name)
