"""Gradient flow as rules of the engine: the normalised-GD path, small-step GD and fixed-step RK4.

Spec: kq-nuclear-norm §3 (gradient flow (1); discretisations (a) GD, (b) normalised GD -- the flow's path at unit
speed -- and (c) RK4), §3.1 (integrated weights ``phi(t) = 2 int_0^t dL/ds``), §8 (keep ``phi`` as tracked state).

Each method is a :class:`~attnlab.optim.transforms.Rule` whose one transform also integrates the flow's clock
``log t`` and, when asked, ``phi`` in its state (``{"log_time": (R,), "phi": (R, n, T)}``), so gradient flow runs
through :func:`attnlab.training.fit` like every optimizer: same spaces, recording, callbacks and divergence policy.
With ``g = grad L`` and ``w = dL/ds`` (both log-scaled by one ``e^s`` per run):

- ngd: ``theta <- theta - eta g / ||g||``, ``phi <- phi + 2 eta w / ||g||``, ``t <- t + eta / ||g||``;
- ngd-relative: the same with the arc length ``eta (1 + ||theta||)`` (ours): the flow's path again, at a speed that
  grows with the parameters, so that ``ln ||theta||`` advances by at most ``eta`` a step and margins far beyond a
  fixed arc length's are reached;
- gd: ``theta <- theta - dt g``, ``phi <- phi + 2 dt w``, ``t <- t + dt``;
- rk4: the classical scheme on the joint state ``(theta, phi)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from attnlab.optim.transforms import Context, Rule, Step, Transform, block_norms, divide_by_norm

__all__ = ["METHODS", "flow_rule"]

METHODS = ("ngd", "ngd-relative", "gd", "rk4")


def _expand(value: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return value.view(value.shape + (1,) * (like.dim() - value.dim()))


def flow_rule(method: str, step: float, track_phi: bool, runs: int, tokens: tuple[int, int]) -> Rule:
    """The rule of one discretisation of the gradient flow, with its clock (and ``phi``) in the state.

    Parameters
    ----------
    method : {"ngd", "ngd-relative", "gd", "rk4"}
    step : float
        ``"ngd"``: arc length ``eta`` of each step (joint Frobenius norm over all tensors, per run);
        ``"ngd-relative"``: ``eta`` of the arc length ``eta (1 + ||theta||)``; ``"gd"`` and ``"rk4"``: the time step
        ``dt``.
    track_phi : bool
        Integrate ``phi`` (shape (R, n, T)).
    runs : int
    tokens : (n, T)
    """

    def init(params: Sequence[torch.Tensor]) -> dict[str, torch.Tensor]:
        like = params[0]
        state = {"log_time": torch.full((runs,), -math.inf, dtype=torch.float64, device=like.device)}
        if track_phi:
            state["phi"] = torch.zeros((runs, *tokens), dtype=torch.float64, device=like.device)
        return state

    def tick(
        state: dict[str, torch.Tensor], log_dt: torch.Tensor, dphi: torch.Tensor | None
    ) -> dict[str, torch.Tensor]:
        new = {"log_time": torch.logaddexp(state["log_time"], log_dt)}  # t <- t + dt, in the log domain
        if track_phi:
            new["phi"] = state["phi"] + dphi
        return new

    def ngd(step_: Step, state: dict, ctx: Context) -> tuple[Step, dict]:
        return normalised(step_, state, ctx, step, math.log(step))

    def ngd_relative(step_: Step, state: dict, ctx: Context) -> tuple[Step, dict]:
        arc = step * (1.0 + block_norms(ctx.params, None, ctx.run_dims)[0])  # ours: eta (1 + ||theta||), per run
        return normalised(step_, state, ctx, arc, torch.log(arc))

    def normalised(
        step_: Step, state: dict, ctx: Context, arc: float | torch.Tensor, log_arc: float | torch.Tensor
    ) -> tuple[Step, dict]:
        """A normalised step of length ``arc`` (a float, or one per run) along ``-g``, with its clock and phi."""
        norm = ctx.block_norms(step_.direction, None, 2.0)[0]  # ||m||, one joint norm per run
        log_unit = divide_by_norm(0.0, norm)  # g / ||g|| = m / ||m||: exact after g underflows (NGD, spec A2)
        log_dt = log_arc + log_unit - step_.log_scale  # spec kq §3 (b): dt = eta / ||grad L||
        # spec kq §3.1: phi += 2 arc w / ||g||, its unit factor formed only where phi is tracked (no exp per step else)
        dphi = None
        if track_phi:
            twice = 2.0 * _expand(arc, ctx.weights) if torch.is_tensor(arc) else 2.0 * arc
            dphi = twice * _expand(torch.exp(log_unit), ctx.weights) * ctx.weights
        coefs = [log_unit] * len(step_.direction)
        return Step(step_.direction, step_.log_scale, coefs, [arc] * len(coefs)), tick(state, log_dt, dphi)

    def gd(step_: Step, state: dict, ctx: Context) -> tuple[Step, dict]:
        log_dt = torch.full_like(step_.log_scale, math.log(step))  # spec kq §3 (a): theta <- theta - dt g
        dphi = 2.0 * step * _expand(torch.exp(step_.log_scale), ctx.weights) * ctx.weights if track_phi else None
        coefs = [step_.log_scale] * len(step_.direction)
        return Step(step_.direction, step_.log_scale, coefs, [step] * len(coefs)), tick(state, log_dt, dphi)

    def rk4(step_: Step, state: dict, ctx: Context) -> tuple[Step, dict]:
        # spec kq §3 (c): classical tableau (1/2, 1/2, 1; weights 1/6, 1/3, 1/3, 1/6) on (theta, phi)
        def true(mantissas: Sequence[torch.Tensor], log_scale: torch.Tensor) -> list[torch.Tensor]:
            return [m * _expand(torch.exp(log_scale), m) for m in mantissas]

        k = [true(step_.direction, step_.log_scale)]
        w = [ctx.weights * _expand(torch.exp(step_.log_scale), ctx.weights)] if track_phi else []
        for fraction in (0.5, 0.5, 1.0):
            stage = ctx.gradient_at([p - fraction * step * g for p, g in zip(ctx.params, k[-1])], risk=False)
            k.append(true(stage.mantissas, stage.log_scale))
            if track_phi:
                w.append(stage.weights * _expand(torch.exp(stage.log_scale), stage.weights))
        direction = [(a + 2 * b + 2 * c + d) / 6.0 for a, b, c, d in zip(*k)]
        dphi = 2.0 * step * (w[0] + 2 * w[1] + 2 * w[2] + w[3]) / 6.0 if track_phi else None
        zero = torch.zeros_like(step_.log_scale)
        log_dt = torch.full_like(zero, math.log(step))
        return Step(direction, zero, [zero] * len(direction), [step] * len(direction)), tick(state, log_dt, dphi)

    update = {"ngd": ngd, "ngd-relative": ngd_relative, "gd": gd, "rk4": rk4}[method]
    flow = Transform(
        f"flow_{method}", init, update, coefficient_only=False, scale_invariant=False, needs_weights=track_phi
    )
    return Rule((flow,))
