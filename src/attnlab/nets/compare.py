"""Train one task under several optimizers and seeds, gather tidy tables of everything the figures show, and
summarise them per optimizer; with a config, each optimizer's rate is first tuned on a declared grid.

Spec: implicit-bias-ngd §9 fig. 1, 4, 6, 7 (SGD, SNGD, SPS, Adam: training loss per epoch, layer-norm growth);
mirror-descent-lp §9 E4-E5 (l_p-MD, p = 1.1, 2, 3: test accuracy, K/Q/V entry histograms, attention maps).

Each (optimizer, seed) trial builds its model and data from ``build(config, seed)``; the trials train stacked
(:func:`~attnlab.nets.trials.train_trials`, one vmapped step for all of them) on one CPU thread per worker, and
checkpoint every epoch, so an interrupted comparison resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar, check_seed
from attnlab.nets.probes import hoyer_sparsity
from attnlab.nets.trials import Setup, Trial, train_trials
from attnlab.nets.tuning import check_grids, tune_rates
from attnlab.optim import parse_optimizer

__all__ = ["Comparison", "ComparisonConfig", "Setup", "Trial", "compare_optimizers", "summary_table"]


@dataclass(frozen=True)
class ComparisonConfig:
    """The settings every optimizer comparison shares; a task's config inherits them and adds its data and model.

    The defaults are the real experiments' (``real.digits-vit``, ``real.text``): the optimizers of
    implicit-bias-ngd §9 and mirror-descent-lp §9 E4-E5 with their rate grids; each trains at its rate in ``lrs``
    unless ``tune_epochs > 0``, which first tunes each rate on its grid (the experiments do).

    Attributes
    ----------
    optimizers : tuple of str
        Optimizer strings of the registry (:func:`attnlab.optim.parse_optimizer`).
    lrs : tuple of float
        One rate per optimizer (see :class:`~attnlab.nets.Trial`), used as given when ``tune_epochs`` is 0.
    lr_grids : tuple of tuple of float
        One grid per optimizer, searched when ``tune_epochs > 0`` (:func:`~attnlab.nets.tuning.tune_rates`); an
        empty grid for an optimizer that ``tied_lrs`` ties to another.
    tied_lrs : tuple of (str, str)
        ``(optimizer, other)``: the optimizer is not tuned and takes ``other``'s rate ("md:2,normalized=false" is
        SGD, so it takes SGD's rate and the two must agree step for step).
    tune_epochs : int
        Epochs of each tuning run; 0 skips tuning and trains at ``lrs``.
    tune_seeds : int
        Seeds of each tuning cell, ``seed, seed + 1, ...``.
    validation_fraction : float
        Share of the training set held out to score the tuning runs (they train on the rest); the test set is
        never seen while tuning.
    sngd_cap : float
        Cap on SNGD's step size lr / ||g|| (implicit-bias-ngd A8).
    sps_c : float
        SPS constant c (implicit-bias-ngd A8, [L] 0.5).
    seeds : int
        Runs per optimizer; run seeds are ``seed, seed + 1, ...``.
    seed : int
        Seeds the data, the validation split and the first run.
    epochs, batch_size : int
        Passes over the training set, and examples per mini-batch.
    workers : int
        Stacks trained in parallel processes (one CPU thread each); 1 trains every run in one stack in this
        process, which is fastest when other work keeps the other core busy (a reproduction's pool).
    probes : int
        Test inputs whose first-token attention maps are drawn.
    """

    optimizers: tuple[str, ...] = (
        "sgd",
        "sngd",
        "sps",
        "adam",
        "md:1.1,normalized=false",
        "md:2,normalized=false",
        "md:3,normalized=false",
    )
    lrs: tuple[float, ...] = (0.3, 0.2, 1.0, 1e-3, 0.05, 0.3, 1e-2)
    lr_grids: tuple[tuple[float, ...], ...] = (
        (0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
        (0.02, 0.05, 0.1, 0.2, 0.5, 1.0),
        (0.1, 0.3, 1.0, 3.0, 10.0),
        (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2),
        (0.003, 0.01, 0.03, 0.1, 0.3),
        (),
        (1e-3, 3e-3, 1e-2, 3e-2, 0.1),
    )
    tied_lrs: tuple[tuple[str, str], ...] = (("md:2,normalized=false", "sgd"),)
    tune_epochs: int = 0
    tune_seeds: int = 1
    validation_fraction: float = 0.2
    sngd_cap: float = 1.0
    sps_c: float = 0.5
    seeds: int = 5
    seed: int = 0
    epochs: int = 20  # 30 before the checks review (--set epochs=30): the full reproduction's budget (docs)
    batch_size: int = 32
    workers: int = 1
    probes: int = 4

    def __post_init__(self) -> None:
        if len(self.optimizers) != len(self.lrs) or not self.optimizers:
            raise ValidationError(
                f"optimizers has {len(self.optimizers)} names and lrs {len(self.lrs)}; give one lr per optimizer"
            )
        for name in self.optimizers:
            parse_optimizer(name)
        for lr in self.lrs:
            check_scalar("lrs", lr, low=0.0, low_inclusive=False)
        check_scalar("sngd_cap", self.sngd_cap, low=0.0, low_inclusive=False)
        check_scalar("sps_c", self.sps_c, low=0.0, low_inclusive=False)
        for name in ("seeds", "epochs", "batch_size", "workers", "probes", "tune_seeds"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        check_seed("seed", self.seed)
        check_scalar("tune_epochs", self.tune_epochs, kind=int, low=0)
        check_scalar(
            "validation_fraction",
            self.validation_fraction,
            low=0.0,
            high=1.0,
            low_inclusive=False,
            high_inclusive=False,
        )
        if self.tune_epochs:
            check_grids(self.optimizers, self.lr_grids, self.tied_lrs)

    def optimizer_epochs(self) -> dict[str, int]:
        """Per-optimizer epoch budgets that replace both ``tune_epochs`` and ``epochs``: none here.

        A task's config may declare some (``real.text``'s ``epochs_by_optimizer``).

        Returns
        -------
        dict of str to int
            ``{optimizer: epochs}``.
        """
        return {}

    def compare(
        self,
        build: Callable[[Any, int], Setup],
        *,
        checkpoint_dir: str | Path | None = None,
        bar: Callable[..., Any] | None = None,
        code: str | None = None,
    ) -> Comparison:
        """Tune every optimizer's rate on its grid (unless ``tune_epochs`` is 0), then train every optimizer at its
        rate for ``seeds`` seeds from ``seed``.

        :func:`~attnlab.nets.tuning.tune_rates` then :func:`compare_optimizers` with this config's settings;
        ``build(self, seed)`` builds each trial.

        Parameters
        ----------
        build : callable
            ``build(config, seed) -> Setup``, a module-level function (it is sent to worker processes).
        checkpoint_dir : path, optional
            Folder of per-stack checkpoints, resumed when the config and ``code`` are unchanged; needs ``code``.
        bar : callable, optional
            ``bar(iterable, total=..., desc=...)`` progress bar over stacks.
        code : str, optional
            A key of the code, in the checkpoints' names (:func:`~attnlab.nets.trials.train_trials`).

        Returns
        -------
        Comparison
            With the tuning table in ``tuning`` (empty without tuning).
        """
        options = {
            "batch_size": self.batch_size,
            "sngd_cap": self.sngd_cap,
            "sps_c": self.sps_c,
            "workers": self.workers,
            "epochs_of": self.optimizer_epochs(),
            "checkpoint_dir": checkpoint_dir,
            "bar": bar,
            "code": code,
        }
        lrs, tuning = self.lrs, pd.DataFrame()
        if self.tune_epochs:
            lrs, tuning = tune_rates(
                build,
                self,
                self.optimizers,
                self.lr_grids,
                self.tied_lrs,
                [self.seed + i for i in range(self.tune_seeds)],
                epochs=self.tune_epochs,
                validation=(self.validation_fraction, self.seed),
                **options,
            )
        comparison = compare_optimizers(
            build, self, self.optimizers, lrs, [self.seed + i for i in range(self.seeds)], epochs=self.epochs, **options
        )
        comparison.tuning = tuning
        return comparison


@dataclass
class Comparison:
    """Tidy tables of a comparison.

    Attributes
    ----------
    frame : pandas.DataFrame
        One row per (optimizer, seed, epoch): the :func:`~attnlab.nets.fit_classifier` columns plus ``optimizer``, ``lr``, ``seed``.
    norms : pandas.DataFrame
        ``optimizer``, ``seed``, ``epoch``, ``layer``, ``norm``.
    entries : pandas.DataFrame
        Key/query/value weight entries of the first seed: ``optimizer`` ("init" for the initial weights),
        ``layer``, ``projection``, ``value``.
    attention : pandas.DataFrame
        First-token attention of the first seed on the probe inputs: ``optimizer`` ("init" before training),
        ``sample``, ``token``, ``weight``.
    sparsity : pandas.DataFrame
        One row per (optimizer, seed): Hoyer sparsity of all K/Q/V entries at init (``qkv_hoyer_init``), at the end
        (``qkv_hoyer``) and of their change (``qkv_hoyer_change``), and the change's norm relative to the initial
        entries' (``qkv_change_ratio``).
    tuning : pandas.DataFrame
        The tuning of the rates (:func:`~attnlab.nets.tuning.tune_rates`), one row per (optimizer, rate); empty
        when the rates were given.
    """

    frame: pd.DataFrame
    norms: pd.DataFrame
    entries: pd.DataFrame
    attention: pd.DataFrame
    sparsity: pd.DataFrame = field(default_factory=pd.DataFrame)
    tuning: pd.DataFrame = field(default_factory=pd.DataFrame)


def compare_optimizers(
    build: Callable[[Any, int], Setup],
    config: Any,
    optimizers: Sequence[str],
    lrs: Sequence[float],
    seeds: Sequence[int],
    *,
    epochs: int,
    batch_size: int,
    sngd_cap: float | None = None,
    sps_c: float = 0.5,
    workers: int = 1,
    epochs_of: dict[str, int] | None = None,
    checkpoint_dir: str | Path | None = None,
    bar: Callable[..., Any] | None = None,
    code: str | None = None,
) -> Comparison:
    """Train ``build(config, seed)`` under every optimizer and seed; return tidy tables.

    Parameters
    ----------
    build : callable
        ``build(config, seed) -> Setup``, a module-level function (it is sent to worker processes).
    config : any
        Passed to ``build`` (a frozen dataclass config).
    optimizers : sequence of str
        Optimizer names, e.g. ``("sgd", "sngd", "sps", "adam", "md:1.1,normalized=false")``.
    lrs : sequence of float
        One rate per optimizer: its ``lr``, or Polyak's ``max_step`` (see :class:`Trial`).
    seeds : sequence of int
        Model-initialisation and mini-batch seeds; the first one is probed for weights and attention.
    epochs, batch_size : int
    sngd_cap : float, optional
    sps_c : float, default=0.5
    workers : int, default=1
        1 trains every trial as one stack in this process; more cut them into that many stacks, each in a
        spawned process with one CPU thread (:func:`~attnlab.nets.trials.train_trials`).
    epochs_of : dict of str to int, optional
        ``{optimizer: epochs}``: that optimizer trains for that many epochs instead of ``epochs``.
    checkpoint_dir : path, optional
        Folder of per-stack checkpoints (``runs-<hash of config, trials and options>[-<code>].pt``); existing ones
        are resumed, and a changed config starts afresh instead of resuming another config's runs; one made by other
        code (another ``code``) is removed, with a warning, and computed again. Needs ``code``
        (:func:`~attnlab.nets.trials.train_trials`).
    bar : callable, optional
        ``bar(iterable, total=..., desc=...)`` progress bar over the stacks (``RunContext.bar``).
    code : str, optional
        A key of the code, in the checkpoints' names (:func:`~attnlab.nets.trials.train_trials`).

    Returns
    -------
    Comparison
    """
    if len(optimizers) != len(lrs) or not optimizers:
        raise ValidationError(
            f"optimizers has {len(optimizers)} names and lrs {len(lrs)} values; give one learning rate per optimizer"
        )
    for name in optimizers:
        parse_optimizer(name)
    if not seeds:
        raise ValidationError("seeds is empty; pass at least one seed")
    trials = [Trial(name, float(lr), int(seed)) for seed in seeds for name, lr in zip(optimizers, lrs)]
    results = train_trials(
        build,
        config,
        trials,
        epochs=epochs,
        batch_size=batch_size,
        sngd_cap=sngd_cap,
        sps_c=sps_c,
        workers=workers,
        epochs_of=epochs_of,
        checkpoint_dir=checkpoint_dir,
        bar=bar,
        probe_seed=int(seeds[0]),
        code=code,
    )
    first_init = next(r for r in results if "init_entries" in r)

    def gather(key: str) -> pd.DataFrame:
        return pd.concat([r[key] for r in results if key in r], ignore_index=True)

    return Comparison(
        frame=gather("frame"),
        norms=gather("norms"),
        entries=pd.concat([first_init["init_entries"], gather("entries")], ignore_index=True),
        attention=pd.concat([first_init["init_attention"], gather("attention")], ignore_index=True),
        sparsity=gather("sparsity"),
    )


def _total_norm_growth(norms: pd.DataFrame) -> pd.Series:
    totals = norms.groupby(["optimizer", "seed", "epoch"])["norm"].apply(lambda s: float((s**2).sum() ** 0.5))
    totals = totals.reset_index().sort_values("epoch")
    ends = totals.groupby(["optimizer", "seed"])["norm"].agg(["first", "last"])
    return (ends["last"] / ends["first"]).groupby("optimizer").mean()


def summary_table(comparison: Comparison) -> pd.DataFrame:
    """Per optimizer: final and best accuracy and final loss (mean and std over seeds), norm growth, sparsity.

    Parameters
    ----------
    comparison : Comparison
        From :func:`compare_optimizers` (or tables of the same columns).

    Returns
    -------
    pandas.DataFrame
        Columns ``optimizer``, ``lr``, ``seeds``, ``diverged`` (runs that hit a non-finite loss),
        ``test_accuracy_mean``, ``test_accuracy_std``, ``best_test_accuracy_mean``, ``train_loss_mean``,
        ``train_loss_std``, ``train_loss_area`` (training loss averaged over epochs 1.. and seeds: the area under
        the training curve, lower is faster), ``norm_growth`` (seed mean of total parameter norm, last epoch / epoch 0),
        ``qkv_hoyer`` (Hoyer sparsity of all key/query/value entries of the first seed, see
        :func:`hoyer_sparsity`) and ``seconds_mean`` (training time per run).
    """
    if not isinstance(comparison, Comparison):
        raise ValidationError(
            f"comparison must be a Comparison, got {type(comparison).__name__}; pass what compare_optimizers returns"
        )
    frame = comparison.frame
    last = frame.sort_values("epoch").groupby(["optimizer", "seed"]).tail(1)
    best = frame.groupby(["optimizer", "seed"])["test_accuracy"].max().groupby("optimizer").mean()
    area = frame[frame["epoch"] > 0].groupby("optimizer")["train_loss"].mean()
    growth = _total_norm_growth(comparison.norms)
    rows = []
    for name in dict.fromkeys(frame["optimizer"]):
        runs = last[last["optimizer"] == name]
        entries = comparison.entries[comparison.entries["optimizer"] == name]["value"]
        rows.append(
            {
                "optimizer": name,
                "lr": float(runs["lr"].iloc[0]),
                "seeds": len(runs),
                "diverged": int(runs["diverged"].sum()),
                "test_accuracy_mean": runs["test_accuracy"].mean(),
                "test_accuracy_std": runs["test_accuracy"].std(ddof=0),
                "best_test_accuracy_mean": best[name],
                "train_loss_mean": runs["train_loss"].mean(),
                "train_loss_std": runs["train_loss"].std(ddof=0),
                "train_loss_area": area[name],
                "norm_growth": growth[name],
                "qkv_hoyer": hoyer_sparsity(torch.tensor(entries.to_numpy())) if len(entries) else float("nan"),
                "seconds_mean": runs["seconds"].mean(),
            }
        )
    return pd.DataFrame(rows)
