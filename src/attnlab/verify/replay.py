"""Replay a recorded run: the experiment, config, seed and quick flag of its ``record.json``, run again.

``attnlab run --config runs/<name>-<hash>/record.json`` calls :func:`rerun` with the project's registry.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnlab._overrides import parse_overrides
from attnlab._validation import ValidationError
from attnlab.runner.provenance import git_state
from attnlab.runner.read import tuples_from_lists
from attnlab.runner.store import config_hash
from attnlab.verify.experiment import RunRecord, make_config
from attnlab.verify.registry import Registry

__all__ = ["load_record", "rerun"]

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
    except json.JSONDecodeError as err:
        raise ValidationError(f"--config {file}: not JSON ({err}); pass the record.json a run wrote") from None
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
    return record


def rerun(
    path: str | Path,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    registry: Registry,
    out: str | Path | None = None,
    progress: bool = True,
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

    Returns
    -------
    RunRecord
        The new run's directory, check table and wall time.

    Warns
    -----
    UserWarning
        When the recorded config no longer rebuilds to its recorded hash (the experiment's config fields changed
        since), or the code is at another git commit than the one recorded: the replay may then differ.
    """
    record = load_record(path)
    name = record["experiment"]
    experiment = registry.get(name)
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
    return registry.run(name, config, quick=record["quick"], out=out, progress=progress)
