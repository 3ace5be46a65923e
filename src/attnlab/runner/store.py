"""Atomic, crash-safe writes of run outputs (temp file in the same folder, then ``os.replace``).

A crash or Ctrl-C while writing leaves either the old file or the new one, never a truncated file.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab._io import atomic_write

__all__ = ["atomic_write", "config_hash", "write_json", "write_parquet", "write_csv", "save_figure", "versions"]


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"cannot write {type(obj).__name__} to JSON")


def write_json(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> Path:
    """Write ``payload`` as indented JSON, atomically."""
    text = json.dumps(payload, indent=2, sort_keys=True, default=_json_default)
    return atomic_write(path, lambda p: p.write_text(text + "\n"))


def write_parquet(path: str | os.PathLike[str], frame: pd.DataFrame) -> Path:
    """Write a DataFrame to Parquet (pyarrow), atomically."""
    return atomic_write(path, lambda p: frame.to_parquet(p, index=False))


def write_csv(path: str | os.PathLike[str], frame: pd.DataFrame) -> Path:
    """Write a DataFrame to CSV, atomically."""
    return atomic_write(path, lambda p: frame.to_csv(p, index=False))


def save_figure(figure: Any, path_stem: str | os.PathLike[str], formats: tuple[str, ...] = ("png", "pdf")) -> list[Path]:
    """Save a matplotlib figure as ``<stem>.png`` and ``<stem>.pdf`` atomically; returns the paths."""
    stem = Path(path_stem)
    out = []
    for fmt in formats:
        target = stem.with_suffix("." + fmt)
        out.append(atomic_write(target, lambda p, fmt=fmt: figure.savefig(p, format=fmt, dpi=120, bbox_inches="tight")))
    return out


def config_hash(payload: Mapping[str, Any], length: int = 12) -> str:
    """A short, stable hash of a JSON-serialisable config (keys sorted), used to name run directories."""
    text = json.dumps(payload, sort_keys=True, default=_json_default)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


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
