"""Figures in attnlab's house style: the style itself, what experiment figures add, and the rules as a check.

- :mod:`attnlab.plotting.style`: rcParams, the :func:`house_figure` decorator, panel layouts, axis labels;
- :mod:`attnlab.plotting.annotate`: theory lines, the float64 rounding floor, bands over runs, and the strip that
  lists the defaults that are ours rather than the paper's;
- :mod:`attnlab.plotting.lint`: :func:`figure_problems`, which the report and the tests run on every figure;
- :mod:`attnlab.plotting.render`: :func:`lay_out`, a figure laid out once for its files (``save_figure`` calls it).
"""

from attnlab.plotting.annotate import (
    THEORY_STYLE,
    drop_ours,
    has_ours,
    label_ours,
    plot_band,
    rounding_floor,
    theory_hline,
    theory_line,
)
from attnlab.plotting.lint import figure_problems
from attnlab.plotting.render import lay_out
from attnlab.plotting.style import (
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
    "THEORY_STYLE",
    "drop_ours",
    "figure_problems",
    "has_ours",
    "house_figure",
    "house_style",
    "label_axes",
    "label_ours",
    "lay_out",
    "log_gap_axis",
    "new_figure",
    "panel_grid",
    "plot_band",
    "rounding_floor",
    "theory_hline",
    "theory_line",
]
