"""The token-selection engine: R runs of attention on a runs axis, any parametrisation, any rule, as a problem of
the one loop (:func:`attnlab.training.loop.run_loop`).

Spec: implicit-bias-ngd §4 (the algorithms), mirror-descent-lp §4, kq-nuclear-norm §3 (the same rules on ``(K, Q)``
and on the diagonal).

Each step computes the log-scaled gradients of every run (:mod:`attnlab.training.spaces`), records at the recorded
steps (:mod:`attnlab.training.recording`), runs the rule (a chain of :mod:`attnlab.optim.transforms`, or any other
``torch.optim.Optimizer`` through its ``step``) and moves the runs. Runs never interact: norms, step sizes and the
divergence policy (the loop's) are per run; the guard of a run is its loss at the current iterate, read off the
gradient's log-scale.

Speed: a step that neither records nor runs a rule that reads the loss skips computing it (a non-finite gradient
scale tells a diverged run as well), and the rules run under ``torch.inference_mode`` (no autograd bookkeeping per
operation; what :func:`fit` returns is copied out of it, so it is an ordinary tensor). A torch optimizer runs under
``torch.no_grad`` instead: its state must stay usable by its own ``step`` outside the engine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from attnlab._numerics import all_finite
from attnlab._validation import ValidationError
from attnlab.models import Parametrization, log_excess_risk, token_scores
from attnlab.models.heads import Head
from attnlab.optim.transforms import Context, Rule
from attnlab.training.loop import LoopProblem, map_tensors, run_loop
from attnlab.training.recording import Recorder
from attnlab.training.result import TrainingResult
from attnlab.training.spaces import Gradient, KernelSpace, ParamSpace, Problem

__all__ = ["TokenRuns", "fit", "kernel_applies"]


def kernel_applies(
    param: Any,
    params: Mapping[str, torch.Tensor],
    problem: Problem,
    rule: Rule | None,
    rule_state: list[Any] | None = None,
) -> bool:
    """Whether the kernel-coefficient space (:class:`KernelSpace`) serves this run.

    Spec: implicit-bias-ngd §2-3.1. It does for a combined ``W``, a fixed head, a rule that only rescales or
    linearly combines gradients, no direction already in the rule's state (a momentum buffer given as a matrix has
    no coefficients), a linear head (a nonlinear one's scores move with ``W``) and ``n T^2 <= d^2``.

    Parameters
    ----------
    param : {"W", "KQ", "diag"} or Parametrization
        The parametrisation (its ``kind`` is read when it is an object).
    params : mapping of str to torch.Tensor
        The initial tensors; a ``"v"`` entry means the head is trained.
    problem : Problem
        The data, shape (R, n, T, d) for ``X``, and the fixed head.
    rule : Rule or None
        The update rule; None (no rule) never takes the kernel space.
    rule_state : list, optional
        The rule's state when resuming (one entry per transform); None for a fresh start.

    Returns
    -------
    bool
    """
    n, T, d = problem.X.shape[-3:]
    return (
        getattr(param, "kind", param) == "W"
        and "v" not in params
        and not isinstance(problem.v, Head)
        and rule is not None
        and rule.coefficient_only
        and not _holds_directions(rule, rule_state)
        and n * T * T <= d * d
    )


def _holds_directions(rule: Rule, state: list[Any] | None) -> bool:
    """Whether ``state`` holds a direction tensor (a momentum buffer) of a transform of ``rule``."""
    return state is not None and any(
        value is not None
        for transform, s in zip(rule.transforms, state)
        if isinstance(s, dict)
        for key in transform.direction_state
        for value in s.get(key, [])
    )


def _directions_as_matrices(rule: Rule, state: list[Any], space: KernelSpace) -> list[Any]:
    """``state`` with the kernel space's direction coefficients (momentum buffers) turned into matrices ``W``, the
    shape the rule has on the parameters, so the state can be used outside the engine."""
    out = []
    for transform, s in zip(rule.transforms, state):
        if isinstance(s, dict) and transform.direction_state:
            s = {
                key: [None if u is None else space.matrix(u) for u in values]
                if key in transform.direction_state
                else values
                for key, values in s.items()
            }
        out.append(s)
    return out


def fit(
    problem: Problem,
    param: str | Parametrization,
    params: dict[str, torch.Tensor],
    steps: int,
    rule: Rule | None = None,
    *,
    optimizer: torch.optim.Optimizer | None = None,
    optimizer_params: Mapping[str, torch.Tensor] | None = None,
    rule_state: list[Any] | None = None,
    record_every: int | None = None,
    recorder: Recorder | None = None,
    callbacks: Iterable[Any] = (),
    progress: bool | None = None,
    desc: str = "train",
    trainable: Mapping[str, torch.Tensor] | None = None,
) -> TrainingResult:
    """Train R runs for ``steps`` steps with ``rule`` (or a ``torch.optim`` ``optimizer``) and record them.

    Parameters
    ----------
    problem : Problem
        Data of the R runs.
    param : {"W", "KQ", "diag"} or Parametrization
        A model's own parametrisation (``model.parametrization``) is accepted too.
    params : dict of str to torch.Tensor
        Initial tensors, runs axis first (``"v"`` too when the head is trained). Owned (moved) by the engine.
    steps : int
        Number of update steps.
    rule : Rule, optional
        The update rule; runs per run on log-scaled gradients.
    optimizer : torch.optim.Optimizer, optional
        Instead of ``rule``: any optimizer over ``optimizer_params`` (the same tensors as ``params``, moved in place
        by the optimizer); it receives true gradients in ``.grad``, or the gradients' mantissas if it declares
        ``scale_invariant = True`` (its step is unchanged by a positive rescaling of each step's gradients; see
        "Writing a transform" in :mod:`attnlab.optim.transforms`, where every declaration is described).
    optimizer_params : mapping of str to torch.Tensor, optional
        With ``optimizer``: the tensors it was built over, by the names of ``params``. Each shares its storage with
        the tensor of ``params`` of that name (the same tensor, or, for a single run, one without the runs axis), so
        that the optimizer's in-place steps move the engine's state; its ``.grad`` is given its own shape.
    rule_state : list, optional
        The rule's state to start from (default ``rule.init``).
    record_every : int, optional
        Record steps 0, k, 2k, ... and the last; None records the first and the last.
    recorder : Recorder, optional
        What to record (columns, references, metrics, iterates); default loss, gradient norm and ``||W||``.
    callbacks : iterable of Callback or callable
        See :mod:`attnlab.training.callbacks`; a progress bar is added unless ``progress`` is False.
    progress : bool, optional
        Default: a bar only when stderr is a terminal.
    desc : str
        Progress-bar label.
    trainable : mapping of str to torch.Tensor, optional
        Boolean masks of the entries that move, by tensor name, broadcastable to the tensor (runs axis first; a 0-d
        ``False`` freezes the whole tensor). A frozen entry's gradient is zero (so it is left out of every norm) and
        it never moves. Tensors not named are trained in full.

    Returns
    -------
    TrainingResult
        ``frame``, ``status`` and ``last_step`` per run, ``params`` (the final tensors, runs axis first; a diverged
        run's last finite iterate), ``iterates`` (with ``keep_iterates``: ``"step"`` (S,), ``"W"`` (S, R, d, d) and
        each tensor (S, R, ...) at the recorded steps), ``rule_state`` (the rule's final state, its tensors shaped as
        the parameters; a diverged run's as at its last finite iterate, see :meth:`TokenRuns.keep`) and
        ``extra["W"]`` (the final combined matrices, shape (R, d, d); also ``result.W``).

    Raises
    ------
    ValidationError
        On both or neither of ``rule`` and ``optimizer``, non-finite initial tensors or an initial loss that is not
        finite, or an L* infimum for a run without a fixed linear head.
    """
    if (rule is None) == (optimizer is None):
        raise ValidationError("pass exactly one of rule= (a transforms Rule) and optimizer= (a torch optimizer)")
    # gradients are formed explicitly (log-scaled): no autograd graph, ever
    with torch.no_grad() if rule is None else torch.inference_mode():
        bad = [k for k, t in params.items() if not all_finite(t)]
        if bad:
            raise ValidationError(f"initial parameters {bad} are not finite; pass finite initial values")
        if optimizer is None and not trainable and kernel_applies(param, params, problem, rule, rule_state):
            space: Any = KernelSpace(problem, params["W"])
        else:
            space = ParamSpace(param, params, problem, trainable)
            space.want_weights = rule is not None and rule.needs_weights
        runs = TokenRuns(space, rule, rule_state, optimizer, optimizer_params, recorder or Recorder())
        result = run_loop(runs, steps, record_every=record_every, callbacks=callbacks, progress=progress, desc=desc)
        state = runs.rule_state
        if isinstance(space, KernelSpace) and state:
            state = _directions_as_matrices(rule, state, space)
        result.params, result.extra = space.params(), {"W": space.W()}
        result.iterates, result.rule_state = runs.recorder.iterates(), state or []
    return result if rule is None else _ordinary(result)


class TokenRuns(LoopProblem):
    """R runs of token-selection attention as a problem of the one loop (:class:`attnlab.training.loop.LoopProblem`).

    Parameters
    ----------
    space : ParamSpace or KernelSpace
        Where the runs' parameters live; owned from here on.
    rule : Rule or None
        The update rule (None: ``optimizer`` steps).
    rule_state : list or None
        The rule's state to start from (None: ``rule.init``).
    optimizer : torch.optim.Optimizer or None
        A torch optimizer over ``optimizer_params`` instead of ``rule``.
    optimizer_params : mapping of str to torch.Tensor or None
        The tensors ``optimizer`` was built over, sharing storage with the space's (see :func:`fit`).
    recorder : Recorder
        What to record.
    """

    def __init__(
        self,
        space: Any,
        rule: Rule | None,
        rule_state: list[Any] | None,
        optimizer: torch.optim.Optimizer | None,
        optimizer_params: Mapping[str, torch.Tensor] | None,
        recorder: Recorder,
    ) -> None:
        problem = space.problem
        self.space, self.rule, self.optimizer, self.optimizer_params = space, rule, optimizer, optimizer_params
        self.recorder = recorder
        self.runs, self.device = problem.X.shape[0], problem.X.device
        tensors = [space.theta[k] for k in space.names] if isinstance(space, ParamSpace) else [space.omega]
        self.rule_state = rule.init(tensors) if rule is not None and rule_state is None else rule_state
        self.ctx = Context(params=[], run_dims=1, norms=space.norms, gradient_at=getattr(space, "gradient_at", None))
        self.reads_loss = rule is None or rule.needs_loss
        self.reads_excess = rule is not None and rule.needs_excess
        if self.reads_excess and not isinstance(problem.v, torch.Tensor):
            raise ValidationError(
                "optimal_loss='infimum' reads L - L_* of a fixed linear head; this run "
                + ("trains its head" if problem.v is None else "has a nonlinear head")
                + ": pass the number L_* instead"
            )
        self.scores = token_scores(problem.X, problem.y, problem.v) if self.reads_excess else None  # fixed: once
        self.current: dict[str, torch.Tensor] = {}
        self.previous_rule_state: list[Any] | None = None  # the rule's state before the last step, for keep
        self.optimizer_state: dict[Any, dict[str, Any]] = {}  # a torch optimizer's state before the last step

    def gradient(self, step: int, records: bool) -> Gradient:
        return self.space.gradient(risk=self.reads_loss or records)

    def guard(self, gradient: Gradient) -> torch.Tensor | None:
        log_scale = gradient.log_scale
        # a sum of finite logs cannot overflow: one sync (one run: its own value, no sum formed)
        if math.isfinite(float(log_scale if log_scale.numel() == 1 else log_scale.sum())):
            return None
        return ~torch.isfinite(gradient.log_scale)

    def record(self, step: int, gradient: Gradient, active: torch.Tensor) -> dict[str, Any]:
        self.current = self.space.params()
        return self.recorder.record(step, self.space, gradient, active, self.current, self.rule_state)

    def state(self) -> dict[str, Any]:
        """The rule's state and the current tensors, for callbacks."""
        return {"rule_state": self.rule_state, **self.current}

    def apply(self, step: int, gradient: Gradient, active: torch.Tensor) -> None:
        if self.optimizer is not None:
            # copied before every step (the optimizer updates its state in place), so keep can put a run back
            self.optimizer_state = {
                param: map_tensors(entries, torch.Tensor.clone) for param, entries in self.optimizer.state.items()
            }
            _torch_step(self.optimizer, self.optimizer_params, self.space, gradient)
            return
        ctx, space = self.ctx, self.space
        params = [space.theta[k] for k in space.names] if isinstance(space, ParamSpace) else [space.omega]
        ctx.params, ctx.log_risk, ctx.weights = params, gradient.log_risk, gradient.weights
        if self.reads_excess:  # spec ngd §4 A3: L - L_* from the margins (models.excess_risk)
            X, Z, y, v, loss = space.problem
            ctx.log_excess = log_excess_risk(X, Z, y, v, space.W(), loss, scores=self.scores)
        ctx.step = step
        # no copy: every transform's update is pure (returns new state, never writes into the old), so a reference
        # keeps the state before this step for keep
        self.previous_rule_state = self.rule_state
        update, self.rule_state = self.rule.step(gradient.mantissas, gradient.log_scale, self.rule_state, ctx)
        space.apply(self.rule, update)

    def keep(self, runs: torch.Tensor) -> None:
        """Put ``runs`` back to their parameters and rule state before the last step (the loop's divergence policy).

        Every tensor of the rule's state with the runs axis first (momentum and Adam buffers, their log-scales, the
        flow's ``log_time`` and ``phi``) takes the runs' values from the state before the step; an entry that was
        None then (a buffer not started yet: the run diverged on its first step) becomes the empty buffer for them,
        0 (a per-run log-scale, shape (R,): ``-inf``, the scale of 0). A count shared by every run (Adam's or a
        schedule's step count, a plain integer) cannot be put back per run: it keeps counting the steps of the
        runs still going. A ``torch.optim`` optimizer's own state is copied before each step and put back the
        same way (per run where its tensors have the runs axis first; the whole state, its step count included,
        for a model of one run), so the optimizer a diverged run returns goes on from its last good step.

        Parameters
        ----------
        runs : torch.Tensor, shape (R,), bool
        """
        self.space.keep(runs)
        if self.optimizer is not None:
            _put_back_optimizer(self.optimizer.state, self.optimizer_state, runs)
        elif self.previous_rule_state is not None:
            self.rule_state = _put_back(self.previous_rule_state, self.rule_state, runs)


def _put_back(previous: Any, current: Any, runs: torch.Tensor) -> Any:
    """``current`` (a rule state) with the entries of ``runs`` taken from ``previous`` (see :meth:`TokenRuns.keep`)."""
    if isinstance(current, dict):
        return {
            k: _put_back(previous.get(k) if isinstance(previous, dict) else None, v, runs) for k, v in current.items()
        }
    if isinstance(current, (list, tuple)):
        before = previous if isinstance(previous, (list, tuple)) else [None] * len(current)
        return type(current)(_put_back(p, c, runs) for p, c in zip(before, current))
    if not isinstance(current, torch.Tensor) or current.dim() == 0 or current.shape[0] != runs.shape[0]:
        return current  # shared by every run (a step count): nothing to put back per run
    if previous is None:
        if bool(runs.all()):
            return None  # every run back before its first step: the state as it was
        previous = torch.full_like(current, -math.inf if current.dim() == 1 else 0.0)  # the empty buffer
    mask = runs.to(current.device).view(-1, *(1,) * (current.dim() - 1))
    return torch.where(mask, previous, current)


def _put_back_optimizer(
    state: Mapping[Any, dict[str, Any]], before: Mapping[Any, Mapping[str, Any]], runs: torch.Tensor
) -> None:
    """Write the entries of ``runs`` of ``before`` into a torch optimizer's ``state``, in place: tensors whose first
    axis is the runs axis (a run that had no state before its step, which diverged on its first step, gets 0 there,
    the state a torch optimizer starts from); a step count shared by the runs stays. With one run, the whole state
    goes back: every entry, the step count included, and none for a parameter that had none (the run's first step).
    """
    if runs.shape[0] == 1:
        if bool(runs.all()):
            for param in list(state):
                if param in before:
                    state[param] = before[param]  # a copy already (map_tensors rebuilt it)
                else:
                    del state[param]
        return
    for param, entries in state.items():
        for key, value in entries.items():
            if not isinstance(value, torch.Tensor) or value.dim() == 0 or value.shape[0] != runs.shape[0]:
                continue
            old = before.get(param, {}).get(key)
            mask = runs.to(value.device)
            if old is None:
                value[mask] = 0
            elif isinstance(old, torch.Tensor) and old.shape == value.shape:
                value[mask] = old[mask]


def _ordinary(result: TrainingResult) -> TrainingResult:
    """``result`` with every tensor copied out of inference mode (usable with autograd and in-place updates)."""
    for name in ("params", "extra", "iterates", "rule_state"):
        setattr(result, name, map_tensors(getattr(result, name), lambda t: t.clone() if t.is_inference() else t))
    return result


def _torch_step(
    optimizer: torch.optim.Optimizer, params: Mapping[str, torch.Tensor], space: ParamSpace, gradient: Gradient
) -> None:
    """One step of a ``torch.optim`` optimizer over ``params``, which alias ``space``'s tensors.

    The previous iterate is copied first (the optimizer moves the tensors in place), so the divergence policy can
    put a run back.
    """
    space.spare = {k: t.detach().clone() for k, t in space.theta.items()}
    mantissas = bool(getattr(optimizer, "scale_invariant", False))

    def load(g: Gradient) -> torch.Tensor:
        # an optimizer that declares scale_invariant = True gets the mantissas (its step ignores a positive
        # rescaling of the gradients), so it stays exact after the gradient underflows
        scale = torch.ones_like(g.log_scale) if mantissas else torch.exp(g.log_scale)
        for name, m in zip(space.names, g.mantissas):
            p = params[name]
            if name in space.frozen:
                p.grad = None  # as in a plain torch loop: a frozen tensor has no gradient, so no optimizer moves it
                continue
            p.grad = (m * scale.reshape((-1,) + (1,) * (m.dim() - 1))).reshape(p.shape).to(p.dtype)
        return torch.exp(g.log_risk).sum()

    loaded = load(gradient)
    calls = [0]

    def closure() -> torch.Tensor:
        # the first call is this step's gradient, already loaded; later calls (line searches) recompute it at the
        # optimizer's trial point
        calls[0] += 1
        if calls[0] == 1:
            return loaded
        with torch.no_grad():
            return load(space.gradient())

    optimizer.step(closure)
