"""The house rules of every figure, as a check: :func:`figure_problems`.

The rules:

- every axis with ticks has a label, and symbols are mathtext (``r"$\\|W_t\\|_F$"``), never ASCII such as
  ``||W_t||`` or ``phi_opt``;
- a quantity that decays to 0 is plotted as a gap on a log axis (``1 - corr``, ``L - L*``;
  :func:`attnlab.plotting.log_gap_axis`), and an axis shows at least two tick labels;
- theory lines (:func:`attnlab.plotting.theory_line`) are black, dashed and named in the legend;
- nothing overlaps: figures use constrained layout, and :func:`attnlab.plotting.label_ours` reserves its own strip;
- nothing reaches past the figure's edge (figures are saved as laid out, never cropped to their contents);
- no data is left out unseen: a band of :func:`attnlab.plotting.plot_band` over runs of which some are not finite
  is reported.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from attnlab.plotting.annotate import FOOTNOTE_GID, NONFINITE_GID

__all__ = ["figure_problems"]

_SLACK = 1.0  # pixels: glyph boxes of neighbouring tick labels touch without overlapping; rounding at the edge

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
        kind = "footnote" if text.get_gid() == FOOTNOTE_GID else "figure text"
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
    theory lines, overlaps, text cut off at the figure's edge, bands that left out values that are not finite.

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
        problems += [f"{name}: {t.get_text()}" for t in ax.texts if t.get_gid() == NONFINITE_GID]  # plot_band's
    texts = _texts(figure)
    for where, text in texts:
        if where == "footnote" or " tick " in where or not hasattr(text, "get_text"):
            continue
        bad = _ascii_math(text.get_text())
        if bad:
            problems.append(f"{where}: {text.get_text()!r} spells {bad!r} in ASCII; use mathtext")
    for legend_name, legend in [(w, t) for w, t in texts if w.endswith("legend")]:
        for text in legend.get_texts():
            bad = _ascii_math(text.get_text())
            if bad:
                problems.append(f"{legend_name}: {text.get_text()!r} spells {bad!r} in ASCII; use mathtext")
    boxes = np.array([[*t.get_window_extent(renderer).extents] for _, t in texts]).reshape(-1, 4)  # x0 y0 x1 y1
    problems += _overlaps(texts, boxes)
    problems += _cut_off(texts, boxes, figure.bbox)
    return problems


def _cut_off(texts: list[tuple[str, Any]], boxes: np.ndarray, frame: Any) -> list[str]:
    """Text boxes (``boxes``, one row of display extents per text) that reach past the figure's edge by more than a
    pixel: the saved file cuts them off."""
    outside = (boxes[:, :2] < np.array([frame.x0, frame.y0]) - _SLACK).any(axis=1)
    outside |= (boxes[:, 2:] > np.array([frame.x1, frame.y1]) + _SLACK).any(axis=1)
    return [
        f"{texts[i][0]} reaches past the figure's edge (cut off in the saved file)" for i in np.flatnonzero(outside)
    ]


def _overlaps(texts: list[tuple[str, Any]], boxes: np.ndarray) -> list[str]:
    """Pairs of text boxes (``boxes``, one row of display extents per text) that overlap by more than a pixel each
    way."""
    x0, y0, x1, y1 = (boxes[:, k] for k in range(4))
    wide = np.minimum(x1[:, None], x1[None, :]) - np.maximum(x0[:, None], x0[None, :]) > _SLACK
    tall = np.minimum(y1[:, None], y1[None, :]) - np.maximum(y0[:, None], y0[None, :]) > _SLACK
    hits = np.argwhere(np.triu(wide & tall, k=1))
    return [f"{texts[a][0]} overlaps {texts[b][0]}" for a, b in hits]
