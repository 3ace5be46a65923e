"""A sweep read back as one tidy table: every finished run's rows, with the run's parameters as columns.

``attnlab sweep`` leaves one directory per run under ``<out>/runs/`` and the parameters of each run, as JSON
text, in ``<out>/index.parquet``. :func:`read_sweep` joins them, so a sweep over ``lr`` and ``seed`` reads back
as a frame that ``groupby(["lr", "step"])`` can summarise directly.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab._validation import ValidationError
from attnlab.runner.manifest import MANIFEST, damage, read_manifest
from attnlab.runner.results import read_index
from attnlab.runner.task import FINISHED

__all__ = ["IncompleteSweepWarning", "flatten_params", "read_sweep", "tuples_from_lists"]


class IncompleteSweepWarning(UserWarning):
    """:func:`read_sweep` left runs out: damaged, failed, pending or running ones (the message lists them)."""


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested parameters as flat columns: ``{"data_args": {"rho": 1}}`` becomes ``{"data_args.rho": 1}``.

    Lists become tuples (nested ones too), so the columns can be grouped on.

    Parameters
    ----------
    params : mapping of str to Any
        A run's parameters, as read from ``job.json``; nested mappings are flattened at any depth.
    prefix : str, default=""
        Prepended to every column name (the recursion passes ``"<parent>."``).

    Returns
    -------
    dict of str to Any
        One entry per leaf value, named by its dotted path, in the order of ``params``.

    Examples
    --------
    >>> flatten_params({"lr": 0.1, "data_args": {"rho": 1.0}, "radii": [1, 2]})
    {'lr': 0.1, 'data_args.rho': 1.0, 'radii': (1, 2)}
    """
    flat: dict[str, Any] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, prefix=f"{name}."))
        else:
            flat[name] = tuples_from_lists(value)
    return flat


def tuples_from_lists(value: Any) -> Any:
    """A value read from JSON with its lists (nested ones too) made tuples, as frozen configs and groupby need.

    Examples
    --------
    >>> tuples_from_lists([1, [2, 3]])
    (1, (2, 3))
    """
    return tuple(tuples_from_lists(v) for v in value) if isinstance(value, list) else value


def read_sweep(root: str | os.PathLike[str], table: str = "trajectory") -> pd.DataFrame:
    """Every finished run's ``table`` in the sweep at ``root``, stacked, with the run's parameters as columns.

    Parameters
    ----------
    root : path
        A sweep's output folder (``attnlab sweep --out``, or the ``root`` of :func:`attnlab.runner.run_sweep`).
    table : str, default="trajectory"
        Which table of each run to read: ``<run_dir>/<table>.parquet``.

    Returns
    -------
    pandas.DataFrame
        Columns ``run_key`` (the run's config hash, which names its directory), then one column per parameter
        (nested mappings flattened as ``data_args.rho``), then the table's own columns. A parameter that the
        table also holds as a column (a ``seed`` the task wrote, say) appears once when the two agree in every
        run, and otherwise as ``params.<name>`` beside the table's column. A parameter that only some runs set
        is missing (NaN or None) in the others. Finished runs are read, diverged ones
        included. Runs left out (damaged, failed, pending or running) are never dropped in silence: an
        :class:`IncompleteSweepWarning` lists them, and the frame's ``attrs["left_out"]`` holds their rows of
        the index (:func:`attnlab.runner.read_index`) as a list of dicts, with the status and what went wrong.
        Each finished run's files are checked against its manifest (SHA-256) before they are read.

    Raises
    ------
    ValidationError
        If ``root`` is not a path (a str or pathlib.Path) of a sweep folder, no run has finished, or a finished run
        lacks ``table`` (the message lists the tables it has).
    """
    if not isinstance(root, (str, os.PathLike)):
        raise ValidationError(
            f"root == {root!r} (of type {type(root).__name__}) is not a path; pass a sweep's output folder (attnlab "
            "sweep --out) as a str or pathlib.Path"
        )
    root = Path(root)
    index = read_index(root)
    for i in index.index[index["status"].isin(FINISHED)]:  # the index compared sizes; the digests decide here
        run_dir = root / index.at[i, "run_dir"]
        broken = damage(run_dir, read_manifest(run_dir) or {"files": {MANIFEST: {}}})
        if broken is not None:
            index.loc[i, ["status", "error"]] = ["damaged", broken]
    done = index[index["status"].isin(FINISHED)]  # a diverged run is finished: its rows end at its last finite step
    left_out = index[~index["status"].isin(FINISHED)].reset_index(drop=True)
    if done.empty:
        raise ValidationError(
            f"no run of the sweep in {str(root)!r} has finished ({len(index)} runs, none done: "
            f"{_tally(left_out)}); run `attnlab sweep` to finish them"
        )
    if len(left_out):
        listed = "; ".join(
            f"{row.run_dir} ({row.status}{': ' + row.error.strip().splitlines()[-1] if row.error.strip() else ''})"
            for row in left_out.itertuples()
        )
        warnings.warn(
            f"read_sweep read {len(done)} of {len(index)} runs of {str(root)!r}, leaving out {_tally(left_out)}: "
            f"{listed}; rerun the sweep to compute them (frame.attrs['left_out'] lists them)",
            IncompleteSweepWarning,
            stacklevel=2,
        )
    runs = []
    for key, run_dir, params_json in zip(done["key"], done["run_dir"], done["params"]):
        path = root / run_dir / f"{table}.parquet"
        if not path.is_file():
            tables = sorted(p.stem for p in (root / run_dir).glob("*.parquet"))
            raise ValidationError(f"run {run_dir} has no table {table!r}; its tables are {tables}; pass one of them")
        runs.append((key, flatten_params(json.loads(params_json)), pd.read_parquet(path).reset_index(drop=True)))
    # a parameter the task also wrote as a column: one column where they agree in every run, else params.<name>
    clashes = {
        name for _, params, rows in runs for name in params if name in rows and not _agrees(rows[name], params[name])
    }
    frames = []
    for key, params, rows in runs:
        head = pd.DataFrame({"run_key": [key] * len(rows)})
        for name, value in params.items():
            if name in clashes:
                head["params." + name] = [value] * len(rows)
            elif name not in rows:
                head[name] = [value] * len(rows)  # a list, so a tuple value stays whole
        frames.append(pd.concat([head, rows], axis=1))
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs["left_out"] = left_out.to_dict("records")
    return frame


def _tally(rows: pd.DataFrame) -> str:
    """``"1 damaged, 2 pending"``: the statuses of ``rows`` with their counts."""
    return ", ".join(f"{n} {status}" for status, n in rows["status"].value_counts().sort_index().items()) or "none"


def _agrees(column: pd.Series, value: Any) -> bool:
    """Every entry of ``column`` equals ``value``."""
    return bool((column == value).all()) if not isinstance(value, tuple) else all(v == value for v in column)
