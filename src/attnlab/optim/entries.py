"""The built-in optimizers of the registry: one entry each (name, options, chain, torch class).

Spec: implicit-bias-ngd §4 A1 (GD), A2/A4/A7 (NGD, cap, momentum, per-block norms), A3/A8 (Polyak, SPS), A6 (the
joint rule), mirror-descent-lp §4 (l_p mirror descent), steepest-descent §1 and §5 (steepest descent in l_p, sign
descent, Adam), preconditioned-regression §5.4 (preconditioned GD).

Importing :mod:`attnlab.optim` registers them (:mod:`attnlab.optim.registry`). Every option is checked once, by its
entry, where a string or a keyword is read; the chains below only arrange the checked values per tensor.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from attnlab._validation import ValidationError, check_tensor
from attnlab.optim import registry as r
from attnlab.optim import transforms as tx
from attnlab.optim.adam import Adam, AdamNoEps, adam_rule
from attnlab.optim.joint_adaptive import NORMALIZERS, JointAdaptive, joint_rule
from attnlab.optim.mirror_descent import FLOAT64_EPS, P_MIN, MirrorDescent, md_rule
from attnlab.optim.normalized_gd import MOMENTUM_VARIANTS, NORMALIZATIONS, NormalizedGD, ngd_rule
from attnlab.optim.polyak import PolyakStep, polyak_rule
from attnlab.optim.preconditioned import PreconditionedGD, covariance, preconditioned_rule
from attnlab.optim.steepest_descent import SteepestDescent, sd_rule

__all__ = ["DEFAULT_LR", "LINF_FAMILY"]

#: The step size of every rule that takes one, when none is given.
DEFAULT_LR = 0.1
#: The l_p SVMs :func:`attnlab.explain.explain` adds for sign descent and Adam: l_inf and two nearby exponents.
LINF_FAMILY = (math.inf, 8.0, 4.0)

_LR = r.Option("lr", r.positive, DEFAULT_LR, "step size eta > 0")


def _optimal_loss(name: str, value: Any) -> float | torch.Tensor | str | None:
    """Polyak's target ``L*`` as given: a finite number ``>= 0``, one per run (shape (R,)), or ``"infimum"``."""
    if value is None or (isinstance(value, str) and value == tx.INFIMUM):
        return value  # None: the engine's default (infimum for a fixed linear head) or 0 (torch class)
    target = check_tensor(name, value)
    if target.dim() > 1:
        raise ValidationError(f"{name} has shape {tuple(target.shape)}, expected a number or one value per run")
    if not bool(torch.isfinite(target).all()) or bool((target < 0).any()):
        raise ValidationError(
            f"{name} == {value!r}, must be finite and >= 0 (a loss is never negative); leave it out for L*"
        )
    return float(target) if target.dim() == 0 else target


def _mirror_exponent(name: str, value: Any) -> float:
    """The exponent of the l_p mirror map: finite, ``>= P_MIN`` (:data:`attnlab.optim.mirror_descent.P_MIN`)."""
    p = r.exponent(name, value)
    if p == math.inf:
        raise ValidationError(
            f"{name} == inf has no l_p mirror map; pass a finite p > 1, or 'sd:inf' (sign descent) for steepest "
            "descent in l_inf"
        )
    if p < P_MIN:
        raise ValidationError(
            f"{name} == {value!r} is too close to 1, must be >= {P_MIN}: the l_p mirror map sign(W) |W|^(p-1) and its "
            f"inverse sign(M) |M|^(1/(p-1)) raise to the power 1/(p-1) = {1.0 / (p - 1.0):.3g}, which overflows "
            f"float64 to inf (or underflows to 0) for entries away from 1; pass {name} >= {P_MIN}"
        )
    return p


def _sd_family(options: Mapping[str, Any]) -> tuple[float, ...]:
    p = options.get("p", 2.0)
    return LINF_FAMILY if p == math.inf else (p,)


def _gd(h: r.Hyperparameters) -> tx.Rule:
    momentum = h["momentum"]  # spec A1 (A4): the buffer m <- beta m + g, then eta m
    return tx.Rule(tuple(([tx.momentum(momentum)] if any(momentum) else []) + [tx.scale_by_lr(h["lr"])]))


def _ngd(h: r.Hyperparameters) -> tx.Rule:
    blocks = []
    for i, kind in enumerate(h["normalization"]):
        if kind == "group" and h.engine:
            raise ValidationError(
                "optimizer 'ngd': normalization == 'group', but the engine has no parameter groups; pass "
                "normalization=global or tensor"
            )
        blocks.append("global" if kind == "global" else (kind, h.groups[i] if kind == "group" else i))
    variants, hyper = h["momentum_variant"], (h["lr"], h["max_step"], h["momentum"])
    return ngd_rule(*hyper, variants, blocks=blocks, eps=h["eps"])  # spec A2, A4, A7


def _polyak(h: r.Hyperparameters) -> tx.Rule:
    target = h["optimal_loss"][0]
    if target is None:
        raise ValidationError("optimizer 'polyak' needs L*: pass optimal_loss (0 is a lower bound)")
    caps = [math.inf if cap is None else cap for cap in h["max_step"]]
    return polyak_rule(target, h["c"], caps)  # spec A3, A8


def _joint(h: r.Hyperparameters) -> tx.Rule:
    lrs, blocks = list(h["lr"]), h.groups
    if h.engine:
        blocks = ["v" if name == "v" else "W" for name in h.names]  # the paper's two blocks: head u, attention W
        head_lr = h["head_lr"][0]
        if head_lr is not None:
            if "v" not in h.names:
                raise ValidationError("head_lr sets the step of a trained head; pass train_head=True or drop head_lr")
            lrs = [head_lr if name == "v" else lr for name, lr in zip(h.names, lrs)]
    return joint_rule(lrs, h["alpha"], h["normalizer"], h["adaptive"], blocks)  # spec ngd A6, A7


def _preconditioned(h: r.Hyperparameters) -> tx.Rule:
    def inverse(cov: torch.Tensor | None) -> torch.Tensor | None:
        return None if cov is None else torch.cholesky_inverse(torch.linalg.cholesky(cov))  # checked SPD

    lefts, rights = [inverse(c) for c in h["left"]], [inverse(c) for c in h["right"]]
    return preconditioned_rule(h["lr"], lefts, rights)  # spec preconditioned-regression §5.4


_MOMENTUM = r.Option("momentum", r.fraction, 0.0, "heavy-ball momentum beta in [0, 1)")
_BETA1 = r.Option("beta1", r.fraction, 0.9, "first-moment decay in [0, 1)", shared=True)
_BETA2 = r.Option("beta2", r.open_fraction, 0.999, "second-moment decay in (0, 1)", shared=True)

r.register(
    r.OptimizerEntry(
        "gd",
        "gradient descent, with optional heavy-ball momentum",
        "implicit-bias-ngd §4 A1, A4",
        (_LR, _MOMENTUM),
        _gd,
        aliases={"sgd": r.Alias("gd", doc="the paper's SGD")},
        class_name="GD",
    )
)
r.register(
    r.OptimizerEntry(
        "ngd",
        "normalised GD: every uncapped step has length lr",
        "implicit-bias-ngd §4 A2, A4, A7",
        (
            _LR,
            r.Option("max_step", r.cap, None, "cap on the step size lr / ||g||"),
            _MOMENTUM,
            r.Option("momentum_variant", r.choice(*MOMENTUM_VARIANTS), "heavy_ball", "which vector sets the step"),
            r.Option("normalization", r.choice(*NORMALIZATIONS), "global", "norm over all tensors, a group, a tensor"),
            r.Option("eps", r.nonnegative, 0.0, "divide by ||g|| + eps, as peer code does"),
        ),
        _ngd,
        torch_class=NormalizedGD,
        aliases={"sngd": r.Alias("ngd", doc="NGD on mini-batches, spec A8")},
    )
)
r.register(
    r.OptimizerEntry(
        "polyak",
        "the Polyak step (L - L*) / (c ||g||^2), capped",
        "implicit-bias-ngd §4 A3, A8",
        (
            r.Option("max_step", r.cap, None, "cap on the step size"),
            r.Option("optimal_loss", _optimal_loss, None, "L*: a number, one per run, or infimum", group=False),
            r.Option("c", r.positive, 1.0, "the constant c > 0"),
        ),
        _polyak,
        torch_class=PolyakStep,
        aliases={"sps": r.Alias("polyak", {"c": 0.5, "optimal_loss": 0.0}, doc="c = 0.5, L* = 0, spec A8")},
        refusals={
            "lr": "its step size is (L - L*) / (c ||g||^2); pass max_step to cap it, c to scale it, or optimal_loss "
            "for L*"
        },
    )
)
r.register(
    r.OptimizerEntry(
        "md",
        "l_p mirror descent, each tensor's step normalised by its dual norm",
        "mirror-descent-lp §4",
        (
            _LR,
            r.Option("p", _mirror_exponent, 2.0, f"the mirror map's exponent p >= {P_MIN}"),
            r.Option("normalized", r.boolean, True, "divide by ||G||_q + eps"),
            r.Option("eps", r.nonnegative, FLOAT64_EPS, "added to the dual norm"),
        ),
        lambda h: md_rule(h["lr"], h["p"], h["normalized"], h["eps"]),  # spec md §4
        torch_class=MirrorDescent,
        positional="p",
        family=lambda options: (options.get("p", 2.0),),
        potential=lambda options: options.get("p", 2.0),
    )
)
r.register(
    r.OptimizerEntry(
        "joint",
        "the joint adaptive rule lr / (N_t (t + 1)^alpha) per block (head, attention)",
        "implicit-bias-ngd §4 A6, A7",
        (
            _LR,
            r.Option("alpha", r.nonnegative, 2.0 / 3.0, "decay exponent"),
            r.Option("normalizer", r.choice(*NORMALIZERS), "loss", "N_t"),
            r.Option("adaptive", r.boolean, True, "divide by N_t"),
            r.Option(
                "head_lr",
                r.positive,
                None,
                "the head's step; a torch optimizer takes it as the head's parameter group's lr",
                engine_only=True,
            ),
        ),
        _joint,
        torch_class=JointAdaptive,
    )
)
r.register(
    r.OptimizerEntry(
        "sd",
        "normalised steepest descent in l_p: every step has l_p length lr",
        "steepest-descent §1",
        (_LR, r.Option("p", r.exponent, 2.0, "the norm's exponent, 1 < p <= inf", shared=True)),
        lambda h: sd_rule(h["lr"], h.shared("p")),  # steepest-descent §1: -lr d, ||d||_p = 1
        torch_class=SteepestDescent,
        aliases={"sign": r.Alias("sd", {"p": math.inf}, fixed=("p",), doc="sign descent, sd:inf")},
        positional="p",
        family=_sd_family,
    )
)
r.register(
    r.OptimizerEntry(
        "adam",
        "Adam with epsilon and optional decoupled weight decay (AdamW), buffers in the log domain",
        "steepest-descent §5",
        (
            _LR,
            _BETA1,
            _BETA2,
            r.Option("eps", r.nonnegative, 1e-8, "added to sqrt(v_hat)"),
            r.Option("weight_decay", r.nonnegative, 0.0, "decoupled decay lambda (AdamW); 0 is off"),
        ),
        lambda h: adam_rule(h["lr"], h.shared("beta1"), h.shared("beta2"), h.shared("eps"), h["weight_decay"]),
        torch_class=Adam,
        family=lambda options: LINF_FAMILY,
    )
)
r.register(
    r.OptimizerEntry(
        "adam-noeps",
        "Adam without epsilon, buffers in the log domain",
        "steepest-descent §5",
        (_LR, _BETA1, _BETA2),
        lambda h: adam_rule(h["lr"], h.shared("beta1"), h.shared("beta2")),
        torch_class=AdamNoEps,
        family=lambda options: LINF_FAMILY,
    )
)
r.register(
    r.OptimizerEntry(
        "preconditioned",
        "GD preconditioned on both sides by inverse covariances, L^-1 g R^-1",
        "preconditioned-regression §5.4",
        (
            _LR,
            r.Option("left", covariance, None, "left covariance, SPD matrix", string=False),
            r.Option("right", covariance, None, "right covariance, SPD matrix", string=False),
        ),
        _preconditioned,
        torch_class=PreconditionedGD,
    )
)
