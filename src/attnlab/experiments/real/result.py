"""What ``real.digits-vit`` and ``real.text`` share: train every (optimizer, seed) of a config, then the tables and
figures of the comparison as an :class:`ExperimentResult`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from attnlab.nets.compare import Comparison, ComparisonConfig, Setup, compare_optimizers
from attnlab.nets.figures import attention_figure, curves_figure, histogram_figure, norms_figure
from attnlab.plotting import label_ours
from attnlab.verify import Check, ExperimentResult, RunContext

__all__ = ["comparison_result", "train_config"]


def train_config(build: Callable[[Any, int], Setup], config: ComparisonConfig, ctx: RunContext) -> Comparison:
    """Every optimizer of ``config`` (with its lr) for ``config.seeds`` seeds from ``config.seed``, checkpointed
    under ``ctx.out / "checkpoints"``; ``build`` is a module-level function (it is sent to worker processes).
    """
    seeds = [config.seed + i for i in range(config.seeds)]
    return compare_optimizers(
        build,
        config,
        config.optimizers,
        config.lrs,
        seeds,
        epochs=config.epochs,
        batch_size=config.batch_size,
        sngd_cap=config.sngd_cap,
        sps_c=config.sps_c,
        workers=config.workers,
        checkpoint_dir=ctx.out / "checkpoints",
        bar=ctx.bar,
    )


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
    figures = {
        "curves": curves_figure(comparison.frame),
        "norms": norms_figure(comparison.norms),
        "qkv_histograms": histogram_figure(comparison.entries),
        "attention": attention_figure(comparison.attention, grid),
    }
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
