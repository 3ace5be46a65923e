"""Train any classifier ``nn.Module`` with any optimizer on a :class:`Split`, with per-epoch metrics and resume.

Spec: implicit-bias-ngd §4 A8 (stochastic NGD and SPS take the mini-batch loss through a closure) and §9
(training loss per epoch, per-layer parameter-norm growth); mirror-descent-lp §9 E4-E5 (cross-entropy,
mini-batches, train and test accuracy per epoch).

Every step calls ``optimizer.step(closure)``; the closure zeroes the gradients, computes the mini-batch
cross-entropy, back-propagates and returns the loss. ``torch.optim`` optimizers accept a closure, and the
Polyak/SPS step needs one for the loss value.
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

from attnlab._io import atomic_write
from attnlab._validation import ValidationError, check_scalar
from attnlab.checkpoint import read_checkpoint
from attnlab.nets.datasets.split import Split
from attnlab.training.callbacks import COMPLETED, DIVERGED, STOPPED, CallbackList, Record, TrainingResult, callback_list

__all__ = ["History", "Metric", "evaluate", "fit_classifier", "layer_norms"]

Metric = Callable[[nn.Module], float]  # an extra per-epoch metric: f(model) -> float


@dataclass
class History(TrainingResult):
    """What :func:`fit_classifier` returns: one row per epoch, per-layer norms per epoch, and the run's status.

    Attributes
    ----------
    frame : pandas.DataFrame
        Columns ``epoch`` (0 = before training), ``step``, ``train_loss``, ``train_accuracy``, ``test_loss``,
        ``test_accuracy``, ``diverged``, ``seconds`` (training time so far) and one column per extra metric.
    norms : pandas.DataFrame
        Columns ``epoch``, ``layer``, ``norm``: Frobenius norm of each layer's parameters (see
        :func:`layer_norms`).
    status : list of str
        One word (one run): ``"completed"``, ``"diverged"`` (a mini-batch loss turned non-finite: the model holds
        its state at the end of the last finite epoch) or ``"stopped"`` (a callback asked to stop).
    """

    frame: pd.DataFrame
    norms: pd.DataFrame
    status: list[str] = field(default_factory=lambda: [COMPLETED])


def layer_norms(model: nn.Module) -> dict[str, float]:
    """Frobenius norm of the parameters of each layer of ``model``.

    Spec: implicit-bias-ngd §9 fig. 7 (norm growth of the layers of a ViT).

    A layer is ``blocks.<i>`` (any ``ModuleList`` entry, e.g. ``encoder.blocks.0``) or else the top-level
    child the parameter belongs to (``patch_embed``, ``head``, ...). The norm of a layer is
    ``sqrt(sum of squared entries of all its parameters)``.

    Parameters
    ----------
    model : torch.nn.Module
        Any module; its parameters are read, in float64, and left unchanged.

    Returns
    -------
    dict of str to float
        The norm of each layer, keyed by layer name, in the order the layers' first parameters appear.
    """
    squares: dict[str, float] = {}
    lists = {name for name, sub in model.named_modules() if isinstance(sub, nn.ModuleList)}
    for name, param in model.named_parameters():
        parts = name.split(".")
        layer = parts[0]
        for i in range(1, len(parts) - 1):
            if ".".join(parts[:i]) in lists:
                layer = ".".join(parts[: i + 1])
                break
        squares[layer] = squares.get(layer, 0.0) + float(param.detach().double().square().sum())
    return {layer: value**0.5 for layer, value in squares.items()}


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of ``model`` on ``(x, y)``, in eval mode (dropout off).

    Parameters
    ----------
    model : nn.Module
        Maps ``x[i:j]`` to logits ``(j - i, num_classes)``.
    x : torch.Tensor, shape (n, ...)
    y : torch.Tensor, shape (n,), int64
    batch_size : int, default=512

    Returns
    -------
    (loss, accuracy) : tuple of float
    """
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    for start in range(0, len(y), batch_size):
        logits = model(x[start : start + batch_size])
        target = y[start : start + batch_size]
        total_loss += float(F.cross_entropy(logits, target, reduction="sum"))
        correct += int((logits.argmax(dim=1) == target).sum())
    model.train(was_training)
    return total_loss / len(y), correct / len(y)


def _epoch_row(
    model: nn.Module, data: Split, epoch: int, step: int, metrics: Mapping[str, Metric], eval_batch_size: int
) -> dict[str, Any]:
    train_loss, train_accuracy = evaluate(model, data.x_train, data.y_train, eval_batch_size)
    test_loss, test_accuracy = evaluate(model, data.x_test, data.y_test, eval_batch_size)
    row = {
        "epoch": epoch,
        "step": step,
        "train_loss": train_loss,
        "train_accuracy": train_accuracy,
        "test_loss": test_loss,
        "test_accuracy": test_accuracy,
        "diverged": False,
    }
    was_training = model.training
    model.eval()
    with torch.no_grad():
        row.update({name: float(metric(model)) for name, metric in metrics.items()})
    model.train(was_training)
    return row


def _report(
    calls: CallbackList, row: dict[str, Any], steps: int, model: nn.Module, optimizer: torch.optim.Optimizer
) -> bool:
    """Hand one epoch's row to the callbacks; True when one asks to stop."""
    record = Record(
        step=row["step"],
        steps=steps,
        rows=pd.DataFrame([{"run": 0} | row]),
        state={"model": model, "optimizer": optimizer, "epoch": row["epoch"]},
    )
    return calls.record(record)


def _save(path: Path, state: dict[str, Any]) -> None:
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def fit_classifier(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Split,
    *,
    epochs: int,
    batch_size: int,
    seed: int,
    checkpoint: str | Path | None = None,
    metrics: Mapping[str, Metric] | None = None,
    eval_batch_size: int = 512,
    progress: bool = False,
    desc: str = "",
    callbacks: Sequence[Any] | None = None,
) -> History:
    """Train ``model`` with ``optimizer`` on mini-batches of ``data`` for ``epochs`` epochs of cross-entropy.

    Spec: implicit-bias-ngd §4 A8 (mini-batch steps with the loss passed through a closure).

    Parameters
    ----------
    model : nn.Module
        Maps a batch of inputs ``data.x_train[idx]`` to logits ``(batch, num_classes)``.
    optimizer : torch.optim.Optimizer
        Any optimizer over ``model``'s parameters (``attnlab.optim`` or ``torch.optim``); ``step`` gets a closure.
    data : Split
    epochs : int
        Total number of epochs; a resumed run continues up to this number.
    batch_size : int
        Mini-batch size; each epoch visits a fresh random permutation, the last batch may be smaller.
    seed : int
        Seeds the mini-batch order and the global torch RNG that dropout draws from (inside
        ``torch.random.fork_rng``, so the caller's RNG state is left as it was).
    checkpoint : path, optional
        File to save to after every epoch (atomically) and to resume from when it exists: the model, the
        optimizer state, both RNG states, the epoch and the history so far. A resumed run ends bit-identical to
        an uninterrupted one. The model and optimizer passed in must be built the same way as the first time.
    metrics : mapping of str to callable, optional
        Extra per-epoch metrics ``name -> f(model) -> float``, computed in eval mode without gradients.
    eval_batch_size : int, default=512
    progress : bool, default=False
        Show a bar over the optimizer steps (when stderr is a terminal): a
        :class:`~attnlab.training.callbacks.ProgressBar` among the callbacks, as in every attnlab loop.
    desc : str, default=""
        Label of the progress bar.
    callbacks : sequence of attnlab.training.callbacks.Callback or callable, optional
        Called through :class:`attnlab.training.callbacks.CallbackList`: ``on_start(steps)`` with the planned number of
        optimizer steps, ``on_step(step)`` after each step, ``on_record`` with each epoch's row (``run`` 0,
        ``state = {"model", "optimizer", "epoch"}``; epoch 0 before training, or the last finished epoch when
        resuming), ``on_end``. A callback returning True from ``on_record`` stops training after that epoch.

    Returns
    -------
    History
        Row ``epoch = 0`` holds the metrics before training. When a mini-batch loss is not finite, training
        stops (the one divergence policy of :mod:`attnlab.training.callbacks`): the model and the optimizer go back to
        their state at the end of the last finite epoch, the last row (computed on that state) has
        ``diverged = True``, and ``status`` is ``["diverged"]``.

    Raises
    ------
    ValidationError
        On a non-positive ``epochs``/``batch_size``, or a checkpoint written with another seed or batch size.
    """
    check_scalar("epochs", epochs, kind=int, low=1)
    check_scalar("batch_size", batch_size, kind=int, low=1)
    check_scalar("seed", seed, kind=int, low=0)
    check_scalar("eval_batch_size", eval_batch_size, kind=int, low=1)
    metrics = dict(metrics or {})
    path = None if checkpoint is None else Path(checkpoint)
    with torch.random.fork_rng(devices=[]):
        state = read_checkpoint(path) if path is not None else None
        generator = torch.Generator()
        if state is None:
            torch.manual_seed(seed)  # scoped by fork_rng: the caller's global RNG is restored on exit
            generator.manual_seed(seed)
            rows = [_epoch_row(model, data, 0, 0, metrics, eval_batch_size) | {"seconds": 0.0}]
            norms = [{"epoch": 0, "layer": k, "norm": v} for k, v in layer_norms(model).items()]
            start_epoch, step, seconds = 1, 0, 0.0
        else:
            if (state["seed"], state["batch_size"]) != (seed, batch_size):
                raise ValidationError(
                    f"checkpoint {path} was written with seed={state['seed']}, batch_size={state['batch_size']}, "
                    f"but this call has seed={seed}, batch_size={batch_size}; pass the same values or a new path"
                )
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            torch.set_rng_state(state["torch_rng"])
            generator.set_state(state["generator"])
            rows, norms = state["rows"], state["norms"]
            start_epoch, step, seconds = state["epoch"] + 1, rows[-1]["step"], rows[-1]["seconds"]
        planned = epochs * math.ceil(len(data.y_train) / batch_size)
        calls = callback_list(callbacks, None if progress else False, desc or "fit_classifier")
        calls.start(planned)
        stop = _report(calls, rows[-1], planned, model, optimizer)
        for epoch in range(start_epoch, epochs + 1):
            if rows[-1]["diverged"] or stop:
                break
            last_finite = copy.deepcopy((model.state_dict(), optimizer.state_dict()))
            model.train()
            started = time.perf_counter()
            diverged = False
            for batch in torch.randperm(len(data.y_train), generator=generator).split(batch_size):
                xb, yb = data.x_train[batch], data.y_train[batch]

                def closure(xb: torch.Tensor = xb, yb: torch.Tensor = yb) -> torch.Tensor:
                    optimizer.zero_grad(set_to_none=True)
                    loss = F.cross_entropy(model(xb), yb)
                    loss.backward()
                    return loss

                loss = optimizer.step(closure)
                step += 1
                calls.step(step)
                if loss is not None and not torch.isfinite(loss):
                    diverged = True
                    break
            seconds += time.perf_counter() - started
            diverged = diverged or not all(bool(torch.isfinite(p).all()) for p in model.parameters())
            if diverged:  # back to the end of the last finite epoch
                model.load_state_dict(last_finite[0])
                optimizer.load_state_dict(last_finite[1])
            row = _epoch_row(model, data, epoch, step, metrics, eval_batch_size)
            row["diverged"] = diverged or not math.isfinite(row["train_loss"])
            rows.append(row | {"seconds": seconds})
            norms += [{"epoch": epoch, "layer": k, "norm": v} for k, v in layer_norms(model).items()]
            stop = _report(calls, rows[-1], planned, model, optimizer)
            if path is not None:
                _save(
                    path,
                    {
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "torch_rng": torch.get_rng_state(),
                        "generator": generator.get_state(),
                        "epoch": epoch,
                        "seed": seed,
                        "batch_size": batch_size,
                        "rows": rows,
                        "norms": norms,
                    },
                )
        calls.end()
    finished = rows[-1]["epoch"] >= epochs
    status = DIVERGED if rows[-1]["diverged"] else COMPLETED if finished or not stop else STOPPED
    return History(pd.DataFrame(rows), pd.DataFrame(norms), [status])
