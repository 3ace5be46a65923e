"""Train one task under several optimizers and seeds, gather tidy tables of everything the figures show, and
summarise them per optimizer.

Spec: implicit-bias-ngd §9 fig. 1, 4, 6, 7 (SGD, SNGD, SPS, Adam: training loss per epoch, layer-norm growth);
mirror-descent-lp §9 E4-E5 (l_p-MD, p = 1.1, 2, 3: test accuracy, K/Q/V entry histograms, attention maps).

Each (optimizer, seed) trial builds its model and data afresh from ``build(config, seed)``, trains with
:func:`~attnlab.nets.fit_classifier` on one CPU thread (small models run faster on one thread, and two workers then use two cores), and
checkpoints every epoch, so an interrupted comparison resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from attnlab._io import config_hash
from attnlab._validation import ValidationError, check_scalar
from attnlab.nets.classifier import fit_classifier
from attnlab.nets.datasets.split import Split
from attnlab.nets.optimizers import make_optimizer
from attnlab.nets.probes import first_token_attention, hoyer_sparsity, projection_entries
from attnlab.optim import OptimizerSpec, parse_optimizer

__all__ = ["Comparison", "ComparisonConfig", "Setup", "Trial", "compare_optimizers", "summary_table"]


@dataclass
class Setup:
    """What ``build(config, seed)`` returns for one trial.

    Attributes
    ----------
    model : nn.Module
        Freshly initialised from ``seed``; has ``attention(inputs)`` for the attention maps.
    data : Split
    metrics : mapping of str to callable
        Extra per-epoch metrics for :func:`~attnlab.nets.fit_classifier`: functions of its state ``{"model",
        "epoch"}`` (:class:`attnlab.metrics.Metric`).
    probe_inputs : torch.Tensor, shape (k, ...)
        A few test inputs whose first-token attention is recorded.
    """

    model: nn.Module
    data: Split
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]] = field(default_factory=dict)
    probe_inputs: torch.Tensor | None = None


@dataclass(frozen=True)
class Trial:
    """One training run: an optimizer name, its learning rate, and a seed.

    Parameters
    ----------
    optimizer : str
        An optimizer string of the registry (:func:`attnlab.optim.parse_optimizer`), e.g.
        ``"md:1.1,normalized=false"``.
    lr : float
        Its rate: its step size ``lr``, or for an optimizer without one (Polyak, ``"sps"``) its cap ``max_step``,
        the SPS threshold the papers tune (implicit-bias-ngd A8); unless the string sets it.
    seed : int
        Seeds the model's initialisation and the mini-batch order.
    """

    optimizer: str
    lr: float
    seed: int


@dataclass(frozen=True)
class ComparisonConfig:
    """The settings every optimizer comparison shares; a task's config inherits them and adds its data and model.

    The defaults are the real experiments' (``real.digits-vit``, ``real.text``): the optimizers of
    implicit-bias-ngd §9 and mirror-descent-lp §9 E4-E5 at rates of our own.

    Attributes
    ----------
    optimizers : tuple of str
        Optimizer strings of the registry (:func:`attnlab.optim.parse_optimizer`).
    lrs : tuple of float
        One per optimizer; for "sps" the cap on the Polyak step, for "sngd" the step length. Tuned by a short
        sweep on seed 0 (see docs/experiments/real.md); "md:2,normalized=false" shares SGD's rate so that the two must agree.
    sngd_cap : float
        Cap on SNGD's step size lr / ||g|| (implicit-bias-ngd A8).
    sps_c : float
        SPS constant c (implicit-bias-ngd A8, [L] 0.5).
    seeds : int
        Runs per optimizer; run seeds are ``seed, seed + 1, ...``.
    seed : int
        Seeds the data and the first run.
    epochs, batch_size : int
        Passes over the training set, and examples per mini-batch.
    workers : int
        Worker processes (one CPU thread each); 2 uses both cores of the reference machine.
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
    sngd_cap: float = 1.0
    sps_c: float = 0.5
    seeds: int = 5
    seed: int = 0
    epochs: int = 20  # 30 before the checks review (--set epochs=30): the full reproduction's budget (docs)
    batch_size: int = 32
    workers: int = 2
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
        for name in ("seeds", "epochs", "batch_size", "workers", "probes"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        check_scalar("seed", self.seed, kind=int, low=0)

    def compare(
        self,
        build: Callable[[Any, int], Setup],
        *,
        checkpoint_dir: str | Path | None = None,
        bar: Callable[..., Any] | None = None,
    ) -> Comparison:
        """Every optimizer of this config (each with its lr), for ``seeds`` seeds from ``seed``.

        :func:`compare_optimizers` with this config's settings; ``build(self, seed)`` builds each trial.

        Parameters
        ----------
        build : callable
            ``build(config, seed) -> Setup``, a module-level function (it is sent to worker processes).
        checkpoint_dir : path, optional
            Folder of per-trial checkpoints, resumed when the config is unchanged.
        bar : callable, optional
            ``bar(iterable, total=..., desc=...)`` progress bar over trials.

        Returns
        -------
        Comparison
        """
        return compare_optimizers(
            build,
            self,
            self.optimizers,
            self.lrs,
            [self.seed + i for i in range(self.seeds)],
            epochs=self.epochs,
            batch_size=self.batch_size,
            sngd_cap=self.sngd_cap,
            sps_c=self.sps_c,
            workers=self.workers,
            checkpoint_dir=checkpoint_dir,
            bar=bar,
        )


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
    """

    frame: pd.DataFrame
    norms: pd.DataFrame
    entries: pd.DataFrame
    attention: pd.DataFrame


def _attention_rows(model: nn.Module, inputs: torch.Tensor, label: str) -> pd.DataFrame:
    weights = first_token_attention(model, inputs).double()  # (k, T)
    k, T = weights.shape
    return pd.DataFrame(
        {
            "optimizer": label,
            "sample": torch.arange(k).repeat_interleave(T).numpy(),
            "token": torch.arange(T).repeat(k).numpy(),
            "weight": weights.flatten().numpy(),
        }
    )


def _rated(trial: Trial) -> OptimizerSpec:
    """The trial's optimizer with its rate set: ``lr``, or ``max_step`` for an optimizer without a step size (SPS's
    threshold, implicit-bias-ngd A8), unless the string sets it."""
    spec = parse_optimizer(trial.optimizer)
    rate = "lr" if spec.entry.takes_lr else "max_step"
    return spec if spec.get(rate) is not None else spec.with_options(**{rate: trial.lr})


def _run_trial(
    build: Callable[[Any, int], Setup],
    config: Any,
    trial: Trial,
    probe: bool,
    options: dict[str, Any],
    checkpoint_dir: Path | None,
) -> dict[str, pd.DataFrame]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # restored below: the caller's setting is left as it was
    try:
        setup = build(config, trial.seed)
        out = {}
        if probe:
            out["init_entries"] = projection_entries(setup.model).assign(optimizer="init")
            out["init_attention"] = _attention_rows(setup.model, setup.probe_inputs, "init")
        optimizer = make_optimizer(
            _rated(trial), setup.model.parameters(), sngd_cap=options["sngd_cap"], sps_c=options["sps_c"]
        )
        # the name carries a hash of everything that shapes the trial: a checkpoint of another config is never resumed
        key = config_hash({"config": dataclasses.asdict(config), "trial": dataclasses.asdict(trial), **options})
        stem = re.sub(r"[^\w.-]+", "_", trial.optimizer)  # "md:1.1,normalized=false" -> "md_1.1_normalized_false"
        checkpoint = None if checkpoint_dir is None else checkpoint_dir / f"{stem}-seed{trial.seed}-{key}.pt"
        history = fit_classifier(
            setup.model,
            optimizer,
            setup.data,
            epochs=options["epochs"],
            batch_size=options["batch_size"],
            seed=trial.seed,
            checkpoint=checkpoint,
            metrics=setup.metrics,
        )
        labels = {"optimizer": trial.optimizer, "lr": trial.lr, "seed": trial.seed, "diverged": not history.ok}
        out["frame"] = history.frame.drop(columns="run").assign(**labels)
        out["norms"] = history.norms.assign(optimizer=trial.optimizer, seed=trial.seed)
        if probe:
            out["entries"] = projection_entries(setup.model).assign(optimizer=trial.optimizer)
            out["attention"] = _attention_rows(setup.model, setup.probe_inputs, trial.optimizer)
        return out
    finally:
        torch.set_num_threads(threads)


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
    checkpoint_dir: str | Path | None = None,
    bar: Callable[..., Any] | None = None,
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
        1 trains in this process; more trains in that many spawned processes, one CPU thread each.
    checkpoint_dir : path, optional
        Folder of per-trial checkpoints (``<optimizer>-seed<seed>-<hash of config, lr and options>.pt``, the
        optimizer's characters other than letters, digits, ``.`` and ``-`` written ``_``); existing
        ones are resumed, and a changed config starts afresh instead of resuming another config's trial.
    bar : callable, optional
        ``bar(iterable, total=..., desc=...)`` progress bar over trials (``RunContext.bar``).

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
    check_scalar("workers", workers, kind=int, low=1)
    directory = None if checkpoint_dir is None else Path(checkpoint_dir)
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
    options = {"epochs": epochs, "batch_size": batch_size, "sngd_cap": sngd_cap, "sps_c": sps_c}
    trials = [Trial(name, float(lr), int(seed)) for seed in seeds for name, lr in zip(optimizers, lrs)]
    probes = [trial.seed == seeds[0] for trial in trials]
    tasks = [
        partial(_run_trial, build, config, trial, probe, options, directory) for trial, probe in zip(trials, probes)
    ]
    wrap = bar if bar is not None else (lambda iterable, **_: iterable)
    if workers == 1:
        results = [task() for task in wrap(tasks, total=len(tasks), desc="trials")]
    else:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(task) for task in tasks]
            results = [future.result() for future in wrap(futures, total=len(futures), desc="trials")]
    first_init = next(r for r, probe in zip(results, probes) if probe)

    def gather(key: str) -> pd.DataFrame:
        return pd.concat([r[key] for r in results if key in r], ignore_index=True)

    return Comparison(
        frame=gather("frame"),
        norms=gather("norms"),
        entries=pd.concat([first_init["init_entries"], gather("entries")], ignore_index=True),
        attention=pd.concat([first_init["init_attention"], gather("attention")], ignore_index=True),
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
