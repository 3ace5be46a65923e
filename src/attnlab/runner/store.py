"""Atomic, crash-safe writes of run outputs (temp file in the same folder, then ``os.replace``).

A crash or Ctrl-C while writing leaves either the old file or the new one, never a truncated file.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab._io import OutputError, _output_error, atomic_write, config_hash, json_default, make_dir

__all__ = [
    "atomic_write",
    "check_out",
    "config_hash",
    "prepare_out",
    "read_json_object",
    "staged_out",
    "write_json",
    "write_parquet",
    "write_csv",
    "save_figure",
    "versions",
]

# Files whose presence shows that a folder holds an attnlab run (so that --overwrite may empty it).
_RUN_FILES = ("record.json", "trajectory.parquet", "checks.csv", "explain.json", ".attnlab-run.json")
# Written by prepare_out before a run starts: which run the folder belongs to, read while it has no record yet (a run
# stopped before its end, whose checkpoints the same run resumes from).
_OWNER = ".attnlab-run.json"


def write_json(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` as indented JSON (keys sorted), atomically.

    Parameters
    ----------
    path : path
        The destination file; its folder is created when missing.
    payload : mapping
        JSON-serialisable values; arrays and tensors (anything with ``tolist``), paths and sets are converted.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputError
        If the file system refuses (the temp file is removed, an older file at ``path`` is left as it was).
    TypeError
        If a value cannot be written as JSON.
    """
    text = json.dumps(payload, indent=2, sort_keys=True, default=json_default)
    return atomic_write(path, lambda p: p.write_text(text + "\n"))


def write_parquet(path: str | os.PathLike[str], frame: pd.DataFrame) -> Path:
    """Write a DataFrame to Parquet (pyarrow), atomically, without its index.

    Parameters
    ----------
    path : path
        The destination file; its folder is created when missing.
    frame : pandas.DataFrame

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputError
        If the file system refuses (the temp file is removed, an older file at ``path`` is left as it was).
    """
    return atomic_write(path, lambda p: frame.to_parquet(p, index=False))


def write_csv(path: str | os.PathLike[str], frame: pd.DataFrame) -> Path:
    """Write a DataFrame to CSV, atomically, without its index.

    Parameters
    ----------
    path : path
        The destination file; its folder is created when missing.
    frame : pandas.DataFrame

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputError
        If the file system refuses (the temp file is removed, an older file at ``path`` is left as it was).
    """
    return atomic_write(path, lambda p: frame.to_csv(p, index=False))


def save_figure(
    figure: Any, path_stem: str | os.PathLike[str], formats: tuple[str, ...] = ("png", "pdf")
) -> list[Path]:
    """Save a matplotlib figure as ``<stem>.png`` and ``<stem>.pdf`` atomically (120 dpi).

    A figure with a layout engine (attnlab's are in constrained layout) is laid out once, at the files' resolution,
    by :func:`attnlab.plotting.render.lay_out` (without the extra draw that ``savefig`` lays a figure out in), and
    each format then draws it once. Other figures are cropped to a tight bounding box.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        Left without a layout engine when it had one (its axes keep the positions of the one layout).
    path_stem : path
        The files' path without suffix (a suffix it has is replaced); its folder is created when missing.
    formats : tuple of str, default=("png", "pdf")
        The formats, each a file suffix matplotlib can write.

    Returns
    -------
    list of pathlib.Path
        One file per format, in the order of ``formats``.

    Raises
    ------
    OutputError
        If the file system refuses (the temp file is removed, an older file at ``path`` is left as it was).
    """
    from attnlab.plotting.render import lay_out  # matplotlib is loaded where a figure is saved, not before

    stem = Path(path_stem)
    dpi = 120
    crop: dict[str, Any] = {} if lay_out(figure, dpi) else {"bbox_inches": "tight"}  # a laid-out figure fits itself
    return [
        atomic_write(stem.with_suffix("." + fmt), lambda p, fmt=fmt: figure.savefig(p, format=fmt, dpi=dpi, **crop))
        for fmt in formats
    ]


def check_out(
    folder: str | os.PathLike[str], owner: Mapping[str, Any], *, overwrite: bool = False, record: str = "record.json"
) -> str:
    """Refuse ``folder`` as :func:`prepare_out` would, touching nothing: to refuse before a long computation.

    Parameters
    ----------
    folder : path
        The output folder (``--out``); it need not exist.
    owner : mapping
        Keys of the record that identify the run (see :func:`prepare_out`).
    overwrite : bool, default=False
        Whether another run's folder may be emptied.
    record : str, default="record.json"
        The name of the run's record in ``folder``.

    Returns
    -------
    str
        ``"empty"`` (missing or empty), ``"same"`` (it holds this very run) or ``"other"`` (another run, which
        ``overwrite`` allows to empty).

    Raises
    ------
    OutputError
        If ``folder`` holds other files and ``overwrite`` is false, or ``overwrite`` is given for a folder that holds
        no attnlab run, or ``folder`` is a file.
    """
    folder = Path(folder)
    if not folder.exists():
        return "empty"
    try:
        entries = sorted(p.name for p in folder.iterdir())
    except OSError as err:
        raise _output_error(folder, err) from None
    if not entries:
        return "empty"
    held_record = read_json_object(folder / record)
    if held_record is None:
        held_record = read_json_object(folder / _OWNER)
    if isinstance(held_record, dict) and all(held_record.get(k) == v for k, v in owner.items()):
        return "same"
    held = ", ".join(entries[:3]) + (", ..." if len(entries) > 3 else "")
    if not overwrite and any(name in entries for name in _RUN_FILES):
        if isinstance(held_record, dict):
            what = f"another run ({held_record.get('experiment', '?')}, config {held_record.get('config_hash', '?')})"
        else:
            what = f"other files ({held})"
        raise OutputError(
            f"--out {str(folder)!r} already holds {what}; pass --overwrite to replace it, or choose an empty folder"
        )
    if not any(name in entries for name in _RUN_FILES):
        raise OutputError(
            f"--out {str(folder)!r} holds files that are not an attnlab run ({held}); attnlab writes a run only into "
            "an empty folder or a run's own (--overwrite empties a run's folder, never another one): choose an "
            "empty folder"
        )
    return "other"


def prepare_out(
    folder: str | os.PathLike[str], owner: Mapping[str, Any], *, overwrite: bool = False, record: str = "record.json"
) -> Path:
    """Make ``folder`` ready for the outputs of the run ``owner``, never mixing them with another run's files.

    Parameters
    ----------
    folder : path
        The output folder (``--out``); created when missing.
    owner : mapping
        Keys of ``record.json`` that identify the run, e.g. ``{"experiment": name, "config_hash": digest}``.
        A folder whose ``record.json`` has the same values holds this very run and is reused, all but its
        ``record.json``: that is removed, since it marks a finished run and is written last, so a rerun stopped
        before it writes its own reads as unfinished instead of the old record vouching for the new files. The
        folder gets a hidden ``.attnlab-run.json`` holding ``owner``, which says whose folder it is while it has
        no record: the same run, stopped before its end, is then let in again and resumes from its checkpoints.
    overwrite : bool, default=False
        Empty a folder that holds another attnlab run first (its files would otherwise sit beside the new ones).
    record : str, default="record.json"
        The name of the run's record in ``folder`` (``explain.json`` for ``attnlab explain``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    OutputError
        If ``folder`` holds other files and ``overwrite`` is false (the message says to pass ``--overwrite``),
        if ``overwrite`` is given for a folder that holds no attnlab run (it is never emptied), or if the folder
        cannot be made or the same run's ``record.json`` cannot be removed.
    """
    folder = make_dir(folder)
    held = check_out(folder, owner, overwrite=overwrite, record=record)
    if held == "same":
        # the same run again: its outputs are rewritten one by one, the same set of files, the record last
        _remove(folder / record)
    elif held == "other":
        for entry in folder.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    write_json(folder / _OWNER, owner)  # the folder is this run's from now on, finished or not
    return folder


@contextlib.contextmanager
def staged_out(
    folder: str | os.PathLike[str],
    owner: Mapping[str, Any],
    *,
    overwrite: bool | None,
    tag: str,
    record: str = "record.json",
) -> Iterator[Path]:
    """The folder a run writes its outputs into, inside a ``with`` block: ``folder`` made ready by
    :func:`prepare_out`, or, when ``overwrite`` replaces another run, a staging folder beside it that replaces the
    other run only when the block ends normally. A crash, a refusal or Ctrl-C on the way loses neither run: the other
    stays whole and what the new one wrote (checkpoints) stays staged for its next try.

    Parameters
    ----------
    folder : path
        The output folder (``--out``).
    owner : mapping
        Keys of the record that identify the run (see :func:`prepare_out`).
    overwrite : bool or None
        Whether another run's folder may be replaced; None: use ``folder`` as it is (a sweep's own run folder).
    tag : str
        Names the staging folder, ``.<folder name>.<tag>.partial``: the run's config hash, so that a run of the
        same config stopped before its end finds what it had written there.
    record : str, default="record.json"
        The name of the run's record.

    Yields
    ------
    pathlib.Path
        Where to write: ``folder``, or the staging folder.

    Raises
    ------
    OutputError
        As :func:`prepare_out`, or if the file system refuses the move.
    """
    folder = Path(folder)
    if overwrite is None or not overwrite or check_out(folder, owner, overwrite=True, record=record) != "other":
        yield (
            make_dir(folder)
            if overwrite is None
            else prepare_out(folder, owner, overwrite=bool(overwrite), record=record)
        )
        return
    staged = make_dir(folder.parent / f".{folder.name}.{tag}.partial")
    try:
        yield staged
    except BaseException:
        if not any(staged.iterdir()):
            staged.rmdir()  # nothing to keep for a next try
        raise
    prepare_out(folder, owner, overwrite=True, record=record)  # the other run goes only now that this one is complete
    try:
        for entry in staged.iterdir():
            entry.replace(folder / entry.name)  # one file system: renames
        staged.rmdir()
    except OSError as err:
        raise _output_error(folder, err) from None


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None (missing, unreadable or not an object): a record, a job, an outcome.

    Parameters
    ----------
    path : pathlib.Path
        The file.

    Returns
    -------
    dict or None
        The object, or None where there is none to read.
    """
    try:
        held = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return held if isinstance(held, dict) else None


def _remove(path: Path) -> None:
    """Delete the file ``path`` (gone already is fine); an OS refusal is the one-line :class:`OutputError`."""
    try:
        path.unlink(missing_ok=True)
    except OSError as err:
        raise _output_error(path, err) from None


def versions() -> dict[str, str]:
    """Versions of Python, the platform and the numerical stack, for the ``record.json`` of every run."""
    import cvxpy
    import numpy
    import scipy
    import torch

    import attnlab

    return {
        "attnlab": attnlab.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "pandas": pd.__version__,
        "cvxpy": cvxpy.__version__,
    }
