"""What ``real.digits-vit`` and ``real.text`` share: a trained comparison's tables and figures as an
:class:`ExperimentResult`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd

from attnlab._io import config_hash
from attnlab._validation import ValidationError, check_count, check_seed_range
from attnlab.nets.compare import Comparison
from attnlab.nets.figures import comparison_figures
from attnlab.nets.trials import UNREADABLE_CODE
from attnlab.plotting import label_ours
from attnlab.verify import Check, ExperimentResult

__all__ = ["MAX_SEEDS", "check_pairs", "check_seed_counts", "code_key", "comparison_result"]

MAX_SEEDS = 100
"""Most runs per optimizer (``seeds``) and tuning runs per cell (``tune_seeds``) of a real experiment (ours: a bound
on the run's time, which grows linearly in them)."""


def check_seed_counts(config: Any) -> None:
    """Refuse ``seeds`` or ``tune_seeds`` above :data:`MAX_SEEDS`, and a ``seed`` whose run seeds ``seed, seed + 1,
    ...`` pass ``2**63 - 1`` (a config's ``__post_init__``, after :class:`ComparisonConfig`'s)."""
    for name in ("seeds", "tune_seeds"):
        check_count(
            name, getattr(config, name), 1, MAX_SEEDS, "ours: a bound on the run's time, which grows linearly in it"
        )
    most = max(config.seeds, config.tune_seeds)
    check_seed_range(config.seed, most - 1, f"{most} runs")


def check_pairs(name: str, value: Any, example: str) -> None:
    """Refuse a ``name`` that is not a sequence of pairs (a config's ``__post_init__``, before
    :class:`ComparisonConfig`'s, which reads ``tied_lrs`` as a mapping); ``example`` is its right form."""
    for entry in value if isinstance(value, (tuple, list)) else [value]:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise ValidationError(
                f"{name} == {value!r}: each entry must be a pair, got {entry!r}; give pairs such as {example} "
                f'(--set "{name}={example}": one bracketed pair per entry, a 1-entry list keeps its trailing comma)'
            )


def code_key(build: Callable[..., Any], config: Any) -> str:
    """A key of the code that computes a comparison, for its checkpoints' names
    (:func:`~attnlab.nets.trials.train_trials`'s ``code``): a hash of
    :func:`~attnlab.runner.fingerprint.code_fingerprint` of the modules of ``build`` and of the config's class, as
    the run's record holds it (``code``). It ends in ``u`` when some of that code has no readable source (a
    notebook's ``build``): a key unique to the call, whose checkpoints are never resumed."""
    from attnlab.runner.fingerprint import UNREADABLE, code_fingerprint

    fingerprint = code_fingerprint([build.__module__, type(config).__module__])
    unreadable = any(str(h).startswith(UNREADABLE) for h in fingerprint["source"].values())
    return config_hash(fingerprint) + (UNREADABLE_CODE if unreadable else "")


def comparison_result(
    comparison: Comparison,
    summary: pd.DataFrame,
    config: Any,
    checks: list[Check],
    notes: list[str],
    grid: tuple[int, int] | None = None,
) -> ExperimentResult:
    """The tables (trajectory, ``summary`` from :func:`summary_table`, layer norms, K/Q/V entries, attention, and the
    rate tuning when the rates were tuned) and the four figures, each labelled with the defaults that are ours;
    ``grid`` lays image attention out as patches; a note says which rate each optimizer trained at."""
    figures = comparison_figures(comparison, grid)
    for figure in figures.values():
        label_ours(figure, config)
    tables = {
        "summary": summary,
        "layer_norms": comparison.norms,
        "qkv_entries": comparison.entries,
        "attention": comparison.attention,
    }
    rates = ", ".join(f"{row.optimizer} {row.lr:g}" for row in summary.itertuples())
    if comparison.tuning.empty:
        rates = f"rates as given (config.lrs): {rates}"
    else:
        tables["tuning"] = comparison.tuning
        grid_edge = sorted(comparison.tuning.loc[comparison.tuning["at_edge"], "optimizer"])
        rates = (
            f"rates tuned on the declared grids (config.lr_grids; {config.tune_epochs} epochs x {config.tune_seeds} "
            f"seeds on a validation part {config.validation_fraction:g} of the training set; tuning.parquet): {rates}"
            + (f"; at a grid edge: {', '.join(grid_edge)}" if grid_edge else "")
        )
    return ExperimentResult(
        frame=comparison.frame,
        checks=checks,
        figures=figures,
        tables=tables,
        notes=[*notes, rates, "runs trained as vmapped stacks, one CPU thread each, over config.workers processes"],
    )
