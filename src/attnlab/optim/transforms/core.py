"""The framework every transform runs in: a :class:`Step` under construction, the :class:`Context` a transform may
read, the :class:`Transform` pair of pure functions and the :class:`Rule` that chains them and applies the step.

Spec: implicit-bias-ngd §4 (the updates as log coefficients on gradient mantissas), mirror-descent-lp §3-4 (the l_p
mirror-map update).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from attnlab._numerics import inverse_mirror_map, mirror_map
from attnlab._validation import ValidationError

Norms = Callable[[Sequence[torch.Tensor], Sequence[Hashable] | None, float], list[torch.Tensor]]


class Step(NamedTuple):
    """An update under construction: ``theta_i <- theta_i - factor_i * exp(log_coef_i) * direction_i``.

    Attributes
    ----------
    direction : list of torch.Tensor, shapes ([R,] ...)
        Mantissas of the base direction (the gradient, or a momentum buffer).
    log_scale : torch.Tensor, shape ([R,])
        The base direction's true value is ``direction * exp(log_scale)``.
    log_coef : list of torch.Tensor, shape ([R,]) each
        Log coefficient of each tensor's mantissa (``-inf``: no step).
    factor : list of float or torch.Tensor of shape ([R,])
        Learning rates, kept as plain multipliers so that ``exp(0) * eta`` is ``eta`` to the bit (GD through a rule
        equals ``torch.optim.SGD`` exactly).
    """

    direction: list[torch.Tensor]
    log_scale: torch.Tensor
    log_coef: list[torch.Tensor]
    factor: list[float | torch.Tensor]

    def log_total(self, i: int) -> torch.Tensor:
        """Log of tensor ``i``'s full coefficient, ``log_coef + log factor``."""
        return self.log_coef[i] + _log(self.factor[i], self.log_coef[i])


def block_norms(
    tensors: Sequence[torch.Tensor],
    blocks: Sequence[Hashable] | None = None,
    run_dims: int = 0,
    ord: float = 2.0,
    *,
    rescue: bool = False,
) -> list[torch.Tensor]:
    r"""Entrywise l_ord norm of the block each tensor belongs to, per run; one float64 tensor per tensor.

    Parameters
    ----------
    tensors : sequence of torch.Tensor, shapes ([R,] ...)
    blocks : sequence of hashable, one per tensor, optional
        Tensors with equal labels share one norm :math:`(\sum_{i \in b} \|t_i\|_{ord}^{ord})^{1/ord}`; ``None``
        puts every tensor in one block (the global norm).
    run_dims : int, default=0
        Leading axes that index independent runs; each run gets its own norm.
    ord : float, default=2
    rescue : bool, default=False
        Where a run's plain norm overflows to ``inf``, or underflows (to 0, or through subnormal numbers that keep
        few bits) although its entries are finite and not all zero (``ord`` in the hundreds for l_p mirror descent
        with ``p`` near 1, or true gradients far from 1), take it as ``s ||t / s||_ord`` with ``s`` the largest
        ``|entry|`` instead; elsewhere the plain norm is kept to the bit. It costs a check of each norm on the CPU
        and two more passes over each tensor, with no host sync, on an accelerator; l_p mirror descent's dual-norm
        normalisation and every other rule on true gradients take it (:meth:`Context.block_norms`), the engine's
        mantissas (largest entry about 1) go without.

    Returns
    -------
    list of torch.Tensor, shape ([R,]), float64
    """
    labels = [0] * len(tensors) if blocks is None else list(blocks)
    if len(labels) != len(tensors):
        raise ValidationError(f"blocks has {len(labels)} labels for {len(tensors)} tensors; pass one per tensor")
    norm = _rescued_norm if rescue else _tensor_norm
    if len(tensors) == 1:  # one tensor, one block: its own norm (the step of a single-tensor model)
        return [norm(tensors[0], run_dims, ord)]
    members: dict[Hashable, list[torch.Tensor]] = {}
    for label, tensor in zip(labels, tensors):
        members.setdefault(label, []).append(norm(tensor, run_dims, ord))
    norms = {
        label: parts[0] if len(parts) == 1 else (_rescued_stack(parts, ord) if rescue else _stacked(parts, ord))
        for label, parts in members.items()
    }
    return [norms[label] for label in labels]


def _stacked(parts: list[torch.Tensor], ord: float) -> torch.Tensor:
    """The l_ord norm of the per-tensor norms of one block, per run (the plain form, as the engine takes it)."""
    return torch.linalg.vector_norm(torch.stack(parts), ord, dim=0)


def _tensor_norm(tensor: torch.Tensor, run_dims: int, ord: float) -> torch.Tensor:
    """Entrywise l_ord norm of one tensor per run, float64 (``|tensor|`` when it has only runs axes)."""
    dims = tuple(range(run_dims, tensor.dim()))
    part = torch.linalg.vector_norm(tensor, ord, dim=dims) if dims else tensor.abs()
    return part if part.dtype == torch.float64 else part.to(torch.float64)


def _rescued_norm(tensor: torch.Tensor, run_dims: int, ord: float) -> torch.Tensor:
    """:func:`_tensor_norm` with :func:`_rescue`: exact at any size of the entries."""
    dims = tuple(range(run_dims, tensor.dim()))
    return _rescue(_tensor_norm(tensor, run_dims, ord), tensor, dims, ord)


def _rescued_stack(parts: list[torch.Tensor], ord: float) -> torch.Tensor:
    """:func:`_stacked` with :func:`_rescue`: one block's norm from its tensors' norms, exact at any size."""
    stack = torch.stack(parts)
    return _rescue(torch.linalg.vector_norm(stack, ord, dim=0), stack, (0,), ord)


def _rescue(plain: torch.Tensor, tensor: torch.Tensor, dims: tuple[int, ...], ord: float) -> torch.Tensor:
    """``plain`` (the l_ord norm of ``tensor`` over ``dims``, float64), taken again as ``s ||tensor / s||_ord`` with
    ``s`` the largest ``|entry|`` in the runs where the plain sum of ``|entry|^ord`` left the normal range (``inf``, or
    ``s^ord`` below the smallest normal number, where it lost bits or all of them) although the entries are finite
    and not all zero; bit for bit ``plain`` elsewhere. On an accelerator it runs with no host sync (both forms, then
    ``torch.where``); on the CPU it looks at the entries again only when ``plain`` is near the ends of the range.

    Spec: mirror-descent-lp §4 (``||G||_q`` with ``q = p / (p - 1)`` in the hundreds for ``p`` near 1); the same
    rescaling as :func:`attnlab.geometry._unit_scale` and :func:`~attnlab.optim.transforms.steepest`.
    """
    if not dims or not 0 < ord < math.inf or tensor.numel() == 0:  # |entry| and max |entry| are exact at any size
        return plain
    normal = torch.finfo(tensor.dtype).tiny ** (1.0 / ord)  # below it, s^ord is subnormal or 0
    if tensor.device.type == "cpu":  # nothing waits on the CPU: skip both passes where s >= plain / n^(1/ord) >= normal
        bound = normal * (tensor.numel() // plain.numel()) ** (1.0 / ord)
        if (
            bound < float(plain) < math.inf
            if plain.numel() == 1
            else bool(((plain > bound) & (plain < math.inf)).all())
        ):
            return plain
    largest = torch.linalg.vector_norm(tensor, math.inf, dim=dims, keepdim=True)  # s; nan or inf: left as is
    fell = plain.view(largest.shape)
    lost = ((largest > 0) & (largest < normal)) | ((fell == math.inf) & (largest < math.inf))
    unit = torch.where(lost, largest, 1.0)  # 1 where the plain norm stands: no 0 / 0, nothing to undo
    scaled = torch.linalg.vector_norm(tensor / unit, ord, dim=dims, keepdim=True).to(torch.float64)
    return torch.where(lost, unit.to(torch.float64) * scaled, fell).view(plain.shape)  # md §4: ||G|| = s ||G / s||


@dataclass
class Context:
    """What a transform may read besides the step: current parameters, loss, blocks and how norms are taken.

    Attributes
    ----------
    params : list of torch.Tensor
        Current parameters (``([R,] ...)``), in the order of the step's tensors.
    run_dims : int
        Leading runs axes (0 for a ``torch.optim`` step, 1 in the engine).
    log_risk : torch.Tensor, shape ([R,]), optional
        ``log L`` at the current parameters (Polyak step, loss normaliser).
    log_excess : torch.Tensor, shape ([R,]), optional
        ``log(L - L_*)`` with ``L_*`` the fixed-head infimum, from the margins
        (:func:`attnlab.models.log_excess_risk`; the engine fills it for a transform with ``needs_excess``).
    groups : list of hashable
        Parameter-group label of each tensor (``normalize(blocks="group")``).
    norms : callable, optional
        ``norms(tensors, blocks, ord) -> list of ([R,])``: norms in the geometry of the parameters. Default
        :func:`block_norms`; the engine's kernel space passes norms computed through the logit kernel.
    weights : torch.Tensor, optional
        Mantissa of ``dL/ds`` at the current parameters (same ``log_scale`` as the gradient), for rules that
        integrate it (gradient flow's ``phi``).
    gradient_at : callable, optional
        ``gradient_at(tensors, risk=True) -> Gradient`` at other parameter values (multi-stage integrators;
        ``risk=False`` skips the loss where a stage does not read it).
    step : int
        Index of the step being taken (the engine's loop index; a ``torch.optim`` class counts its own steps).
    """

    params: list[torch.Tensor]
    run_dims: int = 0
    log_risk: torch.Tensor | None = None
    log_excess: torch.Tensor | None = None
    groups: list[Hashable] = field(default_factory=list)
    norms: Norms | None = None
    weights: torch.Tensor | None = None
    gradient_at: Callable[..., Any] | None = None
    step: int = 0

    def block_norms(
        self, tensors: Sequence[torch.Tensor], blocks: Sequence[Hashable] | None, ord: float = 2.0
    ) -> list[torch.Tensor]:
        """``norms`` when given (the engine's, on mantissas with a largest entry about 1), else :func:`block_norms`
        on the directions as they are, true gradients of any size (:func:`run_rule`, the ``torch.optim`` classes),
        rescued where the plain sum of ``|g|^ord`` leaves float64's normal range (a gradient below about 1e-154 or
        above 1e154 at ``ord = 2``, late in a run on separable data; ``ord`` in the hundreds for l_p mirror
        descent), so that a normalised or Polyak step is the same at any gradient size."""
        if self.norms is not None:
            return self.norms(tensors, blocks, ord)
        return block_norms(tensors, blocks, self.run_dims, ord, rescue=True)


class Transform(NamedTuple):
    """A pure update transform: ``init(params) -> state`` and ``update(step, state, context) -> (step, state)``.

    What it needs and what it guarantees are declared here, never read from its name (see "Writing a transform" in
    the module docstring). ``coefficient_only`` says the transform rescales directions or combines them linearly,
    never anything else, so it can run on any linear representation of the direction (the engine's kernel
    coefficients); ``scale_invariant`` that the update is unchanged when every gradient of a step is multiplied by
    one positive constant; ``direction_state`` names the state entries that hold directions (lists with one tensor
    or None per tensor), which the engine maps back to the parameters' shapes when it trained in another
    representation; ``needs_loss``, ``needs_excess`` and ``needs_weights`` ask for :attr:`Context.log_risk`,
    :attr:`Context.log_excess` and :attr:`Context.weights` (``dL/ds``) at every step.
    """

    name: str
    init: Callable[[Sequence[torch.Tensor]], Any]
    update: Callable[[Step, Any, Context], tuple[Step, Any]]
    coefficient_only: bool = True
    scale_invariant: bool = True
    direction_state: tuple[str, ...] = ()
    needs_loss: bool = False
    needs_weights: bool = False
    needs_excess: bool = False


def _stateless(params: Sequence[torch.Tensor]) -> None:
    return None


def per_tensor(value: Any, n: int, name: str = "a per-tensor hyperparameter") -> list:
    """A hyperparameter given once or per tensor (a list or tuple), as a list of length ``n``."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValidationError(f"{name} has {len(value)} entries for {n} tensors; pass one value or one per tensor")
        return list(value)
    return [value] * n


def _log(value: float | torch.Tensor, like: torch.Tensor) -> float | torch.Tensor:
    """``log(value)``: a float for a number, a float64 tensor for a per-run value of shape ``(R,)``."""
    if isinstance(value, torch.Tensor):
        return torch.log(value.to(dtype=torch.float64, device=like.device))
    return math.log(value) if value > 0 else -math.inf


def _expand(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A per-run value ``([R,])`` shaped to broadcast against ``like`` (``([R,] ...)``), in its dtype."""
    value = value if value.dtype == like.dtype else value.to(like.dtype)
    return value.view(*value.shape, *(1,) * (like.dim() - value.dim()))  # ints, not a Size: torch parses them faster


@dataclass(frozen=True)
class Rule:
    """A chain of transforms and how the finished step is applied.

    Attributes
    ----------
    transforms : tuple of Transform
    mirror_p : float or per-tensor sequence, optional
        ``None``: additive update ``theta - c d``. A number ``p > 1``: the l_p mirror-descent update
        ``(grad psi)^{-1}(grad psi(theta) - c d)`` with ``psi = ||.||_p^p / p`` (mirror-descent-lp §3-4).
    """

    transforms: tuple[Transform, ...]
    mirror_p: float | Sequence[float] | None = None

    @property
    def coefficient_only(self) -> bool:
        return self.mirror_p is None and all(t.coefficient_only for t in self.transforms)

    @property
    def scale_invariant(self) -> bool:
        return all(t.scale_invariant for t in self.transforms)

    @property
    def needs_weights(self) -> bool:
        """Whether a transform reads ``dL/ds`` (:attr:`Context.weights`)."""
        return any(t.needs_weights for t in self.transforms)

    @property
    def needs_loss(self) -> bool:
        """Whether a transform reads the loss (:attr:`Context.log_risk`)."""
        return any(t.needs_loss for t in self.transforms)

    @property
    def needs_excess(self) -> bool:
        """Whether a transform reads the loss above its infimum (:attr:`Context.log_excess`)."""
        return any(t.needs_excess for t in self.transforms)

    def init(self, params: Sequence[torch.Tensor]) -> list[Any]:
        """The state of every transform for ``params``."""
        return [t.init(params) for t in self.transforms]

    def step(
        self, grads: Sequence[torch.Tensor], log_scale: torch.Tensor, state: list[Any], ctx: Context
    ) -> tuple[Step, list[Any]]:
        """Run the chain on gradient mantissas ``grads`` (true gradient ``grads * e^log_scale``)."""
        n = len(grads)
        step = Step(list(grads), log_scale, [log_scale] * n, [1.0] * n)  # untouched: the true gradient, plain GD
        new_state = []
        for transform, s in zip(self.transforms, state):
            step, s = transform.update(step, s, ctx)
            new_state.append(s)
        return step, new_state

    def apply(
        self, params: Sequence[torch.Tensor], step: Step, out: Sequence[torch.Tensor] | None = None
    ) -> list[torch.Tensor]:
        """New parameters from a finished step; the inputs are left unchanged (``out``: write there instead)."""
        coefs = _coefficients(step)
        if self.mirror_p is None:
            outs = [None] * len(params) if out is None else out
            return [_descend(p, d, c, out=o) for p, c, d, o in zip(params, coefs, step.direction, outs)]
        return [
            mirror_step(p, d, c, float(q))
            for p, d, c, q in zip(params, step.direction, coefs, per_tensor(self.mirror_p, len(params), "p"))
        ]


def _coefficients(step: Step) -> list[torch.Tensor]:
    """``exp(log_coef) * factor`` of each tensor; tensors that share one ``(log_coef, factor)`` pair (the same
    objects: a joint normalisation's one coefficient for K and Q) share one product, formed once."""
    formed: dict[tuple[int, int], torch.Tensor] = {}
    coefs = []
    for lc, f in zip(step.log_coef, step.factor):
        key = (id(lc), id(f))
        if key not in formed:
            formed[key] = torch.exp(lc) * f
        coefs.append(formed[key])
    return coefs


def _descend(x: torch.Tensor, d: torch.Tensor, coef: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x - coef * d`` with a per-run ``coef``; one coefficient is applied as ``torch.optim.SGD`` applies ``lr``
    (``x + (-coef) d`` in one rounding), so a plain GD rule equals SGD to the bit."""
    if coef.dim() == 0:
        return torch.add(x, d, alpha=-float(coef), out=out)
    return torch.addcmul(x, _expand(coef, d), d, value=-1.0, out=out)


def run_rule(
    rule: Rule,
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    state: list[Any] | None = None,
    *,
    run_dims: int = 0,
    log_risk: torch.Tensor | None = None,
    groups: Sequence[Hashable] | None = None,
) -> tuple[list[torch.Tensor], list[Any]]:
    """One step of ``rule`` on plain gradients: ``(new_params, new_state)``; the inputs are left unchanged.

    Parameters
    ----------
    params, grads : sequence of torch.Tensor, matching shapes ([R,] ...)
    state : list, optional
        The rule's state (``rule.init(params)`` when omitted).
    run_dims : int, default=0
        Leading axes that index independent runs (norms and step sizes per run).
    log_risk : torch.Tensor, shape ([R,]), optional
        ``log L`` (rules with a Polyak step or a loss normaliser).
    groups : sequence of hashable, optional
        Parameter-group label of each tensor.
    """
    params = list(params)
    state = rule.init(params) if state is None else state
    log_scale = torch.zeros(params[0].shape[:run_dims], dtype=torch.float64, device=params[0].device)
    ctx = Context(params=params, run_dims=run_dims, log_risk=log_risk, groups=list(groups or []))
    step, state = rule.step(grads, log_scale, state, ctx)
    return rule.apply(params, step), state


def step_size(
    rule: Rule, norm: torch.Tensor, log_scale: torch.Tensor, *, log_risk: torch.Tensor | None = None
) -> torch.Tensor:
    """The coefficient ``rule`` puts on a direction of norm ``norm`` (shape ``([R,])``), one tensor, read off alone.

    With ``log_scale`` the direction is a mantissa (true norm ``norm e^log_scale``) and the result its coefficient.
    Serves the public step-size functions (:func:`attnlab.optim.normalized_step_size`,
    :func:`attnlab.optim.polyak_step_size`) from the one implementation in the transforms.
    """
    ctx = Context(params=[norm], run_dims=norm.dim(), log_risk=log_risk)
    step, _ = rule.step([norm], log_scale, rule.init([norm]), ctx)
    return torch.exp(step.log_coef[0]) * step.factor[0]


def mirror_step(W: torch.Tensor, direction: torch.Tensor, coef: torch.Tensor, p: float) -> torch.Tensor:
    r"""One l_p mirror-descent update :math:`(\nabla\psi)^{-1}(\nabla\psi(W) - c\, d)`, ``psi = ||.||_p^p / p``.

    Spec: mirror-descent-lp §3 (``grad psi(W) = sign(W) |W|^{p-1}`` and its inverse), §4 (dual step).

    Parameters
    ----------
    W, direction : torch.Tensor, shape ([R,] ...)
    coef : torch.Tensor, shape ([R,]) or ()
    p : float
        ``p > 1``; ``p = 2`` is the additive update.
    """
    M = _descend(mirror_map(W, p), direction, coef)  # spec md §4: M = grad psi(W) - eta G
    # spec md §3: W = (grad psi)^{-1}(M); psi is separable, so an entry whose direction is 0 keeps its W exactly
    # (the round trip through the two maps moved it by round-off, step after step)
    return torch.where(direction == 0, W, inverse_mirror_map(M, p))
