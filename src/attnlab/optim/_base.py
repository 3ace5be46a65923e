"""What every attnlab optimizer shares: a thin ``torch.optim.Optimizer`` shell around one pure functional update.

The shell collects, over all parameter groups, the tensors that have a gradient together with their group's
hyperparameters, runs the closure when one is given, builds the rule (:class:`attnlab.optim.transforms.Rule`) from
the groups' hyperparameters (once: it is kept until the tensors or a hyperparameter change, so what a transform
works out once, such as ``normalize``'s plan, stays worked out), runs it, keeps the rule's state in
``self.state[p]`` and copies the new values into the parameters. The training engine asks the same optimizer for
the same rule (:meth:`FunctionalOptimizer.rule`).
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.optim import Optimizer

from attnlab._validation import ValidationError, check_scalar
from attnlab.optim import registry
from attnlab.optim.transforms import Context, Rule, per_tensor

Closure = Callable[[], torch.Tensor]


def checked_hyperparameters(entry: str, n: int, **values: Any) -> list[list]:
    """The hyperparameters of one functional step (``lr=..., p=...``), each given once or per tensor, as lists of
    length ``n``, every value checked by the option of that name of the registry entry ``entry``: the check the
    optimizer class runs on its groups (a tensor of one value per run entry by entry). The values are returned as
    given, so the step computes with them as it did unchecked.

    Raises
    ------
    ValidationError
        ``"lr == -1.0, must be > 0.0"`` style messages, naming the hyperparameter.
    """
    options = registry.get(entry).all_options
    lists = []
    for name, value in values.items():
        given = per_tensor(value, n, name)
        for v in given:
            entries = v.detach().reshape(-1).tolist() if isinstance(v, torch.Tensor) and v.dim() else [v]
            for x in entries:
                options[name].check(name, x)
        lists.append(given)
    return lists


def checked_values(name: str, value: object, *, nonnegative: bool = True) -> torch.Tensor:
    """``value`` (a number, or one per run) as a float64 tensor (``torch.as_tensor``: a tensor keeps its graph),
    refused unless finite and, with ``nonnegative``, ``>= 0`` (a loss, a norm).

    Raises
    ------
    ValidationError
        ``"norm == [nan], must be finite and >= 0"`` style messages.
    """
    try:
        tensor = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValidationError(
            f"{name} must be a number or a tensor of one per run, got {type(value).__name__}"
        ) from err
    bad = ~torch.isfinite(tensor) | (tensor < 0 if nonnegative else False)
    if bool(bad.any()):
        shown = tensor.item() if tensor.dim() == 0 else tensor.detach().reshape(-1)[:5].tolist()
        more = f" ({tensor.numel()} values)" if tensor.numel() > 5 else ""
        bound = "finite and >= 0" if nonnegative else "finite"
        raise ValidationError(f"{name} == {shown}{more}, must be {bound}; pass the value of the current iterate")
    return tensor


def check_step_tensors(params: Sequence[Any], grads: Sequence[Any], run_dims: object = 0) -> int:
    """Refuse a functional step's ``params`` and ``grads`` unless they are as many tensors, of the same shapes (at
    least one), and ``run_dims`` unless it is a count of leading axes; return the number of tensors.

    Raises
    ------
    ValidationError
        Naming ``params``, ``grads`` or ``run_dims``.
    """
    check_scalar("run_dims", run_dims, kind=int, low=0)
    params, grads = list(params), list(grads)
    if not params or len(params) != len(grads):
        raise ValidationError(
            f"params has {len(params)} tensors and grads {len(grads)}; pass at least one parameter and one gradient "
            "per parameter, in the same order"
        )
    for i, (param, grad) in enumerate(zip(params, grads)):
        if not isinstance(param, torch.Tensor) or not isinstance(grad, torch.Tensor) or param.shape != grad.shape:
            shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__ for t in (param, grad)]
            raise ValidationError(
                f"params[{i}] is {shapes[0]} but grads[{i}] is {shapes[1]}; pass tensors, each gradient of its "
                "parameter's shape"
            )
    return len(params)


def loss_value(closure: Closure | None, optimizer: str, needs_loss: bool) -> torch.Tensor | None:
    """Run ``closure`` with gradients enabled and return its loss; refuse a missing closure when the rule needs it."""
    if closure is None:
        if needs_loss:
            raise ValidationError(
                f"closure is None, but {optimizer} needs the loss value at every step; call "
                f"optimizer.step(closure) with a closure that zeroes the gradients, computes the loss, calls "
                f"loss.backward() and returns the loss"
            )
        return None
    with torch.enable_grad():
        return closure()


@dataclass
class GatheredTensors:
    """The parameters that have a gradient, flattened over groups, with each one's group and group index."""

    params: list[torch.Tensor]
    grads: list[torch.Tensor]
    groups: list[dict]
    group_ids: list[int]

    def hyper(self, name: str) -> list:
        """The hyperparameter ``name`` of each tensor's group."""
        return [group[name] for group in self.groups]


class ScaleInvariance:
    """The ``scale_invariant`` attribute of an optimizer class: a bool on the class, read live on an instance.

    On the class it is ``default``, the value for the default hyperparameters. On an instance it is True only if
    every parameter group's rule (``_group_is_scale_invariant``) is unchanged when each step's gradients are all
    multiplied by one positive constant (the constant may change from step to step), so it follows groups added,
    edited or loaded later.
    """

    def __init__(self, default: bool) -> None:
        self.default = default

    def __get__(self, optimizer: FunctionalOptimizer | None, owner: type) -> bool:
        if optimizer is None:
            return self.default
        return all(optimizer._group_is_scale_invariant(group) for group in optimizer.param_groups)


class FunctionalOptimizer(Optimizer):
    """Base of attnlab's optimizers: validates every parameter group and runs the group's rule at ``step``.

    Subclasses name their registry entry in ``entry_name`` (:mod:`attnlab.optim.registry`): its options check every
    group once (type and bounds; a key the class does not take is refused by name), and its chain is the rule
    (``_rule(groups, group_ids) -> Rule``, the chain of transforms for tensors in those groups; ``_rule_inputs()``
    adds the class's own arguments that are not group keys). They set ``scale_invariant = ScaleInvariance(default)``
    and implement ``_group_is_scale_invariant(group)``; ``_needs_loss()`` says whether ``step`` must be given a
    closure.
    """

    entry_name = ""  # the registry entry whose options and chain this class runs

    def __init__(self, params: Any, defaults: dict) -> None:
        """``torch.optim.Optimizer``'s, with an empty ``params`` refused by name (torch says "optimizer got an empty
        parameter list")."""
        params = params if isinstance(params, torch.Tensor) else list(params)  # a tensor: torch's own message
        if isinstance(params, list) and not params:
            raise ValidationError(
                f"params is empty: {type(self).__name__} got no parameters to optimise; pass the model's parameters "
                "(model.parameters() of a model that has some) or a list of at least one tensor"
            )
        super().__init__(params, defaults)

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Give each subclass's own ``__init__`` a refusal of unknown keywords by name (Python's ``TypeError`` names
        the keyword, not the arguments the class takes: ``Adam(betas=...)`` is torch's spelling, ours
        ``beta1, beta2``)."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return
        parameters = inspect.signature(init).parameters
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            return  # a generated class: its keywords are checked against its options

        @functools.wraps(init)
        def checked(self: FunctionalOptimizer, *args: object, **keywords: object) -> None:
            unknown = sorted(set(keywords) - set(parameters))
            if unknown:
                taken = [name for name in parameters if name not in ("self", "params")]
                raise ValidationError(f"{cls.__name__} takes no {unknown}; its arguments are params and {taken}")
            init(self, *args, **keywords)

        cls.__init__ = checked  # type: ignore[method-assign]

    _kept: tuple[tuple, Rule] | None = None  # (what the rule was built for, the rule)
    _reads_loss: tuple[tuple, bool] | None = None  # (the groups' setting, whether their rule reads the loss)
    _steps_taken = 0  # steps taken by this object (Context.step)

    @torch.no_grad()
    def step(self, closure: Closure | None = None) -> torch.Tensor | None:
        """Take one step and return the loss; ``closure`` recomputes the loss and the gradients.

        The closure is optional unless the rule needs the loss value (Polyak step, the loss normaliser of the
        joint adaptive rule); parameters without a gradient are skipped.

        Parameters
        ----------
        closure : callable, optional
            ``closure() -> loss``: zeroes the gradients, recomputes the loss and calls ``backward``, as for any
            ``torch.optim.Optimizer``.

        Returns
        -------
        torch.Tensor or None
            The loss the closure returned (None without a closure).

        Raises
        ------
        ValidationError
            If the rule reads the loss and no closure is given, or the closure returned a negative loss.
        """
        needs_loss = self._needs_loss()
        loss = loss_value(closure, type(self).__name__, needs_loss=needs_loss)
        tensors = self._gather()
        if not tensors.params:
            return loss
        rule = self._kept_rule(tensors.params, tensors.groups, tensors.group_ids)
        log_risk = None if loss is None else torch.log(torch.as_tensor(loss).detach().to(torch.float64))
        if needs_loss and bool((torch.as_tensor(loss) < 0).any()):  # its log, nan, would print as the loss
            raise ValidationError(
                f"loss == {torch.as_tensor(loss).tolist()}, what the closure returned, must be >= 0: "
                f"{type(self).__name__} reads the loss value at every step; return the loss itself from the closure "
                "(a loss is never negative)"
            )
        ctx = Context(
            params=tensors.params, run_dims=0, log_risk=log_risk, groups=tensors.group_ids, step=self._steps_taken
        )
        state = self.load_rule_state(rule, tensors.params)
        step, state = rule.step(tensors.grads, torch.zeros((), dtype=torch.float64), state, ctx)
        self._write(tensors.params, rule.apply(tensors.params, step))
        self.save_rule_state(rule, tensors.params, state)
        self._steps_taken = self._steps_taken + 1
        return loss

    def _kept_rule(self, params: Sequence[torch.Tensor], groups: list[dict], group_ids: list[int]) -> Rule:
        """The rule for ``params``, built once and kept while the tensors and every hyperparameter stay the same."""
        groups_key = tuple(_hyperparameters(g) for g in self.param_groups)
        key = (tuple(id(p) for p in params), tuple(group_ids), groups_key, _hyperparameters(self._rule_inputs()))
        if self._kept is None or self._kept[0] != key:
            for group in self.param_groups:  # values set since (by hand, a scheduler, a state dict): checked once each
                self._check_group(group)
            self._kept = (key, self._rule(groups, group_ids))
        return self._kept[1]

    def rule(self, params: Sequence[torch.Tensor]) -> Rule:
        """The rule this optimizer applies to ``params`` (each must be in one of its groups), for the engine."""
        where = {id(p): (group, index) for index, group in enumerate(self.param_groups) for p in group["params"]}
        missing = [i for i, p in enumerate(params) if id(p) not in where]
        if missing:
            raise ValidationError(
                f"parameters at positions {missing} are not in any group of this {type(self).__name__}; build the "
                "optimizer on the model's parameters (model.parameters())"
            )
        groups, ids = zip(*(where[id(p)] for p in params))
        return self._kept_rule(params, list(groups), list(ids))

    def load_rule_state(self, rule: Rule, params: Sequence[torch.Tensor]) -> list:
        """The rule's state for ``params``, read from ``self.state[p]`` (fresh where a tensor has none)."""
        state = rule.init(params)
        for s in state:
            if isinstance(s, dict):
                for key, values in s.items():
                    for i, p in enumerate(params):
                        if key in self.state[p]:
                            values[i] = self.state[p][key]
        return state

    def save_rule_state(self, rule: Rule, params: Sequence[torch.Tensor], state: list) -> None:
        """Write the rule's per-tensor state into ``self.state[p]`` (``state_dict`` saves it)."""
        for s in state:
            if isinstance(s, dict):
                for key, values in s.items():
                    for p, value in zip(params, values):
                        if value is not None:
                            self.state[p][key] = value

    def _rule(self, groups: list[dict], group_ids: list[int]) -> Rule:
        entry = registry.get(self.entry_name)
        return entry.rule(registry.group_hyper(entry, groups, group_ids, **self._rule_inputs()))

    def _rule_inputs(self) -> dict:
        """What the rule is built from besides the groups (attributes of the optimizer)."""
        return {}

    def _needs_loss(self) -> bool:
        """Whether the groups' rule reads the loss (the rule per group, built once per setting of the groups)."""
        key = (tuple(_hyperparameters(g) for g in self.param_groups), _hyperparameters(self._rule_inputs()))
        if self._reads_loss is None or self._reads_loss[0] != key:
            groups = list(self.param_groups)
            self._reads_loss = (key, self._rule(groups, list(range(len(groups)))).needs_loss)
        return self._reads_loss[1]

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state saved by :meth:`state_dict` of this class; refuse another optimizer's by name.

        ``torch.optim.Optimizer`` loads any state dict with as many groups and parameters: another optimizer's
        would leave this one's hyperparameters missing (filled with defaults: another rule, silently) or foreign.

        Raises
        ------
        ValidationError
            When a saved group's hyperparameters are not this class's (the state of another optimizer), or a value
            is out of its range.
        """
        for i, group in enumerate(state_dict.get("param_groups", ())):
            keys = set(group) - {"params", "param_names"}
            if keys != set(self.defaults):
                raise ValidationError(
                    f"state_dict's parameter group {i} has the hyperparameters {sorted(keys)}, but "
                    f"{type(self).__name__}'s are {sorted(self.defaults)}: it was saved by another optimizer; load "
                    f"a state dict saved by a {type(self).__name__}"
                )
        super().load_state_dict(state_dict)
        self._kept = self._reads_loss = None
        for group in self.param_groups:
            self._check_group(group)

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        try:
            self._check_group(self.param_groups[-1])
        except ValidationError:
            self.param_groups.pop()  # leave the optimizer as it was before the bad group
            raise

    def _check_group(self, group: dict) -> None:
        """Check the group's hyperparameters with the registry entry's options (converted in place)."""
        self._check_options(group, skip=())

    def _check_options(self, group: dict, skip: tuple[str, ...]) -> None:
        """Refuse keys the class does not take; check every other hyperparameter but ``skip`` by its option."""
        index = next((i for i, g in enumerate(self.param_groups) if g is group), len(self.param_groups) - 1)
        unknown = sorted(set(group) - set(self.defaults) - {"params"})
        if unknown:
            raise ValidationError(
                f"parameter group {index} sets {unknown}, which {type(self).__name__} does not take; its "
                f"hyperparameters are {sorted(self.defaults)}"
            )
        options = registry.get(self.entry_name).all_options
        for name in self.defaults:
            if name not in options or name in skip:
                continue
            group[name] = options[name].check(name, group[name])
            if options[name].shared and group[name] != self.defaults[name]:
                raise ValidationError(
                    f"{name} == {group[name]!r} in a parameter group, but the optimizer's {name} is "
                    f"{self.defaults[name]!r}: it is one value over all parameters; drop {name} from the group or "
                    "build one optimizer per setting"
                )

    def _group_is_scale_invariant(self, group: dict) -> bool:
        raise NotImplementedError

    def _gather(self) -> GatheredTensors:
        """Collect the parameters with a gradient (others are skipped, as in ``torch.optim.SGD``)."""
        gathered = GatheredTensors([], [], [], [])
        for index, group in enumerate(self.param_groups):
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise ValidationError(
                        f"a parameter of group {index} has a sparse gradient, which {type(self).__name__} does not "
                        "support; use dense gradients (e.g. nn.Embedding(..., sparse=False))"
                    )
                gathered.params.append(param)
                gathered.grads.append(param.grad)
                gathered.groups.append(group)
                gathered.group_ids.append(index)
        return gathered

    @staticmethod
    def _write(params: Sequence[torch.Tensor], new_params: Sequence[torch.Tensor]) -> None:
        for param, new in zip(params, new_params):
            param.copy_(new)


def generated_class(entry: registry.OptimizerEntry) -> type[FunctionalOptimizer]:
    """The ``torch.optim`` class of a registry entry that names none: its options as keyword arguments (defaults
    the entry's), its chain as the rule."""
    options = {name: o for name, o in entry.all_options.items() if o.group and not o.engine_only}

    def __init__(self, params, **hyperparameters) -> None:  # noqa: N807
        unknown = sorted(set(hyperparameters) - set(options))
        if unknown:
            raise ValidationError(
                f"{type(self).__name__} takes no argument {unknown}; its hyperparameters are {sorted(options)}"
            )
        FunctionalOptimizer.__init__(self, params, {**{k: o.default for k, o in options.items()}, **hyperparameters})

    lines = [f"    {name} : default={o.default!r}\n        {o.doc}" for name, o in options.items()]
    doc = (
        f"{entry.summary[0].upper()}{entry.summary[1:]} (the optimizer {entry.name!r} of the registry).\n\n"
        f"    Spec: {entry.spec}. Generated from its registry entry: the rule is the entry's chain.\n\n"
        "    Parameters\n    ----------\n    params : iterable of torch.Tensor or of dict\n"
        "        Parameters or parameter groups; every hyperparameter below may be overridden per group.\n"
        + "\n".join(lines)
        + "\n\n    Attributes\n    ----------\n    scale_invariant : bool\n        False (not declared).\n"
    )
    name = entry.class_name or "".join(part.capitalize() for part in re.split(r"[-_]", entry.name))
    return type(
        name,
        (FunctionalOptimizer,),
        {
            "__init__": __init__,
            "__doc__": doc,
            "__module__": "attnlab.optim",
            "entry_name": entry.name,
            "scale_invariant": ScaleInvariance(default=False),
            "_group_is_scale_invariant": lambda self, group: False,
        },
    )


def _hyperparameters(group: dict) -> tuple:
    """A group's hyperparameters as a comparable key: plain values as they are, other objects by identity."""
    plain = (bool, int, float, str, type(None))
    return tuple(
        (k, v if isinstance(v, plain) else (type(v).__name__, id(v))) for k, v in sorted(group.items()) if k != "params"
    )
