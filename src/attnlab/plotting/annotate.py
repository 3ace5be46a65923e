"""What experiment figures add to the house style: theory lines, the rounding floor, bands over runs, and the
strip that lists the defaults that are ours rather than the paper's.

Figures are drawn from tidy tables, never from live objects; :func:`attnlab.plotting.figure_problems` checks the
house rules.
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any

import numpy as np
import pandas as pd

from attnlab._validation import ValidationError
from attnlab.plotting.style import EPS

__all__ = [
    "THEORY_STYLE",
    "drop_ours",
    "has_ours",
    "label_ours",
    "plot_band",
    "rounding_floor",
    "theory_hline",
    "theory_line",
]

THEORY_STYLE: dict[str, Any] = {"color": "k", "ls": "--", "lw": 0.9}  # every theory line looks the same

FOOTNOTE_SIZE = 7  # points: the defaults-that-are-ours strip under a figure
FOOTNOTE_GID = "attnlab-ours"  # the gid of the strip, by which it is found again
NONFINITE_GID = "attnlab-nonfinite"  # the gid of plot_band's note on values it left out, found by figure_problems
_CHAR_WIDTH = 0.6  # DejaVu Sans: a character is at most ~0.6 em wide on average, so wrapped lines never overflow
_LINE_HEIGHT = 1.35  # line spacing of wrapped text, in em


def theory_line(ax: Any, x: Any, y: Any, label: str, **style: Any) -> Any:
    """Draw a theory prediction (black dashed unless ``style`` says otherwise), named ``label`` in the legend.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    x, y : array-like, shape (k,)
        The curve's points.
    label : str
        Its legend entry.
    **style
        Line properties for ``ax.plot``; they replace those of :data:`THEORY_STYLE`.

    Returns
    -------
    matplotlib.lines.Line2D
        The line drawn.
    """
    (line,) = ax.plot(x, y, label=label, **{**THEORY_STYLE, **style})
    return line


def theory_hline(ax: Any, y: float, label: str, **style: Any) -> Any:
    """A horizontal theory level (a limit, a bound, a tolerance), named ``label`` in the legend.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    y : float
        The level, in data units.
    label : str
        Its legend entry.
    **style
        Line properties for ``ax.axhline``; they replace those of :data:`THEORY_STYLE`.

    Returns
    -------
    matplotlib.lines.Line2D
        The line drawn.
    """
    return ax.axhline(y, label=label, **{**THEORY_STYLE, **style})


def rounding_floor(ax: Any, level: float = EPS) -> Any:
    """Mark ``level`` on a log gap axis: a gap ``1 - x`` (or ``L - L*``, ``level = EPS L*``) computed in float64
    cannot fall below it, so a curve that flattens there has reached rounding, not a limit.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel (a log y-axis, :func:`~attnlab.plotting.log_gap_axis`).
    level : float, default=EPS
        The floor, in data units: float64's machine epsilon for a gap to 1, ``EPS * L*`` for a gap to ``L*``.

    Returns
    -------
    matplotlib.lines.Line2D
        The grey dotted line, labelled "float64 resolution".
    """
    return ax.axhline(level, color="0.6", ls=":", lw=0.9, label="float64 resolution")


def label_ours(figure: Any, config: Any) -> None:
    """Write, under the figure, which defaults are ours (the paper's numbers were lost): the ``OURS`` fields.

    The text is wrapped to the figure's width and gets a strip of its own, added under the figure: the
    constrained layout is told to keep the axes above it, so it never overlaps an axis label. Labelling a figure
    again replaces its strip (the figure keeps one strip, of the latest ``config``).

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure; it grows by the strip's height (its panels keep theirs).
    config : dataclass instance
        The experiment's config; the fields its class lists in ``OURS`` are written with their values. Without
        ``OURS`` (or with it empty) nothing is written.

    Raises
    ------
    ValidationError
        When ``config`` is not a dataclass instance, or ``OURS`` names something that is not one of its fields.
    """
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        raise ValidationError(
            f"config must be a dataclass instance (an experiment's config), got {config!r} of type "
            f"{type(config).__name__}; pass the config the experiment ran with"
        )
    names = tuple(getattr(type(config), "OURS", ()))
    fields = {f.name for f in dataclasses.fields(config)}
    missing = [name for name in names if name not in fields]
    if missing:
        raise ValidationError(
            f"{type(config).__name__}.OURS names {missing}, which are not fields of config (fields: {sorted(fields)}); "
            "list only config fields in OURS"
        )
    if not names:
        return
    drop_ours(figure)  # a second label replaces the first strip instead of stacking a second one on it
    values = dataclasses.asdict(config)
    text = "defaults ours, not the paper's: " + ", ".join(f"{k}={values[k]}" for k in names)
    width_in, height_in = figure.get_size_inches()
    per_line = max(20, int(width_in * 72 / (FOOTNOTE_SIZE * _CHAR_WIDTH)))
    lines = textwrap.wrap(text, per_line, break_on_hyphens=False)
    strip_in = (len(lines) * _LINE_HEIGHT + 0.8) * FOOTNOTE_SIZE / 72
    figure.set_size_inches(width_in, height_in + strip_in)  # the strip is added, never taken from the panels
    strip = strip_in / (height_in + strip_in)  # fraction of the new height
    engine = figure.get_layout_engine()
    if engine is None or not hasattr(engine, "set") or "rect" not in engine.get():
        figure.set_layout_engine("constrained")
        engine = figure.get_layout_engine()
    engine.set(rect=(0.0, strip, 1.0, 1.0 - strip))
    note = figure.text(
        0.01,
        strip / 2,
        "\n".join(lines),
        fontsize=FOOTNOTE_SIZE,
        ha="left",
        va="center",
        linespacing=_LINE_HEIGHT,
        gid=FOOTNOTE_GID,
    )
    note.attnlab_height_in = height_in  # the figure's height without the strip, for drop_ours


def has_ours(figure: Any) -> bool:
    """Whether :func:`label_ours` wrote its footnote under ``figure``.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure.

    Returns
    -------
    bool
        True when the figure holds the footnote's text.
    """
    return any(text.get_gid() == FOOTNOTE_GID for text in figure.texts)


def drop_ours(figure: Any) -> bool:
    """Remove the :func:`label_ours` footnote and its strip, giving the figure back its height and layout.

    An experiment's run writes the footnote under its first figure only (its defaults are the same for every
    figure); the report states them once per experiment.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        The figure, changed in place.

    Returns
    -------
    bool
        Whether there was a footnote (False leaves the figure as it was).
    """
    notes = [text for text in figure.texts if text.get_gid() == FOOTNOTE_GID]
    if notes:  # the first strip's height is the figure's own (a figure labelled twice before the fix had two)
        width_in, _ = figure.get_size_inches()
        figure.set_size_inches(width_in, notes[0].attnlab_height_in)
        figure.get_layout_engine().set(rect=(0.0, 0.0, 1.0, 1.0))
    for note in notes:
        note.remove()
    return bool(notes)


def plot_band(
    ax: Any, frame: pd.DataFrame, x: str, y: str, *, label: str, color: Any = None, logy: bool = False
) -> None:
    """Median line with a min-max band of ``y`` over runs, grouped by ``x``.

    A row whose ``y`` is NaN or infinite (a run that diverged), or ``<= 0`` on a log axis, cannot be drawn: the
    median and the band are taken over the other rows at each ``x``, and the panel says so in a note in its corner,
    which :func:`~attnlab.plotting.figure_problems` reports, so such a run is never hidden (and a long run never
    fails at its figure).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    frame : pandas.DataFrame
        A tidy table with columns ``x`` and ``y``, one row per (run, ``x``).
    x, y : str
        The column names: ``x`` groups the rows (e.g. ``"step"``), ``y`` is the quantity drawn.
    label : str
        The legend entry of the median line.
    color : matplotlib color, optional
        Of the line and its band; default: the axes' next color.
    logy : bool, default=False
        Put the y-axis on a log scale.

    Raises
    ------
    ValidationError
        When ``frame`` is not a DataFrame, ``x`` or ``y`` is not one of its columns, ``y`` is not numeric, ``x`` has
        missing values.
    """
    finite = _band_rows(frame, x, y, logy)
    stats = frame.loc[finite].groupby(x)[y].agg(["median", "min", "max"]).reset_index()
    (line,) = ax.plot(stats[x], stats["median"], label=label, color=color)
    ax.fill_between(stats[x], stats["min"], stats["max"], alpha=0.2, color=line.get_color())
    left_out = int((~finite).sum())
    if left_out:
        steps = frame.loc[~finite, x]
        ax.text(
            0.02,
            0.02,
            f"{label}: {left_out} of {len(frame)} values of {y} not finite{' or <= 0 (log axis)' if logy else ''} "
            f"(first at {x} = {steps.min()}), left out of the band",
            transform=ax.transAxes,
            fontsize=FOOTNOTE_SIZE,
            color="C3",
            ha="left",
            va="bottom",
            gid=NONFINITE_GID,
        )
    if logy:
        ax.set_yscale("log")


def _band_rows(frame: Any, x: str, y: str, logy: bool) -> Any:
    """Check :func:`plot_band`'s table; return the mask of its rows it can draw (``y`` finite, and > 0 on a log
    axis)."""
    if not isinstance(frame, pd.DataFrame):
        raise ValidationError(
            f"frame must be a pandas DataFrame with columns {x!r} and {y!r}, got {type(frame).__name__}; "
            "pass a tidy table, e.g. pd.DataFrame(rows)"
        )
    for name, column in (("x", x), ("y", y)):
        if column not in frame.columns:
            raise ValidationError(
                f"{name} == {column!r} is not a column of frame, whose columns are {list(frame.columns)}; "
                f"pass one of them as {name}"
            )
    if not pd.api.types.is_numeric_dtype(frame[y]) or pd.api.types.is_bool_dtype(frame[y]):
        raise ValidationError(f"y == {y!r} is a column of {frame[y].dtype} values, not numbers; pass a numeric column")
    if frame[x].isna().any():
        raise ValidationError(
            f"x == {x!r} has {int(frame[x].isna().sum())} missing values; a row without its {x} has no place on the "
            "axis: drop or fill those rows first"
        )
    values = frame[y].to_numpy(dtype=float, na_value=np.nan)
    finite = np.isfinite(values)
    shown = finite & (values > 0) if logy else finite  # a log axis cannot show a value <= 0
    return pd.Series(shown, index=frame.index)
