"""The string-named rules of :func:`attnlab.batched.train`, built from the same transforms as the optimizer classes.

Spec: implicit-bias-ngd §4 (A1 GD with momentum, A2/A4 NGD with cap and momentum, A3 Polyak, A6 joint rule),
mirror-descent-lp §4 (l_p mirror descent, plain and dual-norm normalised).

Each name maps to the rule builder of its :mod:`attnlab.optim` class (``ngd_rule``, ``polyak_rule``, ``md_rule``,
``joint_rule``), so ``optimizer="ngd"`` here and ``NormalizedGD`` through :func:`attnlab.train` run one chain. An
option that cannot act on the chosen rule is refused with a message that says what to pass; none is ignored.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar, check_tensor
from attnlab.optim import transforms as tx
from attnlab.optim.joint_adaptive import NORMALIZERS, joint_rule
from attnlab.optim.mirror_descent import FLOAT64_EPS, md_rule
from attnlab.optim.normalized_gd import MOMENTUM_VARIANTS, ngd_rule
from attnlab.optim.polyak import polyak_rule

__all__ = ["OPTIMIZERS", "OPTIONS", "DEFAULT_LR", "named_rule"]

OPTIMIZERS = ("gd", "ngd", "polyak", "md", "joint")
#: Options each rule takes (beyond ``lr``, which every rule but Polyak takes).
OPTIONS: dict[str, set[str]] = {
    "gd": {"momentum"},
    "ngd": {"max_step", "momentum", "momentum_variant", "normalization"},
    "polyak": {"max_step", "optimal_loss", "c"},
    "md": {"p", "normalized", "eps"},
    "joint": {"alpha", "normalizer", "head_lr"},
}
DEFAULT_LR = 0.1


def _positive(name: str, value: Any) -> float:
    return float(check_scalar(name, value, low=0.0, low_inclusive=False))


def _optimal_loss(value: Any, l_star: torch.Tensor) -> torch.Tensor:
    """Polyak's target ``L*`` as given: a finite number ``>= 0``, or one per run (shape (R,))."""
    target = check_tensor("optimal_loss", value).to(l_star.device)
    if target.dim() > 1 or (target.dim() == 1 and target.shape[0] != l_star.shape[0]):
        raise ValidationError(
            f"optimal_loss has shape {tuple(target.shape)}, expected a number or one value per run ({l_star.shape[0]},)"
        )
    if bool((target < 0).any()):
        raise ValidationError(f"optimal_loss == {value!r}, must be >= 0 (a loss is never negative); default L*")
    return target


def named_rule(
    optimizer: str, lr: float | torch.Tensor | None, options: dict[str, Any], names: list[str], l_star: torch.Tensor
) -> tx.Rule:
    """The rule of ``optimizer`` for the tensors ``names`` (the parametrisation's, then ``"v"`` if the head trains).

    Parameters
    ----------
    optimizer : {"gd", "ngd", "polyak", "md", "joint"}
    lr : float, torch.Tensor of shape (R,), or None
        ``None`` takes :data:`DEFAULT_LR`; Polyak refuses any ``lr`` (its step size is ``(L - L*)/||g||^2``).
    options : dict
        The rule's options (:data:`OPTIONS`); others are refused by the caller.
    names : list of str
    l_star : torch.Tensor, shape (R,)
        The Polyak target when ``optimal_loss`` is not given.

    Raises
    ------
    ValidationError
        On an option outside its range, or ``lr`` given to Polyak.
    """
    n = len(names)
    if optimizer == "polyak":
        if lr is not None:
            raise ValidationError(
                "optimizer='polyak' takes no lr: its step size is (L - L*) / (c ||g||^2); pass max_step to cap it, "
                "c to scale it, or optimal_loss for L*"
            )
        c = _positive("c", options.get("c", 1.0))
        cap = options.get("max_step")
        cap = math.inf if cap is None else _positive("max_step", cap)
        target = l_star if options.get("optimal_loss") is None else _optimal_loss(options["optimal_loss"], l_star)
        return polyak_rule(target, [c] * n, [cap] * n)  # spec ngd A3 (A8 with c)
    lr = DEFAULT_LR if lr is None else lr
    if optimizer in ("gd", "ngd"):
        beta = float(check_scalar("momentum", options.get("momentum", 0.0), low=0.0, high=1.0, high_inclusive=False))
        if optimizer == "gd":
            chain = ([tx.momentum(beta)] if beta else []) + [tx.scale_by_lr(lr)]
            return tx.Rule(tuple(chain))  # spec ngd A1 (A4 with momentum)
        variant = check_in("momentum_variant", options.get("momentum_variant", "heavy_ball"), MOMENTUM_VARIANTS)
        cap = options.get("max_step")
        cap = None if cap is None else _positive("max_step", cap)
        normalization = check_in("normalization", options.get("normalization", "global"), ("global", "tensor"))
        return ngd_rule([lr] * n, [cap] * n, [beta] * n, [variant] * n, normalization)  # spec ngd A2, A4, A7
    if optimizer == "md":
        p = float(check_scalar("p", options.get("p", 2.0), low=1.0, low_inclusive=False))
        normalized = check_bool("normalized", options.get("normalized", True))
        eps = float(check_scalar("eps", options.get("eps", FLOAT64_EPS), low=0.0))
        return md_rule([lr] * n, [p] * n, [normalized] * n, [eps] * n)  # spec md §4
    alpha = float(check_scalar("alpha", options.get("alpha", 2.0 / 3.0), low=0.0))
    normalizer = check_in("normalizer", options.get("normalizer", "loss"), NORMALIZERS)
    lrs = [lr] * n
    if "head_lr" in options:
        if "v" not in names:
            raise ValidationError("head_lr sets the step of a trained head; pass train_head=True or drop head_lr")
        lrs[names.index("v")] = _positive("head_lr", options["head_lr"])
    blocks = ["v" if k == "v" else "W" for k in names]  # the paper's two blocks: the head u and the attention W
    return joint_rule(lrs, [alpha] * n, [normalizer] * n, [True] * n, blocks)  # spec ngd A6, A7
