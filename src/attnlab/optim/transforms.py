"""Update rules as small composable pure transforms, each written once beside its spec formula.

Spec: implicit-bias-ngd §4 (A1 GD, A2 NGD and its cap, A3 Polyak, A4 momentum, A6 joint adaptive rule, A7 per-block
NGD, A8 SPS), §9 (Adam), mirror-descent-lp §3-4 (l_p mirror map, dual-norm normalisation, l_p steepest descent),
preconditioned-regression §5.4 (preconditioner).

An update is built as a :class:`Step`: per tensor, a *direction* and a per-run *log coefficient*, the update being
``theta <- theta - exp(log_coef) * direction`` (or its mirror-map form). The direction starts as the gradient's
mantissa ``m`` with ``grad = m * exp(log_scale)`` (one ``log_scale`` per run; 0 for plain gradients) and the
coefficient as ``log_scale``, so the untouched chain is plain GD. Every transform changes coefficients in the log
domain and leaves mantissas alone, so a normalised rule stays exact after the true gradient underflows.

A :class:`Transform` is a pair of pure functions (``init(params) -> state``, ``update(step, state, context) ->
(step, state)``); state is plain data (lists with one entry per tensor), passed in and out, never hidden. A
:class:`Rule` is a chain of transforms plus how the update is applied (added, or through the l_p mirror map). The
``torch.optim`` classes of :mod:`attnlab.optim` and the training engine (:mod:`attnlab.training`) run the same rules,
so ``NormalizedGD`` handed to :func:`attnlab.train` and ``optimizer="ngd"`` in :func:`attnlab.training.batched.train` are
one code path.

Hyperparameters are given once (a scalar, or a per-run tensor of shape ``(R,)``) or per tensor (a list), which is
how parameter groups map onto a rule.

Writing a transform
-------------------
A transform of your own is a :class:`Transform` built from two functions; the engine (:func:`attnlab.training.fit`,
so :func:`attnlab.train` and :func:`attnlab.training.batched.train`) and the ``torch.optim`` classes run it alike. It
declares what it reads beyond the step, so the engine computes that only when some transform asks:

- ``needs_loss=True``: :attr:`Context.log_risk` (``log L`` per run) is filled at every step;
- ``needs_excess=True``: :attr:`Context.log_excess` (``log(L - L_*)`` per run, from the margins, exact however
  close ``L`` is to the fixed-head infimum ``L_*``) is filled at every step (the engine only);
- ``needs_weights=True``: :attr:`Context.weights` (``dL/ds``, on the gradient's scale) is filled;
- :attr:`Context.step` (the index of the step) is always filled;
- ``scale_invariant=True`` only if the update is unchanged when every gradient of a step is multiplied by one
  positive constant; ``coefficient_only=True`` only if it rescales or linearly combines directions, nothing else.

Scale invariance is defined, with both of its declarations (this field, and the ``scale_invariant = True`` a
``torch.optim`` optimizer sets to be handed mantissas by :func:`attnlab.train`), in one place: the tutorial's
"Declaring scale invariance" (docs/tutorial/your-model.md). The engine keeps every gradient as a mantissa ``m`` and
a log-scale ``s`` per run (``g = m e^s``), so a transform that reads ``step.direction`` and ``step.log_scale`` sees
the gradient's direction even after ``g`` itself underflows to 0 in float64 (a loss at float64 resolution).
Both :func:`steepest` (sign descent at ``p = inf``) and NGD's :func:`normalize` are scale-invariant;
:func:`adam` without epsilon is not in this sense (one step's gradients rescaled alone change its step) and keeps
its own log-scale instead, as :func:`momentum` does. A sign-like transform of your own, a sign step on each
tensor's largest-gradient entries only, reads::

    def update(step, state, ctx):
        out = []
        for m in step.direction:  # mantissas ([R,] ...): their signs are the gradient's
            top = m.abs() >= m.abs().amax(dim=tuple(range(1, m.dim())), keepdim=True) / 2  # the larger half
            out.append(torch.sign(m) * top)
        coefs = [c - step.log_scale for c in step.log_coef]  # drop the gradient's size: a unit step
        return Step(out, step.log_scale, coefs, step.factor), state

    mine = Rule((Transform("half_sign", lambda params: None, update, coefficient_only=False,
                           scale_invariant=True), scale_by_lr(0.01)))

(``coefficient_only=False``: it changes the direction, not only its coefficient). Its step is ``-0.01`` per moved
entry at every step, however small the gradient, like ``"sign"`` of the optimizer grammar.

Work on the coefficients in the log domain, as the transforms below do. A Polyak-like step
``eta_t = (L - L*) / ||g||^2`` with a known lower bound ``l_star`` reads::

    def update(step, state, ctx):
        norm = ctx.block_norms(step.direction, None)[0]  # ||m|| per run, g = m e^s
        gap = (torch.exp(ctx.log_risk) - l_star).clamp(min=0.0)
        log_eta = torch.log(gap) - 2 * torch.log(norm) - 2 * step.log_scale  # coefficient of m: eta_t e^s
        coefs = [c + log_eta for c in step.log_coef]
        return Step(step.direction, step.log_scale, coefs, step.factor), state

    mine = Rule((Transform("my_polyak", lambda params: None, update, scale_invariant=False, needs_loss=True),))

and runs as ``attnlab.train(model, mine, data)`` or ``attnlab.training.batched.train(X, Z, y, v, optimizer=mine)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from attnlab._numerics import inverse_mirror_map, mirror_map
from attnlab._validation import ValidationError

__all__ = [
    "Context",
    "log_loss_gap",
    "loss_gap",
    "mirror_step",
    "run_rule",
    "Rule",
    "Step",
    "Transform",
    "adam",
    "block_norms",
    "cap",
    "decay",
    "momentum",
    "normalize",
    "divide_by_norm",
    "normalize_by_loss",
    "per_tensor",
    "polyak",
    "precondition",
    "scale_by_lr",
    "steepest",
    "step_size",
    "uncapped",
]

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
    tensors: Sequence[torch.Tensor], blocks: Sequence[Hashable] | None = None, run_dims: int = 0, ord: float = 2.0
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

    Returns
    -------
    list of torch.Tensor, shape ([R,]), float64
    """
    labels = [0] * len(tensors) if blocks is None else list(blocks)
    if len(labels) != len(tensors):
        raise ValidationError(f"blocks has {len(labels)} labels for {len(tensors)} tensors; pass one per tensor")
    members: dict[Hashable, list[torch.Tensor]] = {}
    for label, tensor in zip(labels, tensors):
        dims = tuple(range(run_dims, tensor.dim()))
        part = torch.linalg.vector_norm(tensor, ord, dim=dims) if dims else tensor.abs()
        members.setdefault(label, []).append(part if part.dtype == torch.float64 else part.to(torch.float64))
    norms = {
        label: parts[0] if len(parts) == 1 else torch.linalg.vector_norm(torch.stack(parts), ord, dim=0)
        for label, parts in members.items()
    }
    return [norms[label] for label in labels]


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

    def block_norms(self, tensors: Sequence[torch.Tensor], blocks: Sequence[Hashable] | None, ord: float = 2.0):
        if self.norms is not None:
            return self.norms(tensors, blocks, ord)
        return block_norms(tensors, blocks, self.run_dims, ord)


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


def divide_by_norm(
    log_coef: torch.Tensor | float, norm: torch.Tensor, log_scale: torch.Tensor | float = 0.0
) -> torch.Tensor:
    """The NGD step size in the log domain: ``log_coef - log(norm * e^log_scale)``, ``-inf`` (no step) where
    ``norm`` is 0. Spec: implicit-bias-ngd §4 A2 (``eta / ||g||`` with ``||g|| = norm e^log_scale``)."""
    return log_coef - torch.log(norm).nan_to_num_(neginf=math.inf) - log_scale  # spec A2: eta / ||g||


def scale_by_lr(lr: float | torch.Tensor | Sequence[float | torch.Tensor]) -> Transform:
    """Multiply each tensor's step by its learning rate ``eta`` (a float, a per-run ``(R,)`` tensor, or per tensor).

    Spec: implicit-bias-ngd §4 A1 (``W <- W - eta g``).
    """

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        lrs = per_tensor(lr, len(step.direction), "lr")
        return Step(
            step.direction, step.log_scale, step.log_coef, [f * r for f, r in zip(step.factor, lrs)]
        ), None  # spec A1: eta g

    return Transform("scale_by_lr", _stateless, update, scale_invariant=False)


def normalize(
    blocks: str | Sequence[Hashable] | None = "global",
    ord: float | Sequence[float] = 2.0,
    eps: float | Sequence[float] = 0.0,
    enabled: bool | Sequence[bool] = True,
) -> Transform:
    r"""Divide each tensor's step by the norm of the base direction over its block: :math:`g / (\|g\|_b + \epsilon)`.

    Spec: implicit-bias-ngd §4 A2 (global norm), A5 (joint norm over ``(u, W)``), A7 (per block);
    mirror-descent-lp §4 (dual norm ``q`` per tensor with the official code's ``+ eps``).

    Parameters
    ----------
    blocks : {"global", "group", "tensor"} or a sequence of labels, default="global"
        One norm over all tensors of a run, one per parameter group (``Context.groups``), one per tensor, or
        explicit labels (tensors with equal labels share a norm).
    ord : float or per-tensor sequence, default=2
        Entrywise norm order (``q = p/(p-1)`` for the dual norm of l_p mirror descent; only with per-tensor blocks
        where it differs from 2).
    eps : float or per-tensor sequence, default=0
        Added to the *true* norm (``||G|| + eps``, the Transformers-as-SVMs / mirror-descent code's convention).
    enabled : bool or per-tensor sequence, default=True
        Tensors left unnormalised keep their coefficient (per-block on/off of the joint rule).
    """

    plans: dict[tuple[int, tuple], list] = {}  # per (tensor count, group labels): the norms to take, worked out once

    def plan(n: int, ctx: Context) -> list:
        orders, epss, on = per_tensor(ord, n, "ord"), per_tensor(eps, n, "eps"), per_tensor(enabled, n, "enabled")
        labels = _block_labels(blocks, n, ctx)
        out = []
        for order in sorted(set(o for o, e in zip(orders, on) if e)):
            members = [i for i in range(n) if orders[i] == order]  # a block's norm covers all its tensors
            targets = [(k, i, epss[i]) for k, i in enumerate(members) if on[i]]
            out.append((order, members, [labels[i] for i in members], targets))
        return out

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        n = len(step.direction)
        key = (n, tuple(ctx.groups))
        if key not in plans:
            plans[key] = plan(n, ctx)
        coefs = list(step.log_coef)
        for order, members, labels, targets in plans[key]:
            norms = ctx.block_norms([step.direction[i] for i in members], labels, order)
            for k, i, eps_i in targets:
                if eps_i == 0:
                    coefs[i] = divide_by_norm(coefs[i], norms[k], step.log_scale)  # spec A2: g / ||g||
                else:  # spec md §4: G / (||G||_q + eps), with ||G|| = ||m|| e^s
                    log_den = torch.logaddexp(
                        torch.log(norms[k]) + step.log_scale, torch.full_like(norms[k], math.log(eps_i))
                    )
                    coefs[i] = coefs[i] - log_den
        return Step(step.direction, step.log_scale, coefs, step.factor), None

    return Transform("normalize", _stateless, update)


def _block_labels(blocks: str | Sequence[Hashable] | None, n: int, ctx: Context) -> list[Hashable]:
    if blocks is None or blocks == "global":
        return [0] * n
    if blocks == "group":
        return list(ctx.groups) if ctx.groups else [0] * n
    if blocks == "tensor":
        return list(range(n))
    return list(blocks)


def normalize_by_loss(enabled: bool | Sequence[bool] = True) -> Transform:
    """Divide each (enabled) tensor's step by the loss ``L(theta_t)``.

    Spec: implicit-bias-ngd §4 A6 (normaliser ``N_t = L(theta_t)``, exponential loss).
    """

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        on = per_tensor(enabled, len(step.direction), "enabled")
        if not any(on):
            return step, None
        if ctx.log_risk is None:
            raise ValidationError(
                'the loss normaliser needs the loss at every step; pass a closure to step() (normalizer="loss")'
            )
        if not bool(torch.isfinite(ctx.log_risk).all()):
            raise ValidationError(
                f'loss == {torch.exp(ctx.log_risk).tolist()}, must be a positive number for normalizer="loss"; '
                "pass the current loss (exp or logistic losses are positive)"
            )
        coefs = [c - ctx.log_risk if e else c for c, e in zip(step.log_coef, on)]  # spec A6: eta_t = eta / L
        return Step(step.direction, step.log_scale, coefs, step.factor), None

    reads = any(enabled) if isinstance(enabled, (list, tuple)) else bool(enabled)
    return Transform("normalize_by_loss", _stateless, update, scale_invariant=False, needs_loss=reads)


# Two losses that agree to this many units in the last place count as equal: a converged run whose loss rounds to
# just below the optimal loss then takes no step instead of stopping with an error.
_ROUNDING_ULPS = 4


def loss_gap(log_risk: torch.Tensor, optimal_loss: float | torch.Tensor) -> torch.Tensor:
    """``L - L*`` in float64 per run; refuses an optimal loss above the current loss (beyond rounding).

    ``exp`` of :func:`log_loss_gap`: it underflows to 0 where the gap is below 1e-308, which the Polyak step avoids
    by using :func:`log_loss_gap` itself.

    Raises
    ------
    ValidationError
        If ``optimal_loss > L`` by more than a few rounding units.
    """
    return torch.exp(log_loss_gap(log_risk, optimal_loss))


def log_loss_gap(log_risk: torch.Tensor, optimal_loss: float | torch.Tensor) -> torch.Tensor:
    """``log(L - L*)`` in float64 per run from ``log L``, without forming ``L``; ``-inf`` where ``L <= L*``.

    Spec: implicit-bias-ngd §4 A3 (the gap of the Polyak step), in the log domain: ``log L`` exactly for
    ``L* = 0`` (no underflow however small ``L``), ``log L + log(-expm1(log L* - log L))`` for ``L* > 0`` and
    ``logaddexp(log L, log(-L*))`` for ``L* < 0``. For ``L* > 0`` the gap keeps only the relative precision of
    ``log L`` itself: once ``L - L*`` falls below float64's resolution of ``L`` (about ``2e-16 L``) it is 0, whatever
    the formula; only a risk computed above its infimum (from the margins) resolves it further.

    Raises
    ------
    ValidationError
        If ``optimal_loss > L`` by more than a few rounding units.
    """
    log_loss = log_risk.to(torch.float64)
    optimal = torch.as_tensor(optimal_loss, dtype=torch.float64, device=log_loss.device)
    ratio = torch.where(optimal == 0, -math.inf, torch.log(optimal.abs()) - log_loss)  # log(|L*| / L)
    slack = math.log1p(_ROUNDING_ULPS * torch.finfo(torch.float64).eps)
    if bool(((optimal > 0) & (ratio > slack)).any()):
        raise ValidationError(
            f"optimal_loss == {optimal.tolist()} is above the current loss {torch.exp(log_loss).tolist()}; the "
            f"Polyak step needs L* <= L: pass a smaller optimal_loss (0 is a lower bound for the exp, logistic and "
            f"cross-entropy losses)"
        )
    below = log_loss + torch.log(-torch.expm1(ratio.clamp(max=0.0)))  # spec A3: L - L* = L (1 - L*/L), L* >= 0
    return torch.where(optimal < 0, torch.logaddexp(log_loss, torch.log(-optimal)), below)


# Polyak's optimal_loss that names the fixed-head infimum L_*: the engine then gives L - L_* from the margins
INFIMUM = "infimum"


def polyak(
    optimal_loss: float | torch.Tensor | Callable[[], float] | str = 0.0, c: float | Sequence[float] = 1.0
) -> Transform:
    r"""The Polyak step size :math:`\eta_t = (L - L^*) / (c \|g\|^2)`, one global gradient norm per run.

    Spec: implicit-bias-ngd §4 A3 (Polyak step), A8 (SPS constant ``c``). ``optimal_loss`` may be a function of no
    arguments called once per step (the mini-batch optimum of SPS). A zero gradient takes no step.
    ``optimal_loss="infimum"`` (:data:`INFIMUM`) takes ``L^*`` to be the infimum of a fixed-head risk and reads
    ``L - L^*`` from the margins (:attr:`Context.log_excess`, filled by the engine only): the step stays exact after
    ``L - L^*`` falls below float64's resolution of ``L``, where any formula on ``L`` gives 0.
    """
    infimum = isinstance(optimal_loss, str)
    if infimum and optimal_loss != INFIMUM:
        raise ValidationError(f"optimal_loss must be a number, a callable or {INFIMUM!r}, got {optimal_loss!r}")

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        if infimum:
            if ctx.log_excess is None:
                raise ValidationError(
                    f"optimal_loss={INFIMUM!r} needs L - L_* from the margins, which only the engine computes: train "
                    "with attnlab.train or attnlab.training.batched.train on a fixed linear head, or pass the number L_*"
                )
            log_gap = ctx.log_excess  # spec A3 with L* = inf L: exact however close L is to L_*
        elif ctx.log_risk is None:
            raise ValidationError(
                "the Polyak step needs the loss value at every step; call optimizer.step(closure) with a closure "
                "that zeroes the gradients, computes the loss, calls loss.backward() and returns the loss"
            )
        else:
            target = optimal_loss() if callable(optimal_loss) else optimal_loss
            log_gap = log_loss_gap(ctx.log_risk, target)  # log domain: no underflow of L - L* below 1e-308
        norm = ctx.block_norms(step.direction, None, 2.0)[0]
        # spec A3/A8 on g = m e^s: eta_t e^s = (L - L*) e^{-s} / (c ||m||^2), the coefficient of m
        log_eta = log_gap - 2.0 * torch.log(norm) - 2.0 * step.log_scale
        cs = per_tensor(c, len(step.direction), "c")
        coefs = [torch.where(norm > 0, lc + log_eta - math.log(c_i), -math.inf) for lc, c_i in zip(step.log_coef, cs)]
        return Step(step.direction, step.log_scale, coefs, step.factor), None

    return Transform("polyak", _stateless, update, scale_invariant=False, needs_loss=not infimum, needs_excess=infimum)


def cap(max_step: float | None | Sequence[float | None]) -> Transform:
    r"""Cap the step size: :math:`\eta_t \leftarrow \min(\eta_t, \eta_{\max})` on the true base direction.

    Spec: implicit-bias-ngd §4 A2 (``min(eta / ||g||, eta_max)``), A3 (Polyak's threshold). ``None`` or ``inf``
    leaves a tensor uncapped.
    """

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        caps = per_tensor(max_step, len(step.direction), "max_step")
        coefs = list(step.log_coef)
        for i, m in enumerate(caps):
            if not uncapped(m):
                bound = _log(m, step.log_scale) + step.log_scale  # spec A2: eta_t <- min(eta_t, eta_max), true units
                total = step.log_total(i)
                coefs[i] = torch.where(total > bound, bound - (total - coefs[i]), coefs[i])
        return Step(step.direction, step.log_scale, coefs, step.factor), None

    free = all(uncapped(m) for m in max_step) if isinstance(max_step, (list, tuple)) else uncapped(max_step)
    return Transform("cap", _stateless, update, scale_invariant=free)


def uncapped(max_step: float | torch.Tensor | None) -> bool:
    """Whether a cap leaves the step free: ``None`` or ``inf`` (a per-run tensor counts as a cap)."""
    return max_step is None or (not isinstance(max_step, torch.Tensor) and max_step == math.inf)


def momentum(beta: float | Sequence[float]) -> Transform:
    r"""Momentum buffer :math:`m \leftarrow \beta m + g` becomes the direction; the coefficient so far is kept.

    Spec: implicit-bias-ngd §4 A4. In a chain, ``normalize`` *before* ``momentum`` gives the heavy-ball variant
    (step size from :math:`\|g\|`, applied to the buffer), ``normalize`` *after* it the normalised-buffer variant
    (:math:`\theta \leftarrow \theta - \eta\, m / \|m\|`). Tensors with :math:`\beta = 0` keep their gradient.

    The buffer is kept in the log domain, as the gradient is: mantissas ``M`` and one log-scale ``S`` per run with
    :math:`m = M e^S`, so it keeps adding gradients after they underflow in true units (a loss at float64
    resolution). State: ``{"momentum_buffer": [M or None per tensor], "momentum_log_scale": [S or None per
    tensor]}`` (``S`` of shape ``([R,])``, the same for every tensor of a run; a buffer saved without its
    log-scale is in true units, ``S = 0``).
    """

    def init(params: Sequence[torch.Tensor]) -> dict[str, list]:
        return {"momentum_buffer": [None] * len(params), "momentum_log_scale": [None] * len(params)}

    def update(step: Step, state: dict[str, list], ctx: Context) -> tuple[Step, dict[str, list]]:
        betas = per_tensor(beta, len(step.direction), "momentum")
        s, buffers = step.log_scale, state["momentum_buffer"]
        held = [i for i, m in enumerate(buffers) if m is not None]
        if not held:  # the first step: the buffer is the gradient, on its own scale
            new, shrink, keep = s, None, None
        else:
            old = state["momentum_log_scale"][held[0]]
            old = torch.zeros_like(s) if old is None else old.to(s.dtype)  # a buffer saved in true units
            # spec A4 on m = M e^S, g = G e^s: beta m + g = (beta M e^{S - S'} + G e^{s - S'}) e^{S'}, with one new
            # scale S' = max(S + log max beta, s) per run, so that neither factor exceeds 1
            new = torch.maximum(old + math.log(max(betas)), s)
            shrink = torch.exp(old - new).nan_to_num_(nan=0.0)  # e^{S - S'}
            keep = torch.exp(s - new).nan_to_num_(nan=0.0)  # e^{s - S'}
        directions, coefs, kept = [], [], []
        for d, m, b, lc in zip(step.direction, buffers, betas, step.log_coef):
            g = d if keep is None else d * _expand(keep, d)  # the gradient's mantissa on the new scale
            if b == 0.0:
                kept.append(m)
                directions.append(g)
            else:
                m = g if m is None else torch.mul(m, _expand(b * shrink, m)).add_(g)  # spec A4: m <- beta m + g
                kept.append(m)
                directions.append(m)
            coefs.append(lc - s + new)  # the coefficient of the true direction, on the new scale
        scales = [None if m is None else new for m in kept]
        return Step(directions, new, coefs, step.factor), {"momentum_buffer": kept, "momentum_log_scale": scales}

    return Transform("momentum", init, update, scale_invariant=False, direction_state=("momentum_buffer",))


def decay(alpha: float | Sequence[float]) -> Transform:
    r"""Multiply the step by :math:`(t + 1)^{-\alpha}`, ``t`` the steps taken so far (per tensor, in the state).

    Spec: implicit-bias-ngd §4 A6 (``eta / (N_t (t+1)^alpha)``). State: ``{"step": [int per tensor]}``.
    """

    def init(params: Sequence[torch.Tensor]) -> dict[str, list]:
        return {"step": [0] * len(params)}

    def update(step: Step, state: dict[str, list], ctx: Context) -> tuple[Step, dict[str, list]]:
        alphas = per_tensor(alpha, len(step.direction), "alpha")
        coefs = [lc - a * math.log(t + 1) for lc, a, t in zip(step.log_coef, alphas, state["step"])]  # spec A6
        return Step(step.direction, step.log_scale, coefs, step.factor), {"step": [t + 1 for t in state["step"]]}

    return Transform("decay", init, update)


def steepest(p: float) -> Transform:
    r"""The unit-l_p steepest-descent direction of the gradient: :math:`d = \mathrm{sign}(g) |g|^{q-1} /
    \|g\|_q^{q-1}` with :math:`q = p / (p - 1)`, one l_q norm over all tensors of a run; ``p = inf`` is sign descent.

    Spec: mirror-descent-lp §4 (the dual exponent ``q``; the l_p steepest-descent step is the argmax of
    :math:`\langle g, d \rangle` over :math:`\|d\|_p \le 1`, so :math:`\langle g, d \rangle = \|g\|_q` and
    :math:`\|d\|_p = 1`). ``p = 2`` is NGD's direction. The direction is computed from the gradient's mantissa ``m``
    (``g = m e^s``): it depends on the direction of ``g`` only, so the step stays exact after ``g`` underflows in true
    units. The coefficient so far, relative to the gradient, is kept (``theta <- theta - c d``, ``c = 1`` for the
    untouched chain); a zero gradient takes no step.

    Parameters
    ----------
    p : float
        ``1 < p <= inf``.
    """
    q = 1.0 if p == math.inf else p / (p - 1.0)  # mirror-descent-lp §4: 1/p + 1/q = 1

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        norm = ctx.block_norms(step.direction, None, q)[0]  # ||m||_q per run, one over all tensors
        directions, coefs = [], []
        for d, lc in zip(step.direction, step.log_coef):
            if q == 1.0:
                out = torch.sign(d)  # p = inf: sign descent, |g|^0 = 1
            else:  # sign(m) |m / ||m||_q|^(q-1): unit l_p norm, since (q - 1) p = q
                out = torch.sign(d) * (d / _expand(norm, d)).abs().pow(q - 1.0)
            directions.append(torch.where(_expand(norm, d) > 0, out, torch.zeros_like(out)))
            coefs.append(torch.where(norm > 0, lc - step.log_scale, -math.inf))  # the gradient's size drops out
        return Step(directions, step.log_scale, coefs, step.factor), None

    return Transform(f"steepest_{p:g}", _stateless, update, coefficient_only=False)


def adam(beta1: float, beta2: float) -> Transform:
    r"""Adam without epsilon: :math:`m \leftarrow \beta_1 m + (1 - \beta_1) g`, :math:`v \leftarrow \beta_2 v +
    (1 - \beta_2) g^2`, direction :math:`\hat m / \sqrt{\hat v}` with the bias corrections :math:`\hat m = m / (1 -
    \beta_1^t)`, :math:`\hat v = v / (1 - \beta_2^t)`; ``beta1 = 0`` is RMSProp (with ``v``'s bias correction).

    Spec: implicit-bias-ngd §9 (Adam on real data; Kingma & Ba 2015, Algorithm 1 with ``epsilon = 0``). Without
    epsilon the update is unchanged when *every* gradient of a run is multiplied by one constant, so it is carried in
    the log domain as the momentum buffer is: mantissas ``M, V`` and one log-scale ``S`` per run with ``m = M e^S``,
    ``v = V e^{2S}``. It keeps adding gradients after they underflow in true units. Coordinates whose gradient has
    always been zero (``v = 0``) do not move. It is not ``scale_invariant``: one step's gradients rescaled alone
    change the step (they weigh differently against the history).

    State: ``{"adam_m": [M], "adam_v": [V], "adam_log_scale": [S], "adam_step": [t]}``, one entry per tensor
    (``None`` before the first step; ``S`` of shape ``([R,])``, the same for every tensor of a run).
    """

    def init(params: Sequence[torch.Tensor]) -> dict[str, list]:
        n = len(params)
        return {"adam_m": [None] * n, "adam_v": [None] * n, "adam_log_scale": [None] * n, "adam_step": [0] * n}

    def update(step: Step, state: dict[str, list], ctx: Context) -> tuple[Step, dict[str, list]]:
        s, old = step.log_scale, state["adam_log_scale"][0]
        # one new scale per run, S' = max(S + log(beta2) / 2, s), so that neither buffer's factor exceeds 1 and the
        # scale follows the decaying buffers down
        new = s if old is None else torch.maximum(old + 0.5 * math.log(beta2), s)
        shrink = torch.zeros_like(s) if old is None else torch.exp(old - new)  # e^{S - S'}
        keep = torch.exp(s - new)  # e^{s - S'}
        t = state["adam_step"][0] + 1
        new_state: dict[str, list] = {"adam_m": [], "adam_v": [], "adam_log_scale": [], "adam_step": []}
        directions, coefs = [], []
        for g, M, V, lc in zip(step.direction, state["adam_m"], state["adam_v"], step.log_coef):
            g = g * _expand(keep, g)  # the gradient's mantissa on the new scale
            M = (1.0 - beta1) * g if M is None else M * _expand(beta1 * shrink, M) + (1.0 - beta1) * g  # m update
            V = (1.0 - beta2) * g * g if V is None else V * _expand(beta2 * shrink**2, V) + (1.0 - beta2) * g * g
            directions.append(torch.where(V > 0, M / V.sqrt(), torch.zeros_like(M)))  # m / sqrt(v): S cancels
            # Adam's bias corrections: m_hat / sqrt(v_hat) = m / sqrt(v) * sqrt(1 - beta2^t) / (1 - beta1^t)
            coefs.append(lc - s + 0.5 * math.log1p(-(beta2**t)) - math.log1p(-(beta1**t)))
            for key, value in (("adam_m", M), ("adam_v", V), ("adam_log_scale", new), ("adam_step", t)):
                new_state[key].append(value)
        return Step(directions, s, coefs, step.factor), new_state

    return Transform("adam", init, update, coefficient_only=False, scale_invariant=False)


def precondition(
    left_inverses: Sequence[torch.Tensor | None], right_inverses: Sequence[torch.Tensor | None]
) -> Transform:
    r"""Precondition each matrix direction on both sides: :math:`d \leftarrow L^{-1} d R^{-1}` (``None``: identity).

    Spec: preconditioned-regression §5.4 (``Sigma_z^{-1} grad_Q Sigma^{-1}``, ``grad_V Sigma_z^{-1}``).
    """

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        directions = []
        for d, left, right in zip(step.direction, left_inverses, right_inverses):
            out = d.to(torch.float64)
            if left is not None:
                out = left @ out  # spec §5.4: Sigma_z_hat^{-1} grad_Q
            if right is not None:
                out = out @ right  # spec §5.4: grad_V Sigma_z_hat^{-1}, grad_Q Sigma_hat^{-1}
            directions.append(out.to(d.dtype))
        return Step(directions, step.log_scale, step.log_coef, step.factor), None

    return Transform("precondition", _stateless, update, coefficient_only=False)


def _expand(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A per-run value ``([R,])`` shaped to broadcast against ``like`` (``([R,] ...)``), in its dtype."""
    value = value if value.dtype == like.dtype else value.to(like.dtype)
    return value.view(value.shape + (1,) * (like.dim() - value.dim()))


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
        coefs = [torch.exp(lc) * f for lc, f in zip(step.log_coef, step.factor)]
        if self.mirror_p is None:
            outs = [None] * len(params) if out is None else out
            return [_descend(p, d, c, out=o) for p, c, d, o in zip(params, coefs, step.direction, outs)]
        return [
            mirror_step(p, d, c, float(q))
            for p, d, c, q in zip(params, step.direction, coefs, per_tensor(self.mirror_p, len(params), "p"))
        ]


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
    return inverse_mirror_map(M, p)  # spec md §3: W = (grad psi)^{-1}(M)
