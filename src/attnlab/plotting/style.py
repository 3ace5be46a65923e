"""The house style of every figure attnlab draws: rcParams, a decorator, panel layouts and axis labels.

A figure function is decorated with :func:`house_figure`, which draws it under :data:`HOUSE_STYLE` (font sizes,
grid, spines) and thins crowded log-axis labels. The figures of the experiments add theory lines and their
defaults-that-are-ours strip (:mod:`attnlab.plotting.annotate`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: figures are files
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import (  # noqa: E402
    FixedLocator,
    FuncFormatter,
    LogLocator,
    MaxNLocator,
    NullFormatter,
    NullLocator,
)

from attnlab._validation import check_scalar  # noqa: E402

__all__ = [
    "CORR_GAP",
    "EPS",
    "HOUSE_STYLE",
    "STEP",
    "house_figure",
    "house_style",
    "label_axes",
    "log_gap_axis",
    "new_figure",
    "panel_grid",
]

#: rcParams of every figure: small, even type (figures are shown full width in the report), a light grid, no
#: top/right spines, and mathtext in the body font.
HOUSE_STYLE: dict[str, Any] = {
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "figure.titlesize": 10,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "legend.fontsize": 7,
    "legend.framealpha": 0.85,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "mathtext.fontset": "dejavusans",
}

STEP = "step $t$"  # the x-label of every training curve
CORR_GAP = r"$1 - \mathrm{corr}(W_t, W_{mm})$"  # directional gap to the max-margin solution
EPS = float(np.finfo(np.float64).eps)  # floor of a gap ``1 - x`` drawn on a log axis: below it is rounding


@contextlib.contextmanager
def house_style() -> Iterator[None]:
    """Context in which new figures, axes, labels and legends take :data:`HOUSE_STYLE`.

    Yields
    ------
    None
        Inside the block matplotlib's rcParams are updated with :data:`HOUSE_STYLE`; they are restored on leaving.
    """
    with plt.rc_context(HOUSE_STYLE):
        yield


def house_figure(draw: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a function returning a figure: draw it in the house style, then thin crowded log-axis labels.

    Labels, ticks and legends take their sizes from rcParams when they are made (axes keep their tick sizes from
    then on, even for ticks drawn later), so the whole function runs inside :func:`house_style`.

    Parameters
    ----------
    draw : callable
        ``draw(*args, **kwargs) -> matplotlib.figure.Figure``.

    Returns
    -------
    callable
        A function of the same arguments, name and docstring as ``draw`` that returns its figure, drawn in the
        house style, with the tick labels of its log axes thinned.
    """

    @functools.wraps(draw)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with house_style():
            figure = draw(*args, **kwargs)
            for ax in figure.axes:
                _thin_log_labels(ax)
        return figure

    return wrapper


def _thin_log_labels(ax: Any) -> None:
    """On a log axis, label only the decades, or 1, 2 and 5 times them where fewer than two decades show, or plain
    evenly spaced numbers where fewer than two of those show (a norm ratio between 0.9 and 1.4 showed only "1").

    Matplotlib labels every minor tick (``2x10^1, 3x10^1, ...``) of a short log axis, and on a narrow panel they
    collide.
    """
    for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        low, high = sorted(limits)
        if axis.get_scale() != "log" or low <= 0:
            continue
        if np.floor(np.log10(high)) - np.ceil(np.log10(low)) + 1 >= 2:  # two or more decades in view
            axis.set_minor_formatter(NullFormatter())
        elif len(_one_two_five_ticks(low, high)) >= 2:  # major ticks there too: minor ones may be switched off
            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            axis.set_major_formatter(FuncFormatter(_one_two_five))
            axis.set_minor_formatter(FuncFormatter(_one_two_five))
        else:  # under a factor of about 2.5: ticks as on a linear axis, which a log axis may also carry
            ticks = [t for t in MaxNLocator(4).tick_values(low, high) if low <= t <= high]
            axis.set_major_locator(FixedLocator(ticks))
            axis.set_major_formatter(FuncFormatter(_plain_number))
            axis.set_minor_locator(NullLocator())


def _one_two_five_ticks(low: float, high: float) -> list[float]:
    """The values 1, 2 and 5 times a power of ten between ``low`` and ``high`` (both > 0)."""
    exponents = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
    return [m * 10.0**e for e in exponents for m in (1, 2, 5) if low <= m * 10.0**e <= high]


def _plain_number(value: float, _position: Any) -> str:
    """Label a tick with its value in 4 significant digits (a module-level function, so that figures pickle)."""
    return f"{value:.4g}"


def _one_two_five(value: float, _position: Any) -> str:
    """Label a log tick only at 1, 2 and 5 times a power of ten; plain numbers between 0.001 and 9999."""
    exponent = int(np.floor(np.log10(value) + 1e-9))  # 1000 is 1e3, not 10e2, despite rounding in log10
    mantissa = round(value / 10.0**exponent)
    if mantissa not in (1, 2, 5):
        return ""
    if -3 <= exponent < 4:
        return f"{value:g}"
    return f"$10^{{{exponent}}}$" if mantissa == 1 else f"${mantissa}\\times10^{{{exponent}}}$"


def new_figure(ncols: int, nrows: int = 1, *, width: float = 3.6, height: float = 3.0) -> tuple[Any, Any]:
    """A figure with ``nrows x ncols`` axes (always a 2-D array flattened to 1-D), in constrained layout.

    Parameters
    ----------
    ncols, nrows : int
        Panels across and down.
    width, height : float
        Inches per panel.

    Returns
    -------
    figure : matplotlib.figure.Figure
    axes : numpy.ndarray of Axes, shape (nrows * ncols,)

    Raises
    ------
    ValidationError
        When ``ncols`` or ``nrows`` is not an int ``>= 1``, or ``width`` or ``height`` is not a positive number.
    """
    check_scalar("ncols", ncols, kind=int, low=1)
    check_scalar("nrows", nrows, kind=int, low=1)
    check_scalar("width", width, low=0.0, low_inclusive=False)
    check_scalar("height", height, low=0.0, low_inclusive=False)
    with house_style():
        fig, axes = plt.subplots(
            nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, layout="constrained"
        )
    return fig, axes.ravel()


def panel_grid(count: int, *, columns: int = 3, width: float = 3.6, height: float = 3.0) -> tuple[Any, Any]:
    """``count`` panels in rows of ``columns``, so that a figure of many panels stays near the report's width.

    Parameters
    ----------
    count : int
        Panels in all, ``>= 1``.
    columns : int, default=3
        Panels per row at most (fewer when ``count`` is smaller).
    width, height : float, default=3.6, 3.0
        Inches per panel.

    Returns
    -------
    figure : matplotlib.figure.Figure
    axes : numpy.ndarray of Axes, shape (count,)
        Row by row; the unused places of the last row are removed.

    Raises
    ------
    ValidationError
        When ``count`` or ``columns`` is not an int ``>= 1`` (or ``width``, ``height`` not positive).
    """
    check_scalar("count", count, kind=int, low=1)
    check_scalar("columns", columns, kind=int, low=1)
    ncols = min(count, columns)
    fig, axes = new_figure(ncols, -(-count // ncols), width=width, height=height)
    for ax in axes[count:]:
        fig.delaxes(ax)
    return fig, axes[:count]


def label_axes(ax: Any, xlabel: str, ylabel: str, title: str | None = None) -> None:
    """Label both axes (and optionally title) one panel; use mathtext for symbols.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    xlabel, ylabel : str
        The axis labels, e.g. :data:`STEP` and :data:`CORR_GAP`.
    title : str, optional
        The panel's title; None leaves it as it is.
    """
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)


def log_gap_axis(ax: Any, ylabel: str, *, logx: bool = False) -> None:
    """A log y-axis for a quantity that decays to 0 (``1 - corr``, ``L - L*``), labelled ``ylabel``.

    Plot the gap itself, never the quantity that tends to its limit: on a linear axis ``corr`` looks flat at 1
    long before ``1 - corr`` stops falling by decades.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        The panel.
    ylabel : str
        The y-axis label, e.g. :data:`CORR_GAP`.
    logx : bool, default=False
        Put the x-axis on a log scale too.
    """
    ax.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_ylabel(ylabel)
