"""Train many runs of one small classifier at once: their parameters stacked on a leading runs axis, one vmapped
step for all of them.

Spec: implicit-bias-ngd §4 A8 (SGD, SNGD, SPS, Adam on mini-batches) and §9; mirror-descent-lp §9 E4-E5 (l_p mirror
descent on every parameter of a transformer).

A run is a model (one architecture for all runs, each its own initial weights), an optimizer with its rate, and a
seed (the mini-batch order). :func:`fit_stacked` does what :func:`~attnlab.nets.fit_classifier` does for each run,
for R runs together: the R models' parameters become tensors of shape ``(R, ...)``
(:func:`torch.func.stack_module_state`), and one forward and backward pass of :func:`torch.func.vmap` over
:func:`torch.func.functional_call` gives every run its mini-batch loss and gradient (the runs do not interact: the
gradient of the summed losses is each run's own gradient). On small models a step costs little more than one run's
step, where R separate runs pay R times the per-step overhead of the framework. A model with dropout takes one
forward pass per run instead, each with its own RNG state, so a run's dropout masks are its own seed's: on the CPU
its own CPU RNG state, on a GPU its own state of that device's CUDA RNG too (dropout there draws from it).

Each optimizer then updates its own runs (neighbouring runs that share an optimizer string are one group, a slice of
the stack, their rates one per-run tensor; Polyak's cap, which takes no tensor, makes a group per rate). Every optimizer of attnlab's registry runs its update rule (:mod:`attnlab.optim.transforms`) with a runs
axis, so gradient norms, Polyak step sizes, caps and Adam's moments are per run, never over the stack. Batched matrix products round differently from
one run's, so a stacked run equals the same run trained alone up to float32 rounding, not to the bit.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from attnlab._io import atomic_write
from attnlab._numerics import all_finite
from attnlab._validation import ValidationError, check_scalar, check_seed
from attnlab.checkpoint import check_identity, cuda_rng_states, fork_rngs, read_checkpoint, restore_cuda_rng_states
from attnlab.nets.classifier import _epoch_row, check_resumed_epoch, layer_norms, run_identity
from attnlab.nets.datasets.split import Split
from attnlab.nets.optimizers import harness_spec
from attnlab.optim import OptimizerSpec
from attnlab.optim.transforms import Rule, run_rule
from attnlab.training.callbacks import callback_list
from attnlab.training.result import COMPLETED, DIVERGED, TrainingResult

__all__ = ["fit_stacked"]

_KIND = "fit_stacked/2"  # the front door and format of its checkpoints (2: the identity names metrics, data, dtypes)


@dataclass
class _Group:
    """Runs that share an optimizer string (and, for an optimizer without a step size, a rate): the slice
    ``start:stop`` of the stack; their rates enter the rule as one per-run tensor."""

    start: int
    stop: int
    leaves: list[torch.Tensor]  # one (stop - start, ...) tensor per parameter, requires_grad
    rule: Rule
    state: list[Any] = field(default_factory=list)


def _rated(name: str, lr: float) -> OptimizerSpec:
    """The optimizer ``name`` with its rate set: ``lr``, or ``max_step`` for an optimizer without a step size (SPS's
    threshold, implicit-bias-ngd A8), unless the string sets it."""
    spec = OptimizerSpec.parse(name)
    rate = "lr" if spec.entry.takes_lr else "max_step"
    return spec if spec.get(rate) is not None else spec.with_options(**{rate: lr})


def _rule(name: str, rates: list[float], names: list[str], sngd_cap: float | None, sps_c: float | None) -> Rule:
    """The update rule of ``name`` for a group of runs at ``rates`` (one per run), with a runs axis."""
    spec = harness_spec(name, sngd_cap=sngd_cap, sps_c=sps_c)
    if not spec.entry.takes_lr or spec.get("lr") is not None:  # one rate for the group (see _groups)
        return _rated(str(spec), rates[0]).rule(names, optimal_loss=0.0)  # L* = 0, as the class's default
    lr = rates[0] if len(set(rates)) == 1 else torch.tensor(rates, dtype=torch.float64)  # one float: SGD to the bit
    return spec.rule(names, lr=lr, optimal_loss=0.0)


def _groups(
    names: list[str],
    stacked: list[torch.Tensor],
    optimizers: Sequence[tuple[str, float]],
    sngd_cap: float | None,
    sps_c: float | None,
) -> list[_Group]:
    groups, start = [], 0
    while start < len(optimizers):
        name, lr = optimizers[start]
        one_rate = not OptimizerSpec.parse(name).entry.takes_lr  # Polyak's cap is a float: a group per rate
        stop = start
        while stop < len(optimizers) and optimizers[stop][0] == name and (not one_rate or optimizers[stop][1] == lr):
            stop += 1
        leaves = [p[start:stop].detach().clone().requires_grad_(True) for p in stacked]
        rule = _rule(name, [r for _, r in optimizers[start:stop]], names, sngd_cap, sps_c)
        groups.append(_Group(start, stop, leaves, rule, rule.init([p.detach() for p in leaves])))
        start = stop
    return groups


def _step(groups: list[_Group], losses: torch.Tensor) -> None:
    """Each group's update from the gradients in its leaves' ``.grad``, per run. A run whose loss is not finite has
    diverged (its caller puts it back to its last finite weights): its rule reads the loss 1 in its place, so a
    loss-reading rule (Polyak, SPS, a loss normaliser) steps the other runs instead of refusing a NaN loss."""
    losses = losses.detach().to(torch.float64)
    losses = torch.where(torch.isfinite(losses), losses, torch.ones_like(losses))
    for g in groups:
        params = [p.detach() for p in g.leaves]
        log_risk = losses[g.start : g.stop].log()  # Polyak/SPS: each run's batch loss
        new, g.state = run_rule(g.rule, params, [p.grad for p in g.leaves], g.state, run_dims=1, log_risk=log_risk)
        for p, value in zip(params, new):
            p.copy_(value)


class _PerRun:
    """Each run's forward pass on its own batch, one run at a time, with its own global RNG states: the dropout masks
    :func:`fit_classifier` draws for that seed (from ``torch.manual_seed(seed)``), whatever the other runs are.

    Per run it keeps the CPU RNG state and, when the batches are on the CUDA ``device``, that device's CUDA RNG state
    (dropout on a GPU draws its masks there, not from the CPU's); both are set before the run's forward pass and read
    back after it. Built inside :func:`fit_stacked`'s :func:`~attnlab.checkpoint.fork_rngs`, which puts the caller's
    states back. :func:`torch.func.vmap` with ``randomness="different"`` draws every run's masks from one RNG, so a
    run's masks would depend on its neighbours; a model without dropout keeps the one vmapped pass.

    The GPU path is tested with a stand-in CUDA RNG (tests/nets/test_gpu_rng.py): no GPU was at hand."""

    def __init__(self, base: nn.Module, seeds: Sequence[int], device: torch.device | None) -> None:
        self.base, self.device = base, device
        self.states: list[torch.Tensor] = []
        self.device_states: list[torch.Tensor] = []
        for seed in seeds:  # as torch.manual_seed(seed) seeds a run alone: every device, CUDA only once initialised
            torch.manual_seed(seed)
            self.states.append(torch.get_rng_state())
            if device is not None:
                self.device_states.append(torch.cuda.get_rng_state(device))

    def __call__(self, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], x: torch.Tensor):
        out = []
        for r, state in enumerate(self.states):
            torch.set_rng_state(state)
            if self.device is not None:
                torch.cuda.set_rng_state(self.device_states[r], self.device)
            own = ({n: p[r] for n, p in params.items()}, {n: b[r] for n, b in buffers.items()})
            out.append(functional_call(self.base, own, (x[r],)))
            self.states[r] = torch.get_rng_state()
            if self.device is not None:
                self.device_states[r] = torch.cuda.get_rng_state(self.device)
        return torch.stack(out)

    def saved(self) -> dict[str, list[torch.Tensor] | None]:
        """Every run's RNG states for a checkpoint: the CPU's and, on a GPU, the device's (None on the CPU)."""
        device = None if self.device is None else [s.clone() for s in self.device_states]
        return {"run_rngs": [s.clone() for s in self.states], "run_cuda_rngs": device}

    def load(self, state: Mapping[str, Any]) -> None:
        """Put back what :meth:`saved` wrote. A checkpoint without device states (written on the CPU, or before they
        were saved) leaves a GPU run's device states as seeded."""
        self.states = [s.clone() for s in state["run_rngs"]]
        device = state.get("run_cuda_rngs")
        if self.device is not None and device is not None:
            self.device_states = [s.clone() for s in device]


def _cuda_device(x: torch.Tensor) -> torch.device | None:
    """The CUDA device whose RNG dropout on ``x`` draws from, or None for a tensor off CUDA (the CPU RNG's)."""
    return x.device if x.device.type == "cuda" else None


def _forward(base: nn.Module, model: nn.Module, seeds: Sequence[int], device: torch.device | None) -> Callable:
    """Every run's logits ``(R, b, classes)`` from the stacked parameters, buffers and batches ``(R, b, ...)``: one
    vmapped pass, or :class:`_PerRun` (its CUDA RNG that of ``device``) when ``model`` has a dropout layer with
    ``p > 0``."""
    if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return _PerRun(base, seeds, device)
    return vmap(lambda p, b, x: functional_call(base, (p, b), (x,)), randomness="different")


def _check_runs(models: Sequence[nn.Module], optimizers: Sequence[tuple[str, float]], seeds: Sequence[int]) -> None:
    if not models or len(models) != len(optimizers) or len(models) != len(seeds):
        raise ValidationError(
            f"got {len(models)} models, {len(optimizers)} optimizers and {len(seeds)} seeds; pass one of each per run "
            "(at least one run)"
        )
    names = [[(n, p.shape, p.dtype) for n, p in m.named_parameters()] for m in models]
    if any(type(m) is not type(models[0]) or n != names[0] for m, n in zip(models, names)):
        raise ValidationError(
            "the models differ in class or in their parameters' names, shapes or dtypes; stack runs of one "
            "architecture (build every run's model with the same settings, only the seed differs)"
        )
    for seed in seeds:
        check_seed("seed", seed)


def fit_stacked(
    models: Sequence[nn.Module],
    optimizers: Sequence[tuple[str, float]],
    seeds: Sequence[int],
    data: Split,
    *,
    epochs: int,
    batch_size: int,
    sngd_cap: float | None = None,
    sps_c: float | None = None,
    checkpoint: str | Path | None = None,
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
    eval_batch_size: int = 512,
    eval_every: int = 1,
    last_only: bool = False,
    progress: bool = False,
    desc: str = "",
) -> list[TrainingResult]:
    """Train R runs of one architecture together on mini-batches of ``data``: :func:`fit_classifier` for each.

    Spec: implicit-bias-ngd §4 A8 (mini-batch steps; SPS takes each run's mini-batch loss).

    Parameters
    ----------
    models : sequence of nn.Module
        One per run, all of one class with the same parameters (names, shapes, dtypes); each maps a batch of
        inputs to logits ``(batch, num_classes)``. They are left with their run's final weights.
    optimizers : sequence of (str, float)
        Each run's optimizer string and rate (``lr``, or Polyak's ``max_step``); neighbouring runs that share the
        string are stepped as one group.
    seeds : sequence of int
        Each run's seed: its mini-batch order (a private ``torch.Generator``, as in :func:`fit_classifier`) and its
        dropout masks (the global RNGs seeded with it by ``torch.manual_seed``, as in :func:`fit_classifier`): a run
        with dropout is the run trained alone whatever its neighbours, on the CPU (each run its own CPU RNG state)
        and on a GPU (each run its own state of that device's CUDA RNG too). A model with dropout takes one forward
        pass per run instead of one vmapped pass for all. All of it runs inside
        :func:`attnlab.checkpoint.fork_rngs`: the caller's RNG states are left as they were, the CPU's always and
        every GPU's too on a GPU run.
    data : Split
    epochs, batch_size : int
        As in :func:`fit_classifier`; every run sees the same number of batches.
    sngd_cap, sps_c : float, optional
        SNGD's cap and SPS's constant (see :func:`~attnlab.nets.make_optimizer`).
    checkpoint : path, optional
        File saved (atomically) after every epoch and resumed from when it exists: every run's weights, the
        optimizers' states, the RNG states (each run's own dropout RNG states among them, its GPU's too on a GPU)
        and the rows so far; a resumed run ends bit-identical to an uninterrupted one. The runs must be given the
        same way again, with the same ``sngd_cap`` and ``sps_c``.
    metrics : mapping of str to callable, optional
        Extra per-epoch metrics ``name -> metric(state) -> float`` of each run's state ``{"model", "epoch"}``
        (:class:`attnlab.metrics.Metric`), computed in eval mode.
    eval_batch_size : int, default=512
    eval_every : int, default=1
        Rows (and layer norms) at epoch 0, every ``eval_every`` epochs and the last epoch; ``epochs`` records only
        the first and the last.
    last_only : bool, default=False
        Only each run's last row (and layer norms): at ``epochs``, or at the last finite epoch of a run that
        diverged; its ``train_loss`` and ``train_accuracy`` are NaN, as only the test part is evaluated. What a
        tuning run reads (its validation score at the end), without the evaluations it would not read;
        ``eval_every`` is then unused.
    progress : bool, default=False
        A bar over the optimizer steps (when stderr is a terminal).
    desc : str, default=""
        Label of the bar.

    Returns
    -------
    list of TrainingResult
        One per run, in order, as :func:`fit_classifier` returns it (``frame`` without its ``run`` column,
        ``status``, ``last_step``, ``model``, ``norms``). A run whose mini-batch loss or parameters turn non-finite
        goes back to its weights at the end of its last finite epoch, gets a row there (even one ``eval_every``
        skips, as :func:`fit_classifier`'s last row) and none past it, its status ``"diverged"``, its ``last_step``
        that epoch, and stops; the other runs go on.

    Raises
    ------
    ValidationError
        On runs that do not line up (counts, architectures), an optimizer whose update may mix runs,
        bad ``epochs``/``batch_size``, or a checkpoint written by something else than ``fit_stacked`` (or by an
        older attnlab), for other runs (other seeds, batch size, optimizers, ``sngd_cap``, ``sps_c``, metric names,
        data or parameter dtypes) or past ``epochs``: all checked before any training.
    """
    check_scalar("epochs", epochs, kind=int, low=1)
    check_scalar("batch_size", batch_size, kind=int, low=1)
    check_scalar("eval_batch_size", eval_batch_size, kind=int, low=1)
    check_scalar("eval_every", eval_every, kind=int, low=1)
    _check_runs(models, optimizers, seeds)
    metrics = dict(metrics or {})
    path = None if checkpoint is None else Path(checkpoint)
    names = [name for name, _ in models[0].named_parameters()]
    params, buffers = stack_module_state(list(models))
    base = copy.deepcopy(models[0]).to("meta").train()
    groups = _groups(names, [params[n] for n in names], optimizers, sngd_cap, sps_c)
    identity = {
        "seeds": list(seeds),
        "batch_size": batch_size,
        "optimizers": [list(o) for o in optimizers],
        "sngd_cap": sngd_cap,
        "sps_c": sps_c,
        **(run_identity(models[0], data, metrics) if path is not None else {}),
    }
    generators = [torch.Generator() for _ in seeds]
    with fork_rngs():  # _PerRun seeds the global RNGs: every one the caller's again on exit
        forward = _forward(base, models[0], seeds, _cuda_device(data.x_train))
        per_run = forward if isinstance(forward, _PerRun) else None  # each run's dropout RNGs, saved and resumed
        evaluation = (metrics, eval_batch_size, not last_only)  # not last_only: every row, both parts evaluated
        rows, norms, active, start_epoch, step, seconds = _begin(
            path, identity, groups, generators, models, names, data, evaluation, epochs, per_run
        )
        planned = epochs * math.ceil(len(data.y_train) / batch_size)
        calls = callback_list(None, None if progress else False, desc or "fit_stacked")
        calls.start(planned)
        for epoch in range(start_epoch, epochs + 1):
            if not any(active):
                break
            last_finite = [[p.detach().clone() for p in g.leaves] for g in groups]
            before = (step, seconds)  # the last finite epoch's step count and time, for a run that diverges in this one
            started = time.perf_counter()
            failed, step = _epoch_steps(
                groups, names, forward, buffers, data, generators, batch_size, active, last_finite, calls, step
            )
            seconds += time.perf_counter() - started
            failed = _settle(groups, last_finite, active, failed)
            _write_models(models, groups, names)
            # diverged: back at epoch - 1, its row there (as fit_classifier's last row) when eval_every skipped it
            late = [
                a and f and not (kept and kept[-1]["epoch"] == epoch - 1) for kept, a, f in zip(rows, active, failed)
            ]
            _record(models, data, epoch - 1, *before, *evaluation, rows, norms, late)
            active = [a and not f for a, f in zip(active, failed)]  # diverged: its last good state, no more rows
            if (epoch % eval_every == 0 and not last_only) or epoch == epochs:
                _record(models, data, epoch, step, seconds, *evaluation, rows, norms, active)
            if path is not None:
                _save(path, groups, generators, identity, rows, norms, active, epoch, step, seconds, per_run)
        calls.end()
    return [
        TrainingResult(
            frame=pd.DataFrame(r),
            status=[COMPLETED if a else DIVERGED],
            last_step=[int(r[-1]["epoch"])],
            model=model,
            extra={"norms": pd.DataFrame(n)},
        )
        for r, n, a, model in zip(rows, norms, active, models)
    ]


def _begin(
    path: Path | None,
    identity: dict[str, Any],
    groups: list[_Group],
    generators: list[torch.Generator],
    models: Sequence[nn.Module],
    names: list[str],
    data: Split,
    evaluation: tuple[dict[str, Callable], int, bool],
    epochs: int,
    per_run: _PerRun | None,
) -> tuple[list[list[dict]], list[list[dict]], list[bool], int, int, float]:
    """The runs' rows, norms and flags, the first epoch, the step and the seconds: fresh (seeding the RNGs and
    recording epoch 0, when ``evaluation`` (metrics, batch size, every row) asks for every row) or resumed from the
    checkpoint at ``path`` (at most at epoch ``epochs``)."""
    state = read_checkpoint(path) if path is not None else None
    if state is None:
        torch.manual_seed(identity["seeds"][0])
        for g, seed in zip(generators, identity["seeds"]):
            g.manual_seed(seed)
        rows: list[list[dict]] = [[] for _ in models]
        norms: list[list[dict]] = [[] for _ in models]
        _record(models, data, 0, 0, 0.0, *evaluation, rows, norms, [evaluation[2]] * len(models))
        return rows, norms, [True] * len(models), 1, 0, 0.0
    check_identity(path, state, _KIND, identity)  # before anything of it is used
    check_resumed_epoch(path, state["epoch"], epochs)
    _load(groups, state, generators, per_run)
    _write_models(models, groups, names)
    return state["rows"], state["norms"], state["active"], state["epoch"] + 1, state["step"], state["seconds"]


def _record(
    models: Sequence[nn.Module],
    data: Split,
    epoch: int,
    step: int,
    seconds: float,
    metrics: dict[str, Callable],
    eval_batch_size: int,
    train: bool,
    rows: list[list[dict]],
    norms: list[list[dict]],
    active: list[bool],
) -> None:
    """Each active run's row and layer norms at ``epoch``, appended in place (``train``: evaluated on the
    training part too, else its columns NaN)."""
    for r, model in enumerate(models):
        if active[r]:
            row = _epoch_row(model, data, epoch, step, metrics, eval_batch_size, train=train)
            rows[r].append(row | {"seconds": seconds})
            norms[r] += [{"epoch": epoch, "layer": k, "norm": v} for k, v in layer_norms(model).items()]


def _epoch_steps(
    groups: list[_Group],
    names: list[str],
    forward: Callable,
    buffers: dict[str, torch.Tensor],
    data: Split,
    generators: list[torch.Generator],
    batch_size: int,
    active: list[bool],
    last_finite: list[list[torch.Tensor]],
    calls: Any,
    step: int,
) -> tuple[list[bool], int]:
    """One epoch of mini-batch steps of every run, each in its own order; returns which runs turned non-finite
    (kept at ``last_finite`` from then on) and the step count after the epoch."""
    runs = len(active)
    failed = [False] * runs
    perms = torch.stack([torch.randperm(len(data.y_train), generator=g) for g in generators])
    for batch in perms.split(batch_size, dim=1):  # (R, b) indices, each run its own order
        xb, yb = data.x_train[batch], data.y_train[batch]
        stack = {n: torch.cat([g.leaves[j] for g in groups]) for j, n in enumerate(names)}
        logits = forward(stack, buffers, xb)  # (R, b, classes)
        losses = F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="none").view(yb.shape).mean(1)
        for g in groups:
            for p in g.leaves:
                p.grad = None
        losses.sum().backward()  # runs are independent: each leaf gets its own run's gradient
        with torch.no_grad():
            _step(groups, losses)
            finite = torch.isfinite(losses).tolist()
            for r in range(runs):
                if active[r] and not failed[r] and not finite[r]:
                    failed[r] = True
            _freeze(groups, last_finite, [not a or f for a, f in zip(active, failed)])
        step += 1
        calls.step(step)
        if all(f or not a for a, f in zip(active, failed)):
            break
    return failed, step


@torch.no_grad()
def _settle(
    groups: list[_Group], last_finite: list[list[torch.Tensor]], active: list[bool], failed: list[bool]
) -> list[bool]:
    """After an epoch: the runs that failed in it or whose weights are no longer finite; those and the inactive
    runs are put back to ``last_finite``."""
    _freeze(groups, last_finite, [not a for a in active])
    stack = _stack(groups)  # once for every run (it copies every parameter)
    failed = [f or not all(all_finite(p[r]) for p in stack) for r, f in enumerate(failed)]
    _freeze(groups, last_finite, [a and f for a, f in zip(active, failed)])  # back to the last finite
    return failed


def _stack(groups: list[_Group]) -> list[torch.Tensor]:
    """Every parameter as one ``(R, ...)`` tensor (a copy), groups in order."""
    return [torch.cat([g.leaves[j].detach() for g in groups]) for j in range(len(groups[0].leaves))]


def _freeze(groups: list[_Group], saved: list[list[torch.Tensor]], which: Sequence[bool]) -> None:
    """Put the runs flagged in ``which`` back to their ``saved`` weights (runs that diverged or stopped)."""
    for g, kept in zip(groups, saved):
        rows = [r - g.start for r in range(g.start, g.stop) if which[r]]
        if rows:
            index = torch.tensor(rows)
            for p, value in zip(g.leaves, kept):
                p.detach()[index] = value[index]


def _write_models(models: Sequence[nn.Module], groups: list[_Group], names: list[str]) -> None:
    """Copy each run's weights from the stack into its model."""
    with torch.no_grad():
        for g in groups:
            for r in range(g.start, g.stop):
                own = dict(models[r].named_parameters())
                for j, name in enumerate(names):
                    own[name].copy_(g.leaves[j][r - g.start])


def _save(path: Path, groups, generators, identity, rows, norms, active, epoch, step, seconds, per_run) -> None:
    state = {
        "active": active,
        "kind": _KIND,
        "identity": identity,
        "leaves": [[p.detach().clone() for p in g.leaves] for g in groups],
        "optimizers": [g.state for g in groups],
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": cuda_rng_states(),
        "generators": [g.get_state() for g in generators],
        **(per_run.saved() if per_run is not None else {"run_rngs": None, "run_cuda_rngs": None}),
        "rows": rows,
        "norms": norms,
        "epoch": epoch,
        "step": step,
        "seconds": seconds,
    }
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def _load(
    groups: list[_Group], state: dict[str, Any], generators: list[torch.Generator], per_run: _PerRun | None
) -> None:
    with torch.no_grad():
        for g, leaves, opt in zip(groups, state["leaves"], state["optimizers"]):
            for p, value in zip(g.leaves, leaves):
                p.copy_(value)
            g.state = opt
    torch.set_rng_state(state["torch_rng"])
    restore_cuda_rng_states(state.get("cuda_rng"))
    for g, s in zip(generators, state["generators"]):
        g.set_state(s)
    if per_run is not None:
        per_run.load(state)
