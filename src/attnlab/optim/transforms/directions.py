"""Transforms that change the direction: momentum, Adam's moment buffers, the steepest-descent direction in l_p and
the two-sided preconditioner.

Spec: implicit-bias-ngd §4 A4 (momentum), §9 (Adam), mirror-descent-lp §4 (the dual exponent of l_p steepest
descent), steepest-descent §1 and §5, preconditioned-regression §5.4 (preconditioner).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab._validation import ValidationError
from attnlab.optim.transforms.core import Context, Step, Transform, _expand, _stateless, per_tensor


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


def steepest(p: float) -> Transform:
    r"""The unit-l_p steepest-descent direction of the gradient: :math:`d = \mathrm{sign}(g) |g|^{q-1} /
    \|g\|_q^{q-1}` with :math:`q = p / (p - 1)`, one l_q norm over all tensors of a run; ``p = inf`` is sign descent.

    Spec: mirror-descent-lp §4 (the dual exponent ``q``; the l_p steepest-descent step is the argmax of
    :math:`\langle g, d \rangle` over :math:`\|d\|_p \le 1`, so :math:`\langle g, d \rangle = \|g\|_q` and
    :math:`\|d\|_p = 1`). ``p = 2`` is NGD's direction. The direction is computed from the gradient's mantissa ``m``
    (``g = m e^s``) divided by its largest entry, so that ``||m||_q`` neither underflows nor overflows at any ``q``
    (``p`` near 1 gives ``q`` in the thousands) or gradient size: it depends on the direction of ``g`` only, and
    the step stays exact after ``g`` underflows in true units. The coefficient so far,
    relative to the gradient, is kept (``theta <- theta - c d``, ``c = 1`` for the untouched chain); a zero gradient
    takes no step.

    Parameters
    ----------
    p : float
        ``1 < p <= inf``.
    """
    q = 1.0 if p == math.inf else p / (p - 1.0)  # mirror-descent-lp §4: 1/p + 1/q = 1

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        largest = ctx.block_norms(step.direction, None, math.inf)[0]  # max |m| per run, over all tensors
        if q == 1.0:  # p = inf: sign descent, |g|^0 = 1
            directions = [torch.sign(d) for d in step.direction]
        else:  # sign(m) |m / ||m||_q|^(q-1): unit l_p norm, since (q - 1) p = q; m / max|m| first, so that
            # ||.||_q is in [1, count^(1/q)] at any q (p near 1) and any size of m
            unit = largest.where(largest > 0, torch.ones_like(largest))
            scaled = [d / _expand(unit, d) for d in step.direction]
            norm = ctx.block_norms(scaled, None, q)[0].where(largest > 0, torch.ones_like(largest))  # 0: no step
            directions = [torch.sign(d) * (d / _expand(norm, d)).abs().pow(q - 1.0) for d in scaled]
        coefs = [torch.where(largest > 0, lc - step.log_scale, -math.inf) for lc in step.log_coef]  # size drops out
        return Step(directions, step.log_scale, coefs, step.factor), None

    return Transform(f"steepest_{p:g}", _stateless, update, coefficient_only=False)


def adam(beta1: float, beta2: float, eps: float = 0.0) -> Transform:
    r"""Adam: :math:`m \leftarrow \beta_1 m + (1 - \beta_1) g`, :math:`v \leftarrow \beta_2 v + (1 - \beta_2) g^2`,
    direction :math:`\hat m / (\sqrt{\hat v} + \epsilon)` with the bias corrections :math:`\hat m = m / (1 -
    \beta_1^t)`, :math:`\hat v = v / (1 - \beta_2^t)`; ``beta1 = 0`` is RMSProp (with ``v``'s bias correction).

    Spec: steepest-descent §5 (Adam; Kingma & Ba 2015, Algorithm 1), implicit-bias-ngd §9. The buffers are carried
    in the log domain as the momentum buffer is: mantissas ``M, V`` and one log-scale ``S`` per run with
    ``m = M e^S``, ``v = V e^{2S}``, so they keep adding gradients after those underflow in true units. The
    direction is :math:`\hat M / (\sqrt{\hat V} + \epsilon e^{-S})`: without epsilon it is unchanged when *every*
    gradient of a run is multiplied by one constant; with it, gradients far below ``epsilon`` take steps of size
    ``lr m / epsilon``, as ``torch.optim.Adam``'s do. Coordinates whose gradient has always been zero (``v = 0``)
    do not move. It is not ``scale_invariant``: one step's gradients rescaled alone change the step (they weigh
    differently against the history).

    State: ``{"adam_m": [M], "adam_v": [V], "adam_log_scale": [S], "adam_step": [t]}``, one entry per tensor
    (``None`` before the first step; ``S`` of shape ``([R,])``): each tensor has its own scale and count, equal
    for tensors that step together, so a tensor that joins later (a torch optimizer's frozen layer, a new group)
    starts its own moments at ``t = 1`` without resetting the others'.
    """
    log_eps = math.log(eps) if eps > 0 else -math.inf

    def init(params: Sequence[torch.Tensor]) -> dict[str, list]:
        n = len(params)
        return {"adam_m": [None] * n, "adam_v": [None] * n, "adam_log_scale": [None] * n, "adam_step": [0] * n}

    def update(step: Step, state: dict[str, list], ctx: Context) -> tuple[Step, dict[str, list]]:
        s = step.log_scale
        new_state: dict[str, list] = {"adam_m": [], "adam_v": [], "adam_log_scale": [], "adam_step": []}
        directions, coefs = [], []
        entries = zip(step.direction, state["adam_m"], state["adam_v"], state["adam_log_scale"], state["adam_step"])
        # each tensor's own scale and count: a torch optimizer's tensors need not all have stepped together (one
        # frozen for a while, a group added later), as torch.optim.Adam keeps them per parameter
        for (g, M, V, old, t), lc in zip(entries, step.log_coef):
            # the new scale, S' = max(S + log(beta2) / 2, s), so that neither buffer's factor exceeds 1 and the
            # scale follows the decaying buffers down
            new = s if old is None else torch.maximum(old + 0.5 * math.log(beta2), s)
            shrink = torch.zeros_like(s) if old is None else torch.exp(old - new)  # e^{S - S'}
            t = t + 1
            # Adam's bias corrections: m_hat / sqrt(v_hat) = m / sqrt(v) * sqrt(1 - beta2^t) / (1 - beta1^t);
            # epsilon enters next to sqrt(v) as eps sqrt(1 - beta2^t), on the mantissa's scale e^{-S}
            log_bias = 0.5 * math.log1p(-(beta2**t))
            g = g * _expand(torch.exp(s - new), g)  # the gradient's mantissa on the new scale, e^{s - S'}
            M = (1.0 - beta1) * g if M is None else M * _expand(beta1 * shrink, M) + (1.0 - beta1) * g  # m update
            V = (1.0 - beta2) * g * g if V is None else V * _expand(beta2 * shrink**2, V) + (1.0 - beta2) * g * g
            if eps > 0:  # M / (sqrt(V) + eps sqrt(1 - beta2^t) e^{-S}) = M e^{S - log(e^S sqrt(V) + eps ...)}
                log_den = torch.logaddexp(0.5 * torch.log(V) + _expand(new, V), torch.full_like(V, log_eps + log_bias))
                directions.append(M * torch.exp(_expand(new, V) - log_den))
            else:
                directions.append(torch.where(V > 0, M / V.sqrt(), torch.zeros_like(M)))  # m / sqrt(v): S cancels
            coefs.append(lc - s + log_bias - math.log1p(-(beta1**t)))
            for key, value in (("adam_m", M), ("adam_v", V), ("adam_log_scale", new), ("adam_step", t)):
                new_state[key].append(value)
        return Step(directions, s, coefs, step.factor), new_state

    return Transform("adam", init, update, coefficient_only=False, scale_invariant=False)


def decoupled_decay(weight_decay: float | Sequence[float]) -> Transform:
    r"""Decoupled weight decay (AdamW): add :math:`\lambda \theta` to the step so far, ``theta <- theta - lr (d +
    lambda theta)``; ``lambda = 0`` leaves a tensor's step alone.

    Spec: steepest-descent §5 (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization", arXiv:1711.05101,
    Algorithm 2: the decay is not part of the gradient the moments see). Place it after the direction and before
    :func:`~attnlab.optim.transforms.scale_by_lr`. It reads the parameters (:attr:`Context.params`).
    """

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        decays = per_tensor(weight_decay, len(step.direction), "weight_decay")
        directions, coefs = [], []
        for d, lc, w, theta in zip(step.direction, step.log_coef, decays, ctx.params):
            if w == 0.0:
                directions.append(d)
                coefs.append(lc)
                continue
            directions.append(d * _expand(torch.exp(lc), d) + w * theta)  # AdamW: d + lambda theta
            coefs.append(torch.zeros_like(lc))
        return Step(directions, step.log_scale, coefs, step.factor), None

    return Transform("decoupled_decay", _stateless, update, coefficient_only=False, scale_invariant=False)


def precondition(
    left_inverses: Sequence[torch.Tensor | None], right_inverses: Sequence[torch.Tensor | None]
) -> Transform:
    r"""Precondition each matrix direction on both sides: :math:`d \leftarrow L^{-1} d R^{-1}` (``None``: identity).

    Spec: preconditioned-regression §5.4 (``Sigma_z^{-1} grad_Q Sigma^{-1}``, ``grad_V Sigma_z^{-1}``).
    """

    def init(params: Sequence[torch.Tensor]) -> None:
        for i, (param, left, right) in enumerate(zip(params, left_inverses, right_inverses)):
            for side, inverse, axis in (("left", left, -2), ("right", right, -1)):
                if inverse is not None and (param.dim() < 2 or param.shape[axis] != inverse.shape[-1]):
                    raise ValidationError(
                        f"the preconditioner's {side} covariance has shape {tuple(inverse.shape)}, but tensor {i} has "
                        f"shape {tuple(param.shape)}: it multiplies matrices of matching size on that side; pass a "
                        "covariance of the tensor's size, or no preconditioner for a vector"
                    )

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

    return Transform("precondition", init, update, coefficient_only=False)
