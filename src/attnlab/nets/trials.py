"""Train a set of trials (an optimizer, its rate and a seed each) of one task, stacked, in one or more processes.

Spec: implicit-bias-ngd §9 fig. 1, 4, 6, 7 (SGD, SNGD, SPS, Adam on real data); mirror-descent-lp §9 E4-E5 (l_p
mirror descent; K/Q/V entries and first-token attention of the trained models).

Every trial builds its model and data from ``build(config, seed)``. The trials are sorted by optimizer and rate,
cut into ``workers`` chunks, and each chunk trains as one stack (:func:`~attnlab.nets.stacked.fit_stacked`) on one
CPU thread, in this process or in a spawned one, checkpointed after every epoch under a name that carries a hash of
everything that shapes it and, when the caller gives one, a key of the code that computes it (an experiment's, the
fingerprint its record holds). A checkpoint of the same stack made by other code is not resumed: a warning says so,
the file is removed and the stack is computed again, as the runner computes a stale run again. :func:`train_trials` returns each trial's tables in the order the trials were given.
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import warnings
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
from attnlab.nets.chance import majority_rate
from attnlab.nets.datasets.split import Split, train_test_split
from attnlab.nets.probes import first_token_attention, hoyer_sparsity, projection_entries
from attnlab.nets.stacked import fit_stacked

__all__ = ["Setup", "Trial", "train_trials"]


@dataclass
class Setup:
    """What ``build(config, seed)`` returns for one trial.

    Attributes
    ----------
    model : nn.Module
        Freshly initialised from ``seed``; has ``attention(inputs)`` for the attention maps.
    data : Split
        The same for every seed of a config.
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


def _qkv(model: nn.Module) -> torch.Tensor:
    """Every key, query and value weight entry of ``model``, flattened (float64)."""
    return torch.tensor(projection_entries(model)["value"].to_numpy())


def _sparsity(trial: Trial, start: torch.Tensor, end: torch.Tensor) -> pd.DataFrame:
    """Hoyer sparsity of the K/Q/V entries at the start and end of a trial, and of what training added (NaN when it
    added nothing: a run rolled back to its start, whose change is all zeros)."""
    change = end - start
    return pd.DataFrame(
        [
            {
                "optimizer": trial.optimizer,
                "seed": trial.seed,
                "qkv_hoyer_init": hoyer_sparsity(start),
                "qkv_hoyer": hoyer_sparsity(end),
                "qkv_hoyer_change": hoyer_sparsity(change) if bool(change.any()) else math.nan,
                "qkv_change_ratio": float(torch.linalg.vector_norm(change) / torch.linalg.vector_norm(start)),
            }
        ]
    )


def _same_data(first: Split, other: Split) -> bool:
    return all(
        torch.equal(getattr(first, name), getattr(other, name)) for name in ("x_train", "y_train", "x_test", "y_test")
    )


def _train_chunk(
    build: Callable[[Any, int], Setup],
    config: Any,
    trials: Sequence[Trial],
    probe: Sequence[bool],
    options: dict[str, Any],
    checkpoint: Path | None,
    validation: tuple[float, int] | None,
) -> list[dict[str, pd.DataFrame]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # restored below: the caller's setting is left as it was
    try:
        setups = [build(config, trial.seed) for trial in trials]
        data = setups[0].data
        if not all(_same_data(data, s.data) for s in setups[1:]):
            raise ValidationError(
                "build(config, seed) returned different data for different seeds; fix the data by config"
            )
        metrics, scored = setups[0].metrics, {}
        if validation is not None:  # tuning: train on part of the training set, score on the rest
            data = train_test_split(data.x_train, data.y_train, test_fraction=validation[0], seed=validation[1])
            metrics, scored = {}, {"chance": majority_rate(data.y_test), "scored": len(data.y_test)}
        out: list[dict[str, pd.DataFrame]] = [{} for _ in trials]
        starts = [_qkv(s.model) for s in setups]
        for o, setup, p in zip(out, setups, probe):
            if p:
                o["init_entries"] = projection_entries(setup.model).assign(optimizer="init")
                o["init_attention"] = _attention_rows(setup.model, setup.probe_inputs, "init")
        histories = fit_stacked(
            [s.model for s in setups],
            [(t.optimizer, t.lr) for t in trials],
            [t.seed for t in trials],
            data,
            epochs=options["epochs"],
            batch_size=options["batch_size"],
            sngd_cap=options["sngd_cap"],
            sps_c=options["sps_c"],
            checkpoint=checkpoint,
            metrics=metrics,
            eval_every=options["eval_every"],
            last_only=validation is not None,  # tuning reads each run's last validation score, nothing else
        )
        for o, trial, setup, history, start, p in zip(out, trials, setups, histories, starts, probe):
            labels = {
                "optimizer": trial.optimizer,
                "lr": trial.lr,
                "seed": trial.seed,
                "diverged": not history.ok,
                **scored,
            }
            o["frame"] = history.frame.assign(**labels)
            o["norms"] = history.norms.assign(optimizer=trial.optimizer, seed=trial.seed)
            o["sparsity"] = _sparsity(trial, start, _qkv(setup.model))
            if p:
                o["entries"] = projection_entries(setup.model).assign(optimizer=trial.optimizer)
                o["attention"] = _attention_rows(setup.model, setup.probe_inputs, trial.optimizer)
        return out
    finally:
        torch.set_num_threads(threads)


def _chunks(order: list[int], workers: int) -> list[list[int]]:
    """``order`` cut into at most ``workers`` contiguous parts of near-equal size."""
    parts = min(workers, len(order))
    size, extra = divmod(len(order), parts)
    bounds = [i * size + min(i, extra) for i in range(parts + 1)]
    return [order[bounds[i] : bounds[i + 1]] for i in range(parts)]


#: How :func:`~attnlab.experiments.real.result.code_key` ends a key of code whose source cannot be read (unique to
#: the call: its checkpoints are never resumed).
UNREADABLE_CODE = "u"


def _drop_stale(directory: Path, key: str, current: Path) -> None:
    """Remove the checkpoints of the stack ``key`` made by other code than ``current``'s (another code hash in the
    name, or none: an older attnlab's), saying so: their runs are computed again, never resumed by this code."""
    why = (
        "this call's code has no readable source (``build`` or its config defined in a notebook or an interactive "
        "session, or attnlab's source edited since this process imported it), so no checkpoint of it can be "
        "recognised as its own; define them in a file to resume"
        if current.stem.endswith(UNREADABLE_CODE)
        else "it was made by other code (attnlab's or the task's source, or a library version, changed since, or "
        "an older attnlab wrote it)"
    )
    for old in sorted(directory.glob(f"runs-{key}*.pt")):
        if old != current and (old.name == f"runs-{key}.pt" or old.name.startswith(f"runs-{key}-")):
            warnings.warn(
                f"checkpoint {old} is not resumed, and its stack is computed again: {why}",
                RuntimeWarning,
                stacklevel=4,
            )
            old.unlink(missing_ok=True)


def _tasks(
    build: Callable[[Any, int], Setup],
    config: Any,
    trials: Sequence[Trial],
    group: list[int],
    options: dict[str, Any],
    workers: int,
    directory: Path | None,
    probe_seed: int | None,
    validation: tuple[float, int] | None,
    code: str | None,
) -> list[tuple[list[int], Callable[[], list[dict[str, pd.DataFrame]]]]]:
    """The stacks of the trials ``group`` (indices into ``trials``, one epoch budget): ``(indices, task)`` pairs;
    ``code`` is :func:`train_trials`'s, part of each checkpoint's name when given."""
    tasks = []
    for chunk in _chunks(group, workers):
        part = [trials[i] for i in chunk]
        # the name carries a hash of everything that shapes the stack: another config's runs are never resumed
        key = config_hash(
            {
                "config": dataclasses.asdict(config),
                "trials": [dataclasses.asdict(t) for t in part],
                "validation": validation,
                **options,
            }
        )
        checkpoint = None if directory is None else directory / f"runs-{key}{f'-{code}' if code else ''}.pt"
        if checkpoint is not None and code:
            _drop_stale(directory, key, checkpoint)  # this code's alone
        probe = [t.seed == probe_seed for t in part]
        tasks.append((chunk, partial(_train_chunk, build, config, part, probe, options, checkpoint, validation)))
    return tasks


def train_trials(
    build: Callable[[Any, int], Setup],
    config: Any,
    trials: Sequence[Trial],
    *,
    epochs: int,
    batch_size: int,
    sngd_cap: float | None = None,
    sps_c: float | None = None,
    workers: int = 1,
    checkpoint_dir: str | Path | None = None,
    bar: Callable[..., Any] | None = None,
    probe_seed: int | None = None,
    validation: tuple[float, int] | None = None,
    eval_every: int = 1,
    epochs_of: Mapping[str, int] | None = None,
    code: str | None = None,
) -> list[dict[str, pd.DataFrame]]:
    """Train every trial (stacked, in ``workers`` processes); each one's tables, in the order of ``trials``.

    Parameters
    ----------
    build : callable
        ``build(config, seed) -> Setup``, a module-level function (it is sent to worker processes); the data must
        not depend on the seed.
    config : any
        Passed to ``build`` (a frozen dataclass config).
    trials : sequence of Trial
        At least one.
    epochs, batch_size : int
    sngd_cap, sps_c : float, optional
        See :func:`~attnlab.nets.make_optimizer`.
    workers : int, default=1
        1 trains in this process; more cut the trials into that many stacks, each in a spawned process with one
        CPU thread.
    checkpoint_dir : path, optional
        Folder of checkpoints (``runs-<hash of config, trials and options>[-<code>].pt``, one per stack); existing
        ones are resumed, and a changed config starts afresh instead of resuming another config's runs.
    bar : callable, optional
        ``bar(iterable, total=..., desc=...)`` progress bar over the stacks (``RunContext.bar``).
    probe_seed : int, optional
        Trials of this seed also record their K/Q/V entries and first-token attention (before and after).
    validation : (float, int), optional
        ``(fraction, seed)``: train on the training set less a validation part of that fraction (split by that
        seed) and report the validation part in the ``test_*`` columns, with no extra metrics, in each trial's last
        row alone (its training columns NaN), with ``chance`` (the validation part's majority-class rate) and
        ``scored`` (its size): for tuning.
    eval_every : int, default=1
        Epochs between recorded rows (see :func:`~attnlab.nets.stacked.fit_stacked`).
    epochs_of : mapping of str to int, optional
        ``{optimizer: epochs}``: that optimizer's trials train for that many epochs instead of ``epochs`` (in
        stacks of their own).
    code : str, optional
        A key of the code that computes the trials, in each checkpoint's name: a stack's checkpoint of another key
        (or of none) is removed with a ``RuntimeWarning`` and the stack computed again, never resumed. The real-data
        experiments pass :func:`~attnlab.experiments.real.result.code_key` (a hash of the fingerprint their record
        holds). Required with ``checkpoint_dir``: checkpoints keyed by the config alone would be resumed by changed
        code.

    Returns
    -------
    list of dict
        Per trial: ``frame`` (the :func:`~attnlab.nets.fit_classifier` columns but ``run``, plus ``optimizer``,
        ``lr``, ``seed`` and ``diverged``, whether the run diverged: its rows end at its last good epoch), ``norms``, ``sparsity`` (Hoyer sparsity of the K/Q/V entries at init, at the end and of their
        change, and the relative size of the change); for probed trials also ``entries``, ``attention``,
        ``init_entries`` and ``init_attention``.

    Raises
    ------
    ValidationError
        On no trials, ``workers < 1``, an ``epochs_of`` budget below 1, ``checkpoint_dir`` without ``code``, or a
        ``build`` whose data depends on the seed.
    """
    if not trials:
        raise ValidationError("trials is empty; pass at least one Trial")
    check_scalar("workers", workers, kind=int, low=1)
    budgets = dict(epochs_of or {})
    for budget in budgets.values():
        check_scalar("epochs_of", budget, kind=int, low=1)
    directory = None if checkpoint_dir is None else Path(checkpoint_dir)
    if directory is not None:
        if not isinstance(code, str) or not code:
            raise ValidationError(
                "checkpoint_dir needs code, a key of the code that computes the trials: checkpoints keyed by the "
                "config alone would be resumed after build or attnlab changed; pass "
                "code=attnlab.experiments.real.result.code_key(build, config)"
            )
        directory.mkdir(parents=True, exist_ok=True)
    options = {
        "epochs": epochs,
        "batch_size": batch_size,
        "sngd_cap": sngd_cap,
        "sps_c": sps_c,
        "eval_every": eval_every,
    }
    first: dict[Any, int] = {}
    for trial in trials:  # runs of one optimizer are neighbours (one group of the stack), by rate within it
        first.setdefault(trial.optimizer, len(first))
        first.setdefault((trial.optimizer, trial.lr), len(first))
    order = sorted(
        range(len(trials)), key=lambda i: (first[trials[i].optimizer], first[(trials[i].optimizer, trials[i].lr)], i)
    )
    tasks = []
    for budget in dict.fromkeys(budgets.get(trials[i].optimizer, epochs) for i in order):
        group = [i for i in order if budgets.get(trials[i].optimizer, epochs) == budget]
        budget_options = {**options, "epochs": budget}
        tasks += _tasks(build, config, trials, group, budget_options, workers, directory, probe_seed, validation, code)
    wrap = bar if bar is not None else (lambda iterable, **_: iterable)
    if workers == 1 or len(tasks) == 1:
        results = [task() for _, task in wrap(tasks, total=len(tasks), desc="stacks")]
    else:
        with ProcessPoolExecutor(min(workers, len(tasks)), mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(task) for _, task in tasks]
            results = [future.result() for future in wrap(futures, total=len(futures), desc="stacks")]
    out: list[dict[str, pd.DataFrame]] = [{} for _ in trials]
    for (chunk, _), result in zip(tasks, results):
        for i, tables in zip(chunk, result):
            out[i] = tables
    return out
