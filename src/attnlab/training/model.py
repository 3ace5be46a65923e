"""Train a token-selection model with a ``torch.optim`` optimizer: the front door of the engine for modules.

Spec: implicit-bias-ngd §4 (the algorithms are optimizers; this front door hands them to the engine and records).

An attnlab optimizer (:class:`~attnlab.optim.NormalizedGD`, :class:`~attnlab.optim.PolyakStep`,
:class:`~attnlab.optim.MirrorDescent`, :class:`~attnlab.optim.JointAdaptive`,
:class:`~attnlab.optim.PreconditionedGD`) is a chain of :mod:`attnlab.optim.transforms`; :func:`train` asks it for
that rule and runs it in :func:`attnlab.training.engine.fit` on log-scaled gradients, exactly as
:func:`attnlab.training.batched.train` runs the rule of the same name (one code path, exact after the softmax saturates).
Any other ``torch.optim.Optimizer`` (SGD, Adam, ...) runs through its own ``step`` and receives true gradients.
An optimizer string (``"ngd:lr=0.2,momentum=0.9"``, :mod:`attnlab.optim.spec`) or a rule of your own transforms
goes to the engine as a rule directly, with no optimizer object in between.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch

from attnlab._validation import (
    ValidationError,
    check_bool,
    check_in,
    check_runs,
    check_scalar,
    check_token_data,
    model_as_float64,
)
from attnlab.losses import LOSSES
from attnlab.metrics import Metric, as_metrics
from attnlab.models.functional import token_scores
from attnlab.models.heads import Head
from attnlab.optim import registry
from attnlab.optim._base import FunctionalOptimizer
from attnlab.optim.spec import OptimizerSpec
from attnlab.optim.transforms import Rule
from attnlab.training.engine import fit
from attnlab.training.recording import Recorder
from attnlab.training.result import TrainingResult
from attnlab.training.spaces import Problem, check_optimal_loss, default_optimal_loss

__all__ = ["train"]


@registry.documented
def train(
    model: Any,
    optimizer: torch.optim.Optimizer | str | OptimizerSpec | Rule,
    data: Any,
    loss: str = "exp",
    steps: int = 1000,
    record_every: int = 1,
    metrics: Sequence[Metric] | Mapping[str, Any] = (),
    *,
    progress: bool | None = None,
    callbacks: Iterable[Any] = (),
    broadcast: bool = False,
) -> TrainingResult:
    """Run ``steps`` optimizer steps on ``model`` and record metrics every ``record_every`` steps.

    Parameters
    ----------
    model : TokenSelectionModel
        :class:`~attnlab.models.Combined`, :class:`~attnlab.models.Factored` or :class:`~attnlab.models.Diagonal`
        (or a subclass with a ``parametrization``). Parameters may carry a leading runs axis ``R``: the runs are
        then independent (norms and step sizes per run, divergence per run). Parameters with
        ``requires_grad=False``, or outside the optimizer, stay where they are (as in a plain torch loop). A
        float32 model is converted to float64 in place (the ``Parameter`` objects stay, so the optimizer holds
        them still): attnlab computes in float64 everywhere.
    optimizer : torch.optim.Optimizer, str, OptimizerSpec or Rule
        A torch optimizer built on ``model.parameters()`` (attnlab's run through the engine; others through their
        ``step`` with a closure), an optimizer string (:mod:`attnlab.optim.spec`; Polyak's ``L*`` defaults to the
        fixed head's infimum, ``L - L*`` read from the margins, 0 for a model that trains its head, as in
        :func:`attnlab.training.batched.train`), or a
        :class:`~attnlab.optim.transforms.Rule`.
        The names of the registry (:mod:`attnlab.optim.registry`), each also a ``torch.optim`` class:

        .. optimizers::
    data : TokenSelectionData or StackedData
        ``X`` ([R,] n, T, d), ``Z``, ``y`` and, unless the model trains its own head, ``v``.
    loss : {"exp", "logistic"}, default="exp"
        ``"exp"``: ``l(z) = e^{-z}`` of the margin ``z = y f``; ``"logistic"``: ``log(1 + e^{-z})``.
    steps : int, default=1000
        Number of optimizer steps.
    record_every : int, default=1
        Steps 0, k, 2k, ... and the last step are recorded.
    metrics : sequence of Metric, or mapping of str to callable
        E.g. ``[attnlab.metrics.alignment(sol.W), attnlab.metrics.opt_softmax()]``: functions of the state
        (:class:`attnlab.metrics.Metric`: ``"W"``, the model's tensors, the data ``"X"``, ``"Z"``, ``"y"``, ``"v"``,
        and ``"select"``, the data's selection or else its optimal tokens).
    progress : bool, optional
        Progress bar; default only when stderr is a terminal.
    callbacks : iterable of Callback or callable
        See :mod:`attnlab.training.callbacks` (early stopping, logging, trackers).
    broadcast : bool, default=False
        With data of R runs (:class:`~attnlab.data.StackedData`) and a model without a runs axis: train one copy of
        the model per data set. The model's parameters get the runs axis ``R`` (in place) and keep every run; every
        metric is computed with each run's own ``W``. Without it, such a call is refused.

    Returns
    -------
    TrainingResult
        ``frame`` (one row per recorded (run, step): ``run``, ``step``, ``loss``, ``log_loss``, ``grad_norm``,
        ``norm`` and one column per metric), ``model`` (the trained model, moved in place), ``status`` and
        ``last_step`` per run, ``params`` (the final tensors, runs axis first) and ``rule_state``.

    Notes
    -----
    The one divergence policy (:mod:`attnlab.training.loop`): a run whose loss becomes non-finite is put back to
    its last parameters with a finite loss, stops, and is marked ``"diverged"`` in ``status`` (``result.message``
    says at which step); the other runs and everything already recorded are kept. Nothing warns or raises.

    Examples
    --------
    >>> import attnlab as al
    >>> data = al.data.TokenSelectionData(torch.randn(4, 3, 2), y=[1, -1, 1, -1], v=[1.0, 0.0])
    >>> model = al.models.Combined(2)
    >>> traj = al.train(model, torch.optim.SGD(model.parameters(), lr=0.1), data, steps=5)
    >>> len(traj.frame)
    6
    """
    check_in("loss", loss, LOSSES)
    steps = check_scalar("steps", steps, kind=int, low=0)
    record_every = check_scalar("record_every", record_every, kind=int, low=1)
    broadcast = check_bool("broadcast", broadcast)
    if progress is not None:
        progress = check_bool("progress", progress)
    check_token_data("data", data)
    parametrization = getattr(model, "parametrization", None)
    if parametrization is None or not callable(getattr(model, "tensors", None)):
        raise ValidationError(
            f"model must be a TokenSelectionModel with a parametrization (Combined, Factored or Diagonal), got "
            f"{type(model).__name__}"
        )
    if not isinstance(optimizer, (torch.optim.Optimizer, str, OptimizerSpec, Rule)):
        raise ValidationError(
            "optimizer must be a torch.optim.Optimizer built on model.parameters(), an optimizer string such as "
            f"'ngd' or 'md:1.5', or a Rule; got {type(optimizer).__name__}"
        )
    model_as_float64(model)
    tensors, frozen, in_optimizer = _trained(model, optimizer)
    R = check_runs(model, data, broadcast)
    if broadcast and model.W.dim() == 2:
        _broadcast(model, tensors, optimizer, R)
    problem = module_problem(model, data, R, loss)
    batched = model.W.dim() == 3
    run = functools.partial(
        fit,
        problem,
        parametrization,
        steps=steps,
        record_every=record_every,
        recorder=Recorder(metrics=as_metrics(metrics), view=_view(model, data, batched) if metrics else None),
        callbacks=callbacks,
        progress=progress,
        trainable={k: torch.zeros((), dtype=torch.bool, device=model.W.device) for k in frozen},
    )
    rule, state, optimizer = _rule(optimizer, tensors, frozen, in_optimizer, problem, model)
    if rule is None:  # any other torch optimizer: through its own step, on the module's own tensors
        views = {k: t.data if batched else t.data.unsqueeze(0) for k, t in tensors.items()}
        result = run(params=views, optimizer=optimizer, optimizer_params=tensors)
    else:
        as_runs = (lambda t: t) if batched else (lambda t: t.detach().unsqueeze(0).clone())
        result = run(params={k: as_runs(t).clone() for k, t in tensors.items()}, rule=rule, rule_state=state)
        with torch.no_grad():
            for k, t in tensors.items():
                t.copy_(result.params[k] if batched else result.params[k][0])
        if isinstance(optimizer, FunctionalOptimizer):
            kept = [k not in frozen for k in tensors]
            saved = _state(result.rule_state, lambda t: t if batched else t[0])
            module_params = list(tensors.values())
            optimizer.save_rule_state(rule, [t for t, keep in zip(module_params, kept) if keep], _only(saved, kept))
    result.model = model
    return result


def _trained(model: Any, optimizer: Any) -> tuple[dict[str, torch.Tensor], set[str], set[int]]:
    """The model's tensors by name (``"v"`` too when it trains its head), the names of those that stay fixed, and
    the ids of the tensors the optimizer holds; refused when nothing would move."""
    tensors = dict(model.tensors())
    if model.train_head:
        tensors["v"] = model.v
    in_optimizer = (
        {id(p) for group in optimizer.param_groups for p in group["params"]}
        if isinstance(optimizer, torch.optim.Optimizer)
        else {id(t) for t in tensors.values()}  # a string or a Rule trains every tensor that requires a gradient
    )
    frozen = {k for k, t in tensors.items() if not t.requires_grad or id(t) not in in_optimizer}
    if len(frozen) == len(tensors):
        raise ValidationError(
            f"no parameter of the model is trained: {sorted(frozen)} have requires_grad=False or are not in the "
            "optimizer; build the optimizer on model.parameters() and leave requires_grad=True on what should move"
        )
    return tensors, frozen, in_optimizer


def _rule(
    optimizer: Any,
    tensors: dict[str, torch.Tensor],
    frozen: set[str],
    in_optimizer: set[int],
    problem: Problem,
    model: Any,
) -> tuple[Rule | None, list[Any] | None, Any]:
    """``(rule, its state, optimizer)``: the engine rule of an optimizer string, a Rule or an attnlab optimizer;
    None for any other torch optimizer, which runs through its own ``step``."""
    batched = model.W.dim() == 3
    as_runs = (lambda t: t) if batched else (lambda t: t.detach().unsqueeze(0).clone())
    rule, state = None, None
    if isinstance(optimizer, (str, OptimizerSpec)):
        # the fixed head's L* (its infimum); 0 for a trained head; none for a nonlinear one (then optimal_loss is needed)
        head = problem.v if problem.v is not None else as_runs(model.v)
        target = default_optimal_loss(problem, head, model.train_head and "v" not in frozen)
        spec = OptimizerSpec.parse(optimizer)
        check_optimal_loss(spec.get("optimal_loss"), problem.X.shape[0])  # a per-run L*, one per run
        rule = spec.rule(list(tensors), optimal_loss=target)  # every name has a rule
    elif isinstance(optimizer, Rule):
        rule = optimizer
    elif isinstance(optimizer, FunctionalOptimizer):
        # a frozen tensor outside the optimizer takes the rule of a trained one: its gradient is zero and it never
        # moves (the engine's masks), so only its place in the rule's lists matters
        module_params = list(tensors.values())
        stand_in = next(t for k, t in tensors.items() if k not in frozen)
        rule = optimizer.rule([t if id(t) in in_optimizer else stand_in for t in module_params])
        state = _state(optimizer.load_rule_state(rule, module_params), as_runs)
    return rule, state, optimizer


def _broadcast(model: Any, tensors: dict[str, torch.Tensor], optimizer: Any, R: int) -> None:
    """Give every tensor of ``model`` a leading runs axis of ``R`` copies, in place (the ``Parameter`` objects, and so
    the optimizer's references to them, stay); refused when the optimizer already holds state for them."""
    if isinstance(optimizer, torch.optim.Optimizer) and any(optimizer.state.get(t) for t in tensors.values()):
        raise ValidationError(
            "broadcast=True adds a runs axis to the model's parameters, but the optimizer already holds state for "
            "them (it has taken steps); build a fresh optimizer, or give the model a runs axis before training"
        )
    with torch.no_grad():
        for t in tensors.values():
            t.data = t.data.unsqueeze(0).expand((R,) + tuple(t.shape)).clone()


def _only(state: list[Any], keep: list[bool]) -> list[Any]:
    """A rule state restricted to the tensors marked in ``keep``."""
    return [
        {k: [x for x, flag in zip(values, keep) if flag] for k, values in s.items()} if isinstance(s, dict) else s
        for s in state
    ]


def module_problem(model: Any, data: Any, R: int, loss: str) -> Problem:
    """The engine's data of a model's R runs: the data on a runs axis (shared data sets as stride-0 views, so one
    kernel serves every run), on the model's device, with its fixed head (None when it trains its own)."""
    device = model.W.device  # the data follows the model (CPU, or CUDA when the model is there)

    def runs(t: torch.Tensor, axes: int) -> torch.Tensor:
        t = t.to(device)
        return t if t.dim() == axes + 1 else t.expand((R,) + tuple(t.shape))

    head = None if model.train_head else model.head(data.v)
    v = head if head is None or isinstance(head, Head) else runs(head, 1)
    return Problem(runs(data.X, 3), runs(data.Z, 2), runs(data.y, 1), v, loss)


def _state(state: list[Any], convert: Any) -> list[Any]:
    """A rule state with every tensor passed through ``convert`` (adding or dropping the runs axis)."""
    return [
        {k: [convert(x) if isinstance(x, torch.Tensor) else x for x in values] for k, values in s.items()}
        if isinstance(s, dict)
        else s
        for s in state
    ]


def _view(model: Any, data: Any, batched: bool) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The metrics' state as the caller holds it: the model's tensors in its own shapes (no runs axis for a model
    without one), its combined ``W`` and head, and the caller's data with its selection (else the optimal tokens of
    the head in use: the model's own ``v0`` before the data's; none for a nonlinear head)."""
    fixed = None if model.train_head else model.head(data.v)  # the head the model trains with
    select = getattr(data, "select", None)
    scored = data.v if model.train_head else fixed
    if select is None and isinstance(scored, torch.Tensor):
        select = token_scores(data.X, data.y, scored).argmax(dim=-1)  # spec ngd §1: opt_i
    names = [*model.parametrization.names, *(["v"] if model.train_head else [])]

    def view(state: dict[str, Any]) -> dict[str, Any]:
        own = {k: state[k] if batched else state[k][0] for k in names}
        W = model.parametrization.combine(own)  # as model.W combines them
        head = own["v"] if model.train_head else fixed
        return {**state, **own, "W": W, "v": head, "X": data.X, "Z": data.Z, "y": data.y, "select": select}

    return view
