"""Data files on disk: one ``.npz`` (:meth:`~attnlab.data.TokenSelectionData.save`'s layout) or a folder of them.

Spec: implicit-bias-ngd §1 (the token-selection data a file holds).
"""

from __future__ import annotations

import os
from pathlib import Path

from attnlab._validation import ValidationError

__all__ = ["data_files", "is_data_path"]


def is_data_path(value: object) -> bool:
    """Whether ``value`` names data on disk (a path ending in ``.npz``, or an existing folder) rather than a
    generator name.

    Parameters
    ----------
    value : object
        A sweep's ``data`` entry.

    Returns
    -------
    bool
    """
    return isinstance(value, (str, os.PathLike)) and (str(value).endswith(".npz") or Path(value).is_dir())


def data_files(path: str | os.PathLike[str]) -> list[Path]:
    """The data files ``path`` names: itself for an ``.npz`` file, the ``.npz`` files inside a folder (by name).

    Parameters
    ----------
    path : str or os.PathLike
        An ``.npz`` file or a folder holding some.

    Returns
    -------
    list of pathlib.Path
        Sorted by name; a folder's paths are ``path / name``.

    Raises
    ------
    ValidationError
        When ``path`` does not exist, or is a folder without ``.npz`` files.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".npz" and p.is_file())
        if not files:
            raise ValidationError(f"data folder {str(path)!r} holds no .npz file; put data files (X, y, ...) in it")
        return files
    if not path.is_file():
        raise ValidationError(f"data file {str(path)!r} does not exist; check the path (relative to where you run)")
    return [path]
