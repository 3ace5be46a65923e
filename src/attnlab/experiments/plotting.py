"""Small shared helpers for experiment figures (drawn from tidy tables, never from live objects)."""

from __future__ import annotations

import dataclasses
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: figures are files
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

__all__ = ["label_ours", "new_figure", "plot_band"]


def new_figure(ncols: int, nrows: int = 1, *, width: float = 3.6, height: float = 3.0) -> tuple[Any, Any]:
    """A figure with ``nrows x ncols`` axes (always a 2-D array flattened to 1-D)."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    return fig, axes.ravel()


def label_ours(figure: Any, config: Any) -> None:
    """Write, under the figure, which defaults are ours (the paper's numbers were lost): the ``OURS`` fields."""
    names = tuple(getattr(type(config), "OURS", ()))
    if not names:
        return
    values = dataclasses.asdict(config)
    text = "defaults ours, not the paper's: " + ", ".join(f"{k}={values[k]}" for k in names if k in values)
    figure.text(0.01, -0.02, text, fontsize=7, ha="left", va="top", wrap=True)


def plot_band(ax: Any, frame: pd.DataFrame, x: str, y: str, *, label: str, color: Any = None, logy: bool = False) -> None:
    """Median line with a min-max band of ``y`` over runs, grouped by ``x``."""
    stats = frame.groupby(x)[y].agg(["median", "min", "max"]).reset_index()
    (line,) = ax.plot(stats[x], stats["median"], label=label, color=color)
    ax.fill_between(stats[x], stats["min"], stats["max"], alpha=0.2, color=line.get_color())
    if logy:
        ax.set_yscale("log")
