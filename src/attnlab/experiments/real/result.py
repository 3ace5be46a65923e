"""What ``real.digits-vit`` and ``real.text`` share: a trained comparison's tables and figures as an
:class:`ExperimentResult`."""

from __future__ import annotations

from typing import Any

import pandas as pd

from attnlab.nets.compare import Comparison
from attnlab.nets.figures import comparison_figures
from attnlab.plotting import label_ours
from attnlab.verify import Check, ExperimentResult

__all__ = ["comparison_result"]


def comparison_result(
    comparison: Comparison,
    summary: pd.DataFrame,
    config: Any,
    checks: list[Check],
    notes: list[str],
    grid: tuple[int, int] | None = None,
) -> ExperimentResult:
    """The tables (trajectory, ``summary`` from :func:`summary_table`, layer norms, K/Q/V entries, attention) and
    the four figures, each labelled with the defaults that are ours; ``grid`` lays image attention out as patches."""
    figures = comparison_figures(comparison, grid)
    for figure in figures.values():
        label_ours(figure, config)
    return ExperimentResult(
        frame=comparison.frame,
        checks=checks,
        figures=figures,
        tables={
            "summary": summary,
            "layer_norms": comparison.norms,
            "qkv_entries": comparison.entries,
            "attention": comparison.attention,
        },
        notes=notes + ["one CPU thread per run; runs spread over config.workers processes"],
    )
