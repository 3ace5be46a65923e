"""What every attnlab optimizer shares: a thin ``torch.optim.Optimizer`` shell around one pure functional update.

The shell collects, over all parameter groups, the tensors that have a gradient together with their group's
hyperparameters, runs the closure when one is given, builds the rule (:class:`attnlab.optim.transforms.Rule`) from
the groups' hyperparameters (once: it is kept until the tensors or a hyperparameter change, so what a transform
works out once, such as ``normalize``'s plan, stays worked out), runs it, keeps the rule's state in
``self.state[p]`` and copies the new values into the parameters. The training engine asks the same optimizer for
the same rule (:meth:`FunctionalOptimizer.rule`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.optim import Optimizer

from attnlab._validation import ValidationError
from attnlab.optim.transforms import Context, Rule

Closure = Callable[[], torch.Tensor]


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

    Subclasses set ``scale_invariant = ScaleInvariance(default)`` and implement ``_check_group(group)`` (raise
    :class:`~attnlab._validation.ValidationError` naming the bad hyperparameter), ``_group_is_scale_invariant(group)``
    and ``_rule(groups, group_ids) -> Rule`` (the chain of transforms for tensors in those groups); ``_needs_loss()``
    says whether ``step`` must be given a closure.
    """

    _kept: tuple[tuple, Rule] | None = None  # (what the rule was built for, the rule)
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
        """
        loss = loss_value(closure, type(self).__name__, needs_loss=self._needs_loss())
        tensors = self._gather()
        if not tensors.params:
            return loss
        rule = self._kept_rule(tensors.params, tensors.groups, tensors.group_ids)
        log_risk = None if loss is None else torch.log(torch.as_tensor(loss).detach().to(torch.float64))
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
        raise NotImplementedError

    def _rule_inputs(self) -> dict:
        """What the rule is built from besides the groups (attributes of the optimizer)."""
        return {}

    def _needs_loss(self) -> bool:
        return False

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        try:
            self._check_group(self.param_groups[-1])
        except ValidationError:
            self.param_groups.pop()  # leave the optimizer as it was before the bad group
            raise

    def _check_group(self, group: dict) -> None:
        raise NotImplementedError

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
                    raise TypeError(f"{type(self).__name__} does not support sparse gradients; use dense ones")
                gathered.params.append(param)
                gathered.grads.append(param.grad)
                gathered.groups.append(group)
                gathered.group_ids.append(index)
        return gathered

    @staticmethod
    def _write(params: Sequence[torch.Tensor], new_params: Sequence[torch.Tensor]) -> None:
        for param, new in zip(params, new_params):
            param.copy_(new)


def _hyperparameters(group: dict) -> tuple:
    """A group's hyperparameters as a comparable key: plain values as they are, other objects by identity."""
    plain = (bool, int, float, str, type(None))
    return tuple(
        (k, v if isinstance(v, plain) else (type(v).__name__, id(v))) for k, v in sorted(group.items()) if k != "params"
    )
