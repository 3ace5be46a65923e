"""Train any classifier ``nn.Module`` with any optimizer on a :class:`Split`, with per-epoch metrics and resume.

Spec: implicit-bias-ngd §4 A8 (stochastic NGD and SPS take the mini-batch loss through a closure) and §9
(training loss per epoch, per-layer parameter-norm growth); mirror-descent-lp §9 E4-E5 (cross-entropy,
mini-batches, train and test accuracy per epoch).

Every step calls ``optimizer.step(closure)``; the closure zeroes the gradients, computes the mini-batch
cross-entropy, back-propagates and returns the loss. ``torch.optim`` optimizers accept a closure, and the
Polyak/SPS step needs one for the loss value. The epochs run in the one loop (:mod:`attnlab.training.loop`): its
divergence policy rolls a run back to the end of its last finite epoch.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from attnlab._io import atomic_write
from attnlab._numerics import all_finite
from attnlab._validation import ValidationError, check_scalar, check_seed
from attnlab.checkpoint import (
    check_identity,
    cuda_rng_states,
    fork_rngs,
    read_checkpoint,
    restore_cuda_rng_states,
    tensor_digest,
)
from attnlab.metrics import metric_columns
from attnlab.nets.datasets.split import Split
from attnlab.nets.shared_forward import shared_encodings
from attnlab.training.callbacks import tidy_frame
from attnlab.training.loop import LoopProblem, run_loop
from attnlab.training.result import TrainingResult

__all__ = ["evaluate", "fit_classifier", "layer_norms"]

_TRUE = torch.ones(1, dtype=torch.bool)  # the guard's answer for the one run
_KIND = "fit_classifier/2"  # the front door and format of its checkpoints (2: with "kind" and "identity")


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

    Raises
    ------
    ValidationError
        On a ``batch_size`` that is not an int >= 1, or ``x`` and ``y`` that are not tensors of equal, non-zero length
        (``y`` int64 labels).
    """
    check_scalar("batch_size", batch_size, kind=int, low=1)
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or y.dim() != 1 or y.dtype != torch.int64:
        raise ValidationError("evaluate needs tensors x (n, ...) and y (n,) of int64 class labels; pass y.long()")
    if len(x) != len(y) or len(y) == 0:
        raise ValidationError(f"x has {len(x)} rows and y {len(y)}; they must be equal and non-zero")
    was_training = model.training
    model.eval()
    total_loss, correct = 0.0, 0
    try:
        for start in range(0, len(y), batch_size):
            logits = model(x[start : start + batch_size])
            target = y[start : start + batch_size]
            if start == 0 and not 0 <= int(y.min()) <= int(y.max()) < logits.shape[-1]:
                raise ValidationError(
                    f"y holds labels {int(y.min())} to {int(y.max())}, the model {logits.shape[-1]} classes"
                )
            total_loss += float(F.cross_entropy(logits, target, reduction="sum"))
            correct += int((logits.argmax(dim=1) == target).sum())
    finally:
        model.train(was_training)
    return total_loss / len(y), correct / len(y)


def _epoch_row(
    model: nn.Module,
    data: Split,
    epoch: int,
    step: int,
    metrics: Mapping[str, Any],
    eval_batch_size: int,
    *,
    train: bool = True,
) -> dict[str, Any]:
    """The row of ``epoch``: loss and accuracy on both parts (``train=False``: the test part alone, the training
    columns NaN) and the metrics."""
    with shared_encodings(model):  # a metric that encodes the test set reuses evaluate's pass
        nan = (math.nan, math.nan)
        train_loss, train_accuracy = evaluate(model, data.x_train, data.y_train, eval_batch_size) if train else nan
        test_loss, test_accuracy = evaluate(model, data.x_test, data.y_test, eval_batch_size)
        row = {
            "epoch": epoch,
            "step": step,
            "train_loss": train_loss,
            "train_accuracy": train_accuracy,
            "test_loss": test_loss,
            "test_accuracy": test_accuracy,
        }
        was_training = model.training
        model.eval()
        with torch.no_grad():
            row.update({k: float(v) for k, v in metric_columns(metrics, {"model": model, "epoch": epoch}, row).items()})
        model.train(was_training)
    return row


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
    metrics: Mapping[str, Callable[[Mapping[str, Any]], Any]] | None = None,
    eval_batch_size: int = 512,
    progress: bool = False,
    desc: str = "",
    callbacks: Sequence[Any] | None = None,
) -> TrainingResult:
    """Train ``model`` with ``optimizer`` on mini-batches of ``data`` for ``epochs`` epochs of cross-entropy.

    Spec: implicit-bias-ngd §4 A8 (mini-batch steps with the loss passed through a closure). An epoch is one step of
    the one loop (:func:`attnlab.training.loop.run_loop`); its guard is the epoch's losses and parameters.

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
        Seeds the mini-batch order and the global torch RNGs that dropout draws from (``torch.manual_seed``: the
        CPU's and, when CUDA is initialised, every GPU's), inside :func:`attnlab.checkpoint.fork_rngs`, so the
        caller's RNG states are left as they were: the CPU's always, every GPU's too on a GPU run.
    checkpoint : path, optional
        File to save to after every epoch (atomically) and to resume from when it exists: the model, the
        optimizer state, the RNG states (the mini-batch order's, the CPU's and, when CUDA is in use, every GPU's),
        the epoch and the history so far. A resumed run ends bit-identical to an uninterrupted one. The model and
        optimizer passed in must be built the same way as the first time.
    metrics : mapping of str to callable, optional
        Extra per-epoch metrics ``name -> metric(state) -> float`` of the state ``{"model": model, "epoch": int}``
        (:class:`attnlab.metrics.Metric`), computed in eval mode without gradients.
    eval_batch_size : int, default=512
    progress : bool, default=False
        Show a bar over the optimizer steps (when stderr is a terminal): a
        :class:`~attnlab.training.callbacks.ProgressBar` among the callbacks, as in every attnlab loop.
    desc : str, default=""
        Label of the progress bar.
    callbacks : sequence of attnlab.training.callbacks.Callback or callable, optional
        Called through :class:`attnlab.training.callbacks.CallbackList`: ``on_start(steps)`` with the planned number
        of optimizer steps, ``on_step(step)`` after each step, ``on_record`` with each epoch's row (``run`` 0,
        ``step`` the optimizer steps so far, ``state = {"model", "optimizer", "epoch"}``; epoch 0 before training,
        or the last finished epoch when resuming), ``on_end``. A callback returning True from ``on_record`` stops
        training after that epoch.

    Returns
    -------
    TrainingResult
        ``frame``: one row per epoch, ``run`` (0), ``step`` (optimizer steps so far), ``epoch`` (0 = before
        training), ``train_loss``, ``train_accuracy``, ``test_loss``, ``test_accuracy``, ``seconds`` (training time
        so far) and one column per extra metric; ``status`` (one word: ``"completed"``, ``"stopped"`` by a callback,
        or ``"diverged"``: a mini-batch loss or a parameter turned non-finite, and the model and the optimizer went
        back to their state at the end of the last finite epoch, the last row's; the one divergence policy);
        ``last_step`` (that epoch); ``model``; and ``extra["norms"]`` (also ``result.norms``): columns ``epoch``,
        ``layer``, ``norm``, the Frobenius norm of each layer's parameters per epoch (:func:`layer_norms`).

    Raises
    ------
    ValidationError
        On a non-positive ``epochs``/``batch_size``, an optimizer over none of the model's parameters, labels beyond
        the model's outputs, a checkpoint written by something else than ``fit_classifier`` (or by an older attnlab),
        or written with another seed, batch size, metric names, data, parameter dtypes or optimizer settings, or
        past ``epochs``: all checked before any training.
    """
    check_scalar("epochs", epochs, kind=int, low=1)
    check_scalar("batch_size", batch_size, kind=int, low=1)
    check_seed("seed", seed)
    check_scalar("eval_batch_size", eval_batch_size, kind=int, low=1)
    path = None if checkpoint is None else Path(checkpoint)
    _check_fit(model, optimizer, data)
    metrics = dict(metrics or {})
    identity = (
        {"seed": seed, "batch_size": batch_size, **run_identity(model, data, metrics)} if path is not None else {}
    )
    with fork_rngs():
        problem = _Epochs(model, optimizer, data, batch_size, seed, metrics, eval_batch_size, path, identity)
        start = problem.resume(epochs) if path is not None else 0
        planned = epochs * math.ceil(len(data.y_train) / batch_size)
        result = run_loop(
            problem,
            epochs,
            record_every=1,
            start=start,
            callbacks=callbacks or (),
            progress=None if progress else False,
            desc=desc or "fit_classifier",
            total=planned,
            recorded=[_columns(problem.rows[:-1])] if len(problem.rows) > 1 else (),
        )
    result.model, result.extra = model, {"norms": tidy_frame(_columns(problem.norms))}
    return result


def _check_fit(model: nn.Module, optimizer: Any, data: Any) -> None:
    """Refuse what would train nothing or fail mid-run: an optimizer over no parameter of ``model``, data that are
    not a :class:`Split`, labels beyond the model's classes (one test input is classified to read their number)."""
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValidationError(f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}")
    if not isinstance(data, Split):
        raise ValidationError(f"data must be a Split (attnlab.nets.datasets), got {type(data).__name__}")
    mine = {id(p) for p in model.parameters()}
    if not any(id(p) in mine for group in optimizer.param_groups for p in group["params"]):
        raise ValidationError(
            "the optimizer holds none of the model's parameters, so training would change nothing; build it on "
            "model.parameters()"
        )
    was_training = model.training
    model.eval()
    with torch.no_grad():
        classes = model(data.x_test[:1]).shape[-1]
    model.train(was_training)
    if data.num_classes > classes:
        raise ValidationError(
            f"the labels go up to {data.num_classes - 1}, but the model has {classes} outputs; build it with "
            f"num_classes >= {data.num_classes}"
        )


def run_identity(model: nn.Module, data: Split, metrics: Mapping[str, Any]) -> dict[str, Any]:
    """What a checkpoint of :func:`fit_classifier` or :func:`~attnlab.nets.stacked.fit_stacked` holds besides the
    runs' settings, and must hold again to be resumed: the metric names (the columns of its rows), a digest of the
    data (:func:`attnlab.checkpoint.tensor_digest` of the four tensors of the split) and the parameters' dtypes
    (``load_state_dict`` would cast another dtype's weights without a word)."""
    return {
        "metrics": list(metrics),
        "data_sha256": tensor_digest([data.x_train, data.y_train, data.x_test, data.y_test])[:16],
        "dtypes": sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()}),
    }


def check_resumed_epoch(path: Path, epoch: int, epochs: int) -> None:
    """Refuse a checkpoint past ``epochs``: its weights are at ``epoch``, which the run would report as ``epochs``
    (:func:`fit_classifier` and :func:`~attnlab.nets.stacked.fit_stacked` alike)."""
    if epoch > epochs:
        raise ValidationError(
            f"checkpoint {path} is at epoch {epoch} > epochs={epochs}; pass epochs >= {epoch} or a new checkpoint path"
        )


def check_same_optimizer(path: Path, saved: dict[str, Any], optimizer: torch.optim.Optimizer) -> None:
    """Refuse a checkpoint whose optimizer had other settings: ``load_state_dict`` would replace this optimizer's
    (another class, ``lr`` or constant) by the saved ones without a word."""
    groups = optimizer.state_dict()["param_groups"]
    if len(saved["param_groups"]) != len(groups):
        raise ValidationError(
            f"checkpoint {path} holds an optimizer of {len(saved['param_groups'])} parameter groups, this one has "
            f"{len(groups)}; resume with the optimizer that wrote it, or pass a new checkpoint path"
        )
    for old, new in zip(saved["param_groups"], groups):
        settings = {k: v for k, v in old.items() if k != "params"}, {k: v for k, v in new.items() if k != "params"}
        if _setting_text(settings[0]) != _setting_text(settings[1]):
            raise ValidationError(
                f"checkpoint {path} was written by an optimizer with {_setting_text(settings[0])}, but this one has "
                f"{_setting_text(settings[1])}; resume with the same optimizer and settings, or pass a new path"
            )


def _setting_text(settings: dict[str, Any]) -> str:
    """An optimizer's settings, comparable and readable (tensors by their values)."""
    shown = {k: v.tolist() if isinstance(v, torch.Tensor) else v for k, v in sorted(settings.items())}
    return ", ".join(f"{k}={v!r}" for k, v in shown.items())


class _Epochs(LoopProblem):
    """Epochs of mini-batch training of one classifier as a problem of the one loop (one run)."""

    runs = 1
    substeps = True  # an epoch is made of optimizer steps: the callbacks count those

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        data: Split,
        batch_size: int,
        seed: int,
        metrics: dict[str, Any],
        eval_batch_size: int,
        path: Path | None,
        identity: dict[str, Any],
    ) -> None:
        self.model, self.optimizer, self.data, self.batch_size, self.seed = model, optimizer, data, batch_size, seed
        self.metrics, self.eval_batch_size, self.path, self.identity = metrics, eval_batch_size, path, identity
        self.generator = torch.Generator()
        torch.manual_seed(seed)  # scoped by the caller's fork_rng: the caller's global RNG is restored on exit
        self.generator.manual_seed(seed)
        self.rows: list[dict[str, Any]] = []
        self.norms: list[dict[str, Any]] = []
        self.clock, self.seconds, self.bad = 0, 0.0, False
        self.last_finite: Any = None
        self.tick: Callable[[int], None] = lambda count: None

    def resume(self, epochs: int) -> int:
        """Load the checkpoint when there is one (at most at epoch ``epochs``); the epoch to start from (0 without
        one)."""
        state = read_checkpoint(self.path)
        if state is None:
            return 0
        check_identity(self.path, state, _KIND, self.identity)  # before anything of it is used
        check_resumed_epoch(self.path, state["epoch"], epochs)
        check_same_optimizer(self.path, state["optimizer"], self.optimizer)
        try:
            self.model.load_state_dict(state["model"])
        except RuntimeError as err:  # torch lists every tensor whose name or shape differs
            first = str(err).strip().splitlines()[1:2] or [str(err)]
            raise ValidationError(
                f"checkpoint {self.path} holds another model's weights ({first[0].strip()}); resume with the model "
                "that wrote it, or pass a new path"
            ) from None
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        restore_cuda_rng_states(state.get("cuda_rng"))  # a model on a GPU draws its dropout masks there
        self.generator.set_state(state["generator"])
        self.rows, self.norms = state["rows"], state["norms"]
        self.clock, self.seconds = self.rows[-1]["step"], self.rows[-1]["seconds"]
        return state["epoch"]

    def gradient(self, step: int, records: bool) -> None:
        """Nothing: an epoch's gradients are taken in :meth:`apply`, one per mini-batch."""

    def guard(self, gradient: None) -> torch.Tensor | None:
        return _TRUE if self.bad else None

    def record(self, step: int, gradient: None, active: torch.Tensor) -> dict[str, list]:
        if self.rows and self.rows[-1]["epoch"] == step:  # resumed: this epoch's row is in the checkpoint
            return _columns(self.rows[-1:])
        row = _epoch_row(self.model, self.data, step, self.clock, self.metrics, self.eval_batch_size)
        self.rows.append(row | {"seconds": self.seconds})
        self.norms += [{"epoch": step, "layer": k, "norm": v} for k, v in layer_norms(self.model).items()]
        if self.path is not None and step > 0:
            _save(self.path, self._checkpoint(step))
        return _columns(self.rows[-1:])

    def state(self) -> dict[str, Any]:
        """The model, the optimizer and the epoch, for callbacks."""
        return {"model": self.model, "optimizer": self.optimizer, "epoch": self.rows[-1]["epoch"]}

    def apply(self, step: int, gradient: None, active: torch.Tensor) -> None:
        model, optimizer, data = self.model, self.optimizer, self.data
        self.last_finite = copy.deepcopy((model.state_dict(), optimizer.state_dict()))
        model.train()
        started = time.perf_counter()
        for batch in torch.randperm(len(data.y_train), generator=self.generator).split(self.batch_size):
            xb, yb = data.x_train[batch], data.y_train[batch]
            first = _loss_and_gradient(model, optimizer, xb, yb)
            if not torch.isfinite(first):  # diverged before the step: a loss-reading rule never sees a NaN loss
                self.clock += 1
                self.tick(self.clock)
                self.bad = True
                break

            pending = iter([first])

            def closure(xb: torch.Tensor = xb, yb: torch.Tensor = yb, taken: Any = pending) -> torch.Tensor:
                loss = next(taken, None)  # the first call: the loss and gradients taken above (one forward pass)
                return _loss_and_gradient(model, optimizer, xb, yb) if loss is None else loss

            loss = optimizer.step(closure)
            self.clock += 1
            self.tick(self.clock)
            if loss is not None and not torch.isfinite(loss):
                self.bad = True
                break
        self.seconds += time.perf_counter() - started
        self.bad = self.bad or not all(all_finite(p.detach()) for p in model.parameters())

    def keep(self, runs: torch.Tensor) -> None:
        if bool(runs.any()):
            self.model.load_state_dict(self.last_finite[0])
            self.optimizer.load_state_dict(self.last_finite[1])

    def _checkpoint(self, epoch: int) -> dict[str, Any]:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": cuda_rng_states(),
            "generator": self.generator.get_state(),
            "epoch": epoch,
            "kind": _KIND,
            "identity": self.identity,
            "rows": self.rows,
            "norms": self.norms,
        }


def _loss_and_gradient(
    model: nn.Module, optimizer: torch.optim.Optimizer, xb: torch.Tensor, yb: torch.Tensor
) -> torch.Tensor:
    """The mini-batch cross-entropy of ``model`` on ``(xb, yb)``, its gradients left in the parameters' ``.grad``."""
    with torch.enable_grad():
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
    return loss


def _columns(rows: Sequence[Mapping[str, Any]]) -> dict[str, list]:
    """Rows (dicts of one key set) as columns, ``run`` 0 first."""
    return {"run": [0] * len(rows), **{k: [row[k] for row in rows] for k in rows[0]}} if rows else {}
