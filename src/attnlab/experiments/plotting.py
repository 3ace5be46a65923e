"""The house style of every experiment figure, and the helpers that keep figures to it.

Figures are drawn from tidy tables, never from live objects. The rules, which :func:`figure_problems` checks:

- every axis with ticks has a label, and symbols are mathtext (``r"$\\|W_t\\|_F$"``), never ASCII such as
  ``||W_t||`` or ``phi_opt``;
- a quantity that decays to 0 is plotted as a gap on a log axis (``1 - corr``, ``L - L*``; :func:`log_gap_axis`);
- theory lines (:func:`theory_line`, :func:`theory_hline`) are black, dashed and named in the legend;
- nothing overlaps: figures use constrained layout, and :func:`label_ours` reserves its own strip at the bottom.

A figure function is decorated with :func:`house_figure`, which draws it under :data:`HOUSE_STYLE` (font sizes,
grid, spines) and thins crowded log-axis labels; that house style lives in :mod:`attnlab.plotting`, below the
experiments, and is re-exported here.
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from typing import Any

import numpy as np
import pandas as pd

from attnlab.plotting import (
    CORR_GAP,
    EPS,
    HOUSE_STYLE,
    STEP,
    house_figure,
    house_style,
    label_axes,
    log_gap_axis,
    new_figure,
    panel_grid,
)

__all__ = [
    "CORR_GAP",
    "EPS",
    "HOUSE_STYLE",
    "STEP",
    "figure_problems",
    "house_figure",
    "house_style",
    "label_axes",
    "drop_ours",
    "has_ours",
    "label_ours",
    "log_gap_axis",
    "new_figure",
    "panel_grid",
    "plot_band",
    "rounding_floor",
    "theory_hline",
    "theory_line",
]

THEORY_STYLE: dict[str, Any] = {"color": "k", "ls": "--", "lw": 0.9}  # every theory line looks the same

FOOTNOTE_SIZE = 7  # points: the defaults-that-are-ours strip under a figure
_FOOTNOTE_GID = "attnlab-ours"
_CHAR_WIDTH = 0.6  # DejaVu Sans: a character is at most ~0.6 em wide on average, so wrapped lines never overflow
_LINE_HEIGHT = 1.35  # line spacing of wrapped text, in em


def theory_line(ax: Any, x: Any, y: Any, label: str, **style: Any) -> Any:
    """Draw a theory prediction (black dashed unless ``style`` says otherwise), named ``label`` in the legend."""
    (line,) = ax.plot(x, y, label=label, **{**THEORY_STYLE, **style})
    return line


def theory_hline(ax: Any, y: float, label: str, **style: Any) -> Any:
    """A horizontal theory level (a limit, a bound, a tolerance), named ``label`` in the legend."""
    return ax.axhline(y, label=label, **{**THEORY_STYLE, **style})


def rounding_floor(ax: Any, level: float = EPS) -> Any:
    """Mark ``level`` on a log gap axis: a gap ``1 - x`` (or ``L - L*``, ``level = EPS L*``) computed in float64
    cannot fall below it, so a curve that flattens there has reached rounding, not a limit."""
    return ax.axhline(level, color="0.6", ls=":", lw=0.9, label="float64 resolution")


def label_ours(figure: Any, config: Any) -> None:
    """Write, under the figure, which defaults are ours (the paper's numbers were lost): the ``OURS`` fields.

    The text is wrapped to the figure's width and gets a strip of its own, added under the figure: the
    constrained layout is told to keep the axes above it, so it never overlaps an axis label.
    """
    names = tuple(getattr(type(config), "OURS", ()))
    if not names:
        return
    values = dataclasses.asdict(config)
    text = "defaults ours, not the paper's: " + ", ".join(f"{k}={values[k]}" for k in names if k in values)
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
        gid=_FOOTNOTE_GID,
    )
    note.attnlab_height_in = height_in  # the figure's height without the strip, for drop_ours


def has_ours(figure: Any) -> bool:
    """Whether :func:`label_ours` wrote its footnote under ``figure``."""
    return any(text.get_gid() == _FOOTNOTE_GID for text in figure.texts)


def drop_ours(figure: Any) -> bool:
    """Remove the :func:`label_ours` footnote and its strip, giving the figure back its height and layout.

    An experiment's run writes the footnote under its first figure only (its defaults are the same for every
    figure); the report states them once per experiment. Returns whether there was a footnote.
    """
    notes = [text for text in figure.texts if text.get_gid() == _FOOTNOTE_GID]
    for note in notes:
        width_in, _ = figure.get_size_inches()
        figure.set_size_inches(width_in, note.attnlab_height_in)
        figure.get_layout_engine().set(rect=(0.0, 0.0, 1.0, 1.0))
        note.remove()
    return bool(notes)


def plot_band(
    ax: Any, frame: pd.DataFrame, x: str, y: str, *, label: str, color: Any = None, logy: bool = False
) -> None:
    """Median line with a min-max band of ``y`` over runs, grouped by ``x``."""
    stats = frame.groupby(x)[y].agg(["median", "min", "max"]).reset_index()
    (line,) = ax.plot(stats[x], stats["median"], label=label, color=color)
    ax.fill_between(stats[x], stats["min"], stats["max"], alpha=0.2, color=line.get_color())
    if logy:
        ax.set_yscale("log")


# ---------------------------------------------------------------------------------------------------------------
# figure_problems: the house rules as a check

_MATH = re.compile(r"\$[^$]*\$")
_ASCII_MATH = re.compile(  # ||x||, x^2, a short subscript (W_t, W_mm, L_irr, x_1, W_{mm}), a Greek letter
    # spelled out; a code name such as pos_embed or cls_token (a word of four letters or more after _) is not math
    r"\|\||\^|_\{|\b[A-Za-z]{1,3}_[A-Za-z0-9]{1,3}\b|\b\w+_[A-Za-z0-9]\b"
    r"|\b(alpha|beta|gamma|delta|eta|theta|lambda|mu|rho|sigma|tau|phi|psi|omega|omega0)\b"
)


def _ascii_math(text: str) -> str | None:
    """The first stretch of ``text`` outside ``$...$`` that spells a symbol in ASCII, or None."""
    found = _ASCII_MATH.search(_MATH.sub(" ", text))
    return found.group(0) if found else None


def _shown_ticklabels(axis: Any) -> list[Any]:
    """The tick labels drawn on ``axis``: major and minor, inside the view limits, with text."""
    low, high = sorted(axis.get_view_interval())
    slack = 1e-9 * (high - low)  # a tick exactly at a limit is drawn
    shown = []
    for minor in (False, True):
        locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
        labels = axis.get_ticklabels(minor=minor)
        shown += [t for loc, t in zip(locs, labels, strict=True) if low - slack <= loc <= high + slack and t.get_text()]
    return [t for t in shown if t.get_visible()]


def _has_ticks(axis: Any) -> bool:
    return bool(_shown_ticklabels(axis))


def _texts(figure: Any) -> list[tuple[str, Any]]:
    """Every visible, non-empty text of the figure (and each legend as one box), named for messages."""
    out: list[tuple[str, Any]] = []
    for text in figure.texts:  # the suptitle is one of them
        kind = "footnote" if text.get_gid() == _FOOTNOTE_GID else "figure text"
        out.append(("suptitle" if text is figure._suptitle else kind, text))
    for i, ax in enumerate(figure.axes):
        name = f"panel {i + 1}"
        for title in (ax.title, ax._left_title, ax._right_title):
            out.append((f"{name} title", title))
        out.append((f"{name} x-label", ax.xaxis.label))
        out.append((f"{name} y-label", ax.yaxis.label))
        for axis, letter in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            out += [(f"{name} {letter} tick {t.get_text()!r}", t) for t in _shown_ticklabels(axis)]
        if ax.get_legend() is not None:
            out.append((f"{name} legend", ax.get_legend()))
    out += [("figure legend", legend) for legend in figure.legends]
    return [(n, t) for n, t in out if t.get_visible() and (not hasattr(t, "get_text") or t.get_text().strip())]


def figure_problems(figure: Any) -> list[str]:
    """Where ``figure`` breaks the house rules: unlabelled axes, axes with a single tick label, ASCII math, unnamed
    theory lines, overlaps.

    Parameters
    ----------
    figure : matplotlib.figure.Figure
        Drawn once here, so that layout and tick labels are final.

    Returns
    -------
    list of str
        One line per problem, naming the panel (1-based, row by row) and what is wrong; empty when it follows
        the rules.
    """
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    problems = []
    legends = [ax.get_legend() for ax in figure.axes if ax.get_legend() is not None] + list(figure.legends)
    shown = {text.get_text() for legend in legends for text in legend.get_texts()}
    for i, ax in enumerate(figure.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        name = f"panel {i + 1}" + (f" ({ax.get_title()!r})" if ax.get_title() else "")
        colorbar = hasattr(ax, "_colorbar")
        for axis, letter in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if _has_ticks(axis) and not axis.label.get_text().strip() and not (colorbar and letter == "x"):
                problems.append(f"{name}: the {letter}-axis has no label")
            if len(_shown_ticklabels(axis)) == 1:  # none is a choice (an image); one gives no scale
                problems.append(f"{name}: the {letter}-axis shows one tick label; a scale needs two or more")
        for artist in (*ax.lines, *ax.collections, *ax.patches):
            label = artist.get_label()
            if not label.startswith("_") and label not in shown:
                problems.append(f"{name}: {label!r} is in no legend")
        for line in ax.lines:
            level = line.get_transform() is not ax.transData  # axhline / axvline: a level, not data
            theory = line.get_color() in ("k", "black", "#000000") and line.get_linestyle() in ("--", ":")
            if (level or theory) and line.get_label().startswith("_"):
                problems.append(f"{name}: a reference or theory line has no legend label")
    for where, text in _texts(figure):
        if where == "footnote" or " tick " in where or not hasattr(text, "get_text"):
            continue
        bad = _ascii_math(text.get_text())
        if bad:
            problems.append(f"{where}: {text.get_text()!r} spells {bad!r} in ASCII; use mathtext")
    for legend_name, legend in [(w, t) for w, t in _texts(figure) if w.endswith("legend")]:
        for text in legend.get_texts():
            bad = _ascii_math(text.get_text())
            if bad:
                problems.append(f"{legend_name}: {text.get_text()!r} spells {bad!r} in ASCII; use mathtext")
    problems += _overlaps(_texts(figure), renderer)
    return problems


def _overlaps(texts: list[tuple[str, Any]], renderer: Any) -> list[str]:
    """Pairs of text boxes that overlap by more than a pixel each way."""
    boxes = np.array([[*t.get_window_extent(renderer).extents] for _, t in texts]).reshape(-1, 4)
    slack = 1.0  # pixels: glyph boxes of neighbouring tick labels touch without overlapping
    x0, y0, x1, y1 = (boxes[:, k] for k in range(4))
    wide = np.minimum(x1[:, None], x1[None, :]) - np.maximum(x0[:, None], x0[None, :]) > slack
    tall = np.minimum(y1[:, None], y1[None, :]) - np.maximum(y0[:, None], y0[None, :]) > slack
    hits = np.argwhere(np.triu(wide & tall, k=1))
    return [f"{texts[a][0]} overlaps {texts[b][0]}" for a, b in hits]
