"""Fixed diagonal preconditioners on one tensor's gradient, put first in an attnlab optimizer's rule.

A wrong mechanism the implicit-bias falsifiers and the flagship's share: a per-coordinate step size left in by mistake
makes a normalised method steepest descent in a weighted norm, so it converges in direction to that norm's max-margin
solution, not the SVM of implicit-bias-ngd §5. Kept outside :mod:`attnlab.experiments.implicit_bias` so that the
flagship can use them without importing (and so registering) that package's experiments.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from attnlab.optim.transforms import Context, Step, Transform
from attnlab.verify import Falsifier

__all__ = ["entry_scale", "scaled_entries", "w_preconditioned"]


def entry_scale(low: float, high: float, rank: int) -> Transform:
    """A transform put first in a rule: the gradient of each tensor with ``rank`` axes past the runs (1: the head
    ``u``, 2: ``W``) times ``linspace(low, high)`` over its entries in row-major order (a fixed diagonal
    preconditioner), the other tensors' unchanged; every later transform (the norms, Polyak's step) sees the product."""
    scales: dict[tuple[int, ...], torch.Tensor] = {}

    def update(step: Step, state: None, ctx: Context) -> tuple[Step, None]:
        directions = []
        for d, p in zip(step.direction, ctx.params):
            if p.dim() - ctx.run_dims == rank:  # (R, d) or (R, d, d): entry i times scale_i
                shape = tuple(d.shape[-rank:])
                if shape not in scales:
                    scales[shape] = torch.linspace(low, high, math.prod(shape), dtype=torch.float64).reshape(shape)
                d = d * scales[shape].to(d)
            directions.append(d)
        return Step(directions, step.log_scale, step.log_coef, step.factor), None

    name = "head-preconditioned" if rank == 1 else "w-preconditioned"
    return Transform(name, lambda params: None, update, coefficient_only=False)


def scaled_entries(optimizer, low: float, high: float, rank: int = 1):
    """``optimizer`` (an attnlab optimizer, which hands the engine its ``rule``) with :func:`entry_scale` put first
    in its rule; an optimizer without a rule (SGD) is returned as it is."""
    built = getattr(optimizer, "rule", None)
    if callable(built):
        first = entry_scale(low, high, rank)

        def rule(params):
            plain = built(params)
            return dataclasses.replace(plain, transforms=(first, *plain.transforms))

        optimizer.rule = rule
    return optimizer


def w_preconditioned(module: str, low: float = 0.95, high: float = 1.05) -> Falsifier:
    """The module's ``NormalizedGD`` stepping on ``W``'s gradient times ``linspace(low, high)`` over its entries.

    A fixed diagonal preconditioner on ``W`` (steepest descent in a weighted Frobenius norm): NGD still grows
    ``||W_t||`` linearly, but towards the max-margin matrix of that weighted norm, not the W-SVM of spec §5, so
    ``1 - corr(W_t, W_mm)`` levels off at a positive value (about 5e-4 on the flagship's data at 0.95-1.05).
    """

    def wrap(ngd_type):
        return lambda *args, **kw: scaled_entries(ngd_type(*args, **kw), low, high, rank=2)

    return Falsifier(
        "w-preconditioned",
        f"NGD's W gradient times linspace({low:g}, {high:g}) over its entries (a fixed diagonal preconditioner on W: "
        "its max-margin direction is another matrix)",
        f"{module}:NormalizedGD",
        wrap,
        kind="mechanism",
    )
