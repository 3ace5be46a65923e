"""Each optimizer's rate searched on a declared grid, scored on a validation split: the papers' lost learning rates
are searched, not chosen.

Spec: implicit-bias-ngd §9 and appendix C (each optimizer runs at its own learning rate and cap; the values were
lost in extraction), mirror-descent-lp §9 E4 (a learning rate per p and model size).

Every rate of every optimizer's grid trains for a short budget on the training set less a validation part; the
rate with the best validation accuracy at the last epoch (mean over the tuning seeds) wins. A run that diverged
disqualifies its rate. A run that failed (diverged, or stalled at chance: no more validation examples right than
the majority class gets, :func:`~attnlab.nets.chance.at_chance`) disqualifies the rate just below its own on the
grid: that rate is at the edge of stability. Rates tied at the best accuracy form a band, and its middle wins
(the smaller of the two middles of an even band): a tie is mostly a saturated accuracy, where the loss only ranks how
aggressive a rate is, and the band's top edge is where a fresh seed stalls at chance. The test set is never seen. An
optimizer tied to another (``"md:2,normalized=false"`` is SGD) takes the other's rate untuned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from attnlab._validation import ValidationError, check_scalar
from attnlab.nets.chance import at_chance
from attnlab.nets.trials import Setup, Trial, train_trials

__all__ = ["check_grids", "tune_rates"]


def check_grids(optimizers: Sequence[str], grids: Sequence[Sequence[float]], tied: Sequence[tuple[str, str]]) -> None:
    """Refuse grids that do not give every optimizer exactly one way to its rate.

    Parameters
    ----------
    optimizers : sequence of str
    grids : sequence of sequence of float
        One grid per optimizer (positive rates); empty for a tied optimizer.
    tied : sequence of (str, str)
        ``(optimizer, other)``: ``optimizer`` takes ``other``'s tuned rate.

    Raises
    ------
    ValidationError
        When the counts differ, a rate is not positive, a tie names an optimizer not in ``optimizers``, ties an
        optimizer to a tied one, or an optimizer has both or neither of a grid and a tie.
    """
    if len(grids) != len(optimizers):
        raise ValidationError(
            f"lr_grids has {len(grids)} grids for {len(optimizers)} optimizers; give one grid per optimizer (an "
            "empty one for an optimizer in tied_lrs)"
        )
    ties = dict(tied)
    for name, other in ties.items():
        if name not in optimizers or other not in optimizers or other in ties:
            raise ValidationError(
                f"tied_lrs ties {name!r} to {other!r}: both must be among the optimizers {list(optimizers)}, and the "
                "second must be tuned itself"
            )
    for name, grid in zip(optimizers, grids):
        for lr in grid:
            check_scalar("lr_grids", lr, low=0.0, low_inclusive=False)
        if bool(grid) == (name in ties):
            raise ValidationError(
                f"optimizer {name!r} has {'a grid and a tie' if grid else 'neither a grid nor a tie'}; give it a "
                "non-empty grid in lr_grids, or an empty grid and an entry in tied_lrs"
            )


# Two mean accuracies closer than this are equal: a mean of k/N accuracies over S seeds moves in steps of 1/(N S)
# (above 1e-9 for N S < 1e9), while summing the same value in another order moves it by round-off (1e-16).
_ACCURACY_TIE = 1e-12


def _choose(cells: pd.DataFrame) -> pd.Series:
    """The winning row of one optimizer's cells: no run diverged at it, none failed at the next rate up, best
    accuracy, then the middle of the tied band.

    A rate whose next rate up on the grid failed in a tuning seed (diverged, or stalled at chance) is at the edge of
    stability: two tuning seeds can both learn there while a fresh seed stalls at chance. Full ``real.text``: at data
    seeds 2 and 4, l_1.1-MD tuned to 0.1 beside a divergent 0.3, and two of five comparison seeds never left ln 2; at
    data seed 8 its 0.3 stalled at chance in both tuning seeds without diverging, and one comparison seed at 0.1 stalled
    (docs/experiments/real.md, "The edge of stability"). Such a rate is passed over unless nothing else is healthy.
    Mean accuracies equal up to round-off are a tie (``0.1 + 0.7`` and ``0.3 + 0.5`` differ in the last bit), so the
    band decides between them, as the rule says, not the order in which the seeds' accuracies were summed. The band's
    middle, not its lowest loss: with the accuracy saturated, the lowest loss is the band's largest rate, and
    ``real.text --quick`` chose SPS at its grid's top (10) that way, where one of two fresh seeds stalled at chance
    (docs/experiments/real.md, "The tie rule").
    """
    healthy = cells[(cells["diverged"] == 0) & ~_below_failure(cells)]
    if not len(healthy):  # nothing clear of the edge: the rates with no divergence, then every rate (the table says so)
        healthy = cells[cells["diverged"] == 0]
    pool = healthy if len(healthy) else cells
    best = pool["validation_accuracy"].max()
    tied = pool[pool["validation_accuracy"] >= best - _ACCURACY_TIE] if pd.notna(best) else pool
    ordered = tied.sort_values("lr")
    return ordered.iloc[(len(ordered) - 1) // 2]


def _below_failure(cells: pd.DataFrame) -> pd.Series:
    """Whether each cell's next rate up in its optimizer's grid failed (diverged or stalled) in a tuning seed: the
    edge of stability.

    Parameters
    ----------
    cells : pandas.DataFrame
        One row per (optimizer, rate), with ``optimizer``, ``lr`` and ``failed`` (runs).

    Returns
    -------
    pandas.Series of bool
        Indexed like ``cells``; False at each grid's largest rate.
    """
    ordered = cells.sort_values(["optimizer", "lr"])
    above = ordered.groupby("optimizer", sort=False)["failed"].shift(-1, fill_value=0)
    return (above > 0).reindex(cells.index)


def tune_rates(
    build: Callable[[Any, int], Setup],
    config: Any,
    optimizers: Sequence[str],
    grids: Sequence[Sequence[float]],
    tied: Sequence[tuple[str, str]],
    seeds: Sequence[int],
    *,
    epochs: int,
    validation: tuple[float, int],
    **training: Any,
) -> tuple[tuple[float, ...], pd.DataFrame]:
    """Each optimizer's rate: the grid value that scores best on a validation split after ``epochs`` epochs.

    Parameters
    ----------
    build : callable
        ``build(config, seed) -> Setup`` (see :func:`~attnlab.nets.trials.train_trials`).
    config : any
        Passed to ``build``.
    optimizers : sequence of str
    grids : sequence of sequence of float
        One grid per optimizer, declared before the run (see :func:`check_grids`).
    tied : sequence of (str, str)
        ``(optimizer, other)``: ``optimizer`` takes ``other``'s rate without tuning.
    seeds : sequence of int
        The seeds of every (optimizer, rate) cell.
    epochs : int
        The tuning budget: epochs of every tuning run.
    validation : (float, int)
        ``(fraction, seed)`` of the validation split, carved from the training set.
    **training
        ``batch_size`` (required), ``sngd_cap``, ``sps_c``, ``workers``, ``epochs_of`` (per-optimizer tuning
        budgets), ``checkpoint_dir``, ``bar``, ``code``: as for
        :func:`~attnlab.nets.trials.train_trials`.

    Returns
    -------
    lrs : tuple of float
        The chosen rate of each optimizer, in order.
    table : pandas.DataFrame
        One row per (optimizer, rate): ``optimizer``, ``lr``, ``seeds``, ``validation_accuracy`` and
        ``validation_loss`` (means over seeds at the last epoch), ``diverged``, ``stalled`` (runs that did not
        diverge and got no more validation examples right than the majority class,
        :func:`~attnlab.nets.chance.at_chance`) and ``failed`` (runs that did either), ``chosen``, ``at_edge`` (the
        chosen rate is the grid's smallest or largest: the best may lie outside it), ``below_failure`` (the next rate
        up failed: the edge of stability, passed over) and ``tied_to`` (the optimizer whose rate a tied one takes; its
        one row has no scores).

    Raises
    ------
    ValidationError
        On grids that :func:`check_grids` refuses, or no seeds.
    """
    check_grids(optimizers, grids, tied)
    if not seeds:
        raise ValidationError("seeds is empty; tune on at least one seed")
    ties = dict(tied)
    trials = [
        Trial(name, float(lr), int(seed)) for name, grid in zip(optimizers, grids) for lr in grid for seed in seeds
    ]
    results = train_trials(build, config, trials, epochs=epochs, validation=validation, **training)  # last rows alone
    last = pd.concat([r["frame"].tail(1) for r in results], ignore_index=True)
    runs = zip(last["diverged"], last["test_accuracy"], last["chance"], last["scored"])
    stalled = pd.Series([not d and at_chance(a, c, int(n)) for d, a, c, n in runs], index=last.index, dtype=bool)
    last = last.assign(stalled=stalled, failed=last["diverged"] | stalled)
    cells = (
        last.groupby(["optimizer", "lr"], sort=False)
        .agg(
            seeds=("seed", "size"),
            validation_accuracy=("test_accuracy", "mean"),
            validation_loss=("test_loss", "mean"),
            diverged=("diverged", "sum"),
            stalled=("stalled", "sum"),
            failed=("failed", "sum"),
        )
        .reset_index()
    )
    counts = {column: cells[column].astype(int) for column in ("diverged", "stalled", "failed")}
    cells = cells.assign(chosen=False, at_edge=False, tied_to="", **counts)
    cells = cells.assign(below_failure=_below_failure(cells))
    chosen: dict[str, float] = {}
    for name, grid in zip(optimizers, grids):
        if not grid:
            continue
        best = _choose(cells[cells["optimizer"] == name])
        chosen[name] = float(best["lr"])
        cells.loc[best.name, "chosen"] = True
        cells.loc[best.name, "at_edge"] = len(grid) > 1 and chosen[name] in (min(grid), max(grid))
    tied_rows = [
        {
            "optimizer": name,
            "lr": chosen[ties[name]],
            "seeds": 0,
            "chosen": True,
            "at_edge": False,
            "below_failure": False,
            "tied_to": ties[name],
        }
        for name in optimizers
        if name in ties
    ]
    table = pd.concat([cells, pd.DataFrame(tied_rows)], ignore_index=True)
    lrs = tuple(chosen[ties.get(name, name)] for name in optimizers)
    return lrs, table
