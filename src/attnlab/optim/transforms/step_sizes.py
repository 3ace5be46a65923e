"""Transforms that set the step size: the learning rate, normalisation by a norm or by the loss, the Polyak step,
the cap and a decay in the step count.

Spec: implicit-bias-ngd §4 A1 (lr), A2 (NGD and its cap), A3 (Polyak), A6 (loss normaliser, decay), A7 (per-block
norms), A8 (SPS constant); mirror-descent-lp §4 (dual-norm normalisation with the official code's eps).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import torch

from attnlab._validation import ValidationError
from attnlab.optim.transforms.core import Context, Step, Transform, _log, _stateless, per_tensor


def divide_by_norm(
    log_coef: torch.Tensor | float, norm: torch.Tensor, log_scale: torch.Tensor | float = 0.0
) -> torch.Tensor:
    """The NGD step size in the log domain: ``log_coef - log(norm * e^log_scale)``, ``-inf`` (no step) where
    ``norm`` is 0. Spec: implicit-bias-ngd §4 A2 (``eta / ||g||`` with ``||g|| = norm e^log_scale``)."""
    log_unit = log_coef - torch.log(norm).nan_to_num_(neginf=math.inf)  # spec A2: eta / ||g||
    # a scale still the float 0 (the engine's mantissas) subtracts nothing: x - 0.0 is x to the bit, no op per step
    return log_unit if type(log_scale) is float and log_scale == 0.0 else log_unit - log_scale


def _times(factor: float | torch.Tensor, lr: float | torch.Tensor) -> float | torch.Tensor:
    """``factor * lr``; a factor still the float 1 leaves a float ``lr`` as it is (``1 * lr`` is ``lr`` to the bit),
    with no tensor product formed per step."""
    if type(factor) is float and factor == 1.0:
        if type(lr) is float or (isinstance(lr, torch.Tensor) and lr.is_floating_point()):
            return lr
    return factor * lr


def scale_by_lr(lr: float | torch.Tensor | Sequence[float | torch.Tensor]) -> Transform:
    """Multiply each tensor's step by its learning rate ``eta`` (a float, a per-run ``(R,)`` tensor, or per tensor).

    Spec: implicit-bias-ngd §4 A1 (``W <- W - eta g``).
    """

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        lrs = per_tensor(lr, len(step.direction), "lr")
        factors = [_times(f, r) for f, r in zip(step.factor, lrs)]  # spec A1: eta g
        return Step(step.direction, step.log_scale, step.log_coef, factors), None

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
                    "with attnlab.train or attnlab.training.batched.train on a fixed linear head, or pass the number "
                    "L_*"
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


def decay(alpha: float | Sequence[float]) -> Transform:
    r"""Multiply the step by :math:`(t + 1)^{-\alpha}`, ``t`` the steps taken so far (per tensor, in the state).

    Spec: implicit-bias-ngd §4 A6 (``eta / (N_t (t+1)^alpha)``). State: ``{"step": [int per tensor]}``.
    """
    return _power_of_steps("decay", "step", alpha, "alpha")


def schedule(exponent: float | Sequence[float]) -> Transform:
    r"""A step-size schedule: multiply the whole step by :math:`(t + 1)^{-a}` at step ``t`` (``a = 0``: constant).

    Spec: steepest-descent §2 (the decaying step sizes under which sign descent and Adam converge in direction; the
    linear-classifier theorems of Gunasekar et al. 2018 and Zhang, Zou, Cao 2024 assume ``eta_t -> 0``). ``a = 1/2``
    is ``inv_sqrt``. Appended last to any rule by the optimizer registry (``schedule=`` of every optimizer), so one
    transform serves every rule. State: ``{"schedule_step": [int per tensor]}``.
    """
    return _power_of_steps("schedule", "schedule_step", exponent, "schedule")


def _power_of_steps(name: str, key: str, exponent: float | Sequence[float], what: str) -> Transform:
    """The transform that multiplies each tensor's step by ``(t + 1)^-a``, counting its steps in ``state[key]``."""

    def init(params: Sequence[torch.Tensor]) -> dict[str, list]:
        return {key: [0] * len(params)}

    def update(step: Step, state: dict[str, list], ctx: Context) -> tuple[Step, dict[str, list]]:
        exponents = per_tensor(exponent, len(step.direction), what)
        coefs = [lc - a * math.log(t + 1) for lc, a, t in zip(step.log_coef, exponents, state[key])]  # (t+1)^-a
        return Step(step.direction, step.log_scale, coefs, step.factor), {key: [t + 1 for t in state[key]]}

    return Transform(name, init, update)
