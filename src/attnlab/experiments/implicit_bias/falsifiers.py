"""The wrong mechanisms under which this paper's theory checks must fail.

Spec: docs/theory/implicit-bias-ngd.md §4 (the algorithms), §5 (the max-margin programs), §3 (``L_*``). Each
function returns the :class:`~attnlab.verify.Falsifier` for one experiment module: a falsifier
patches the mechanism *where that module looks it up*, so each module builds its own from the module's name.
"""

from __future__ import annotations

import torch

from attnlab.data import TokenSelectionData
from attnlab.experiments.preconditioners import entry_scale, scaled_entries
from attnlab.metrics import optimal_loss
from attnlab.models import Parametrization
from attnlab.models.functional import _attention_loss as attention_loss
from attnlab.optim import NormalizedGD
from attnlab.optim import transforms as tx
from attnlab.optim.spec import parse_optimizer
from attnlab.verify import Falsifier

__all__ = [
    "attention_transposed",
    "gd_normalized",
    "l_star_zero",
    "ngd_gradient_step",
    "attention_temperature",
    "dm_equal_norms",
    "head_preconditioned",
    "head_scaled",
    "joint_head_preconditioned",
    "joint_w_not_adaptive",
    "optimal_score_shifted",
    "polyak_doubled_gap",
    "polyak_float64_gap",
    "rule_gd_normalized",
    "rule_gd_preconditioned",
    "rule_gd_weight_decay",
    "rule_gradient_step",
    "step_ascent",
    "svm_nuclear_norm",
    "svm_other_token",
    "u_svm_other_token",
    "w_ascent",
    "w_frozen",
]


def svm_nuclear_norm(module: str) -> Falsifier:
    """The W-SVM solved in the nuclear norm: every alignment with ``W_mm`` measures the wrong reference."""
    return Falsifier(
        "svm-nuclear-norm",
        "the max-margin reference W_mm solved in the nuclear norm instead of the Frobenius norm",
        f"{module}:attention_svm",
        lambda svm: lambda data, norm="fro", **kw: svm(data, norm="nuc", **kw),
        kind="reference",
    )


def svm_other_token(module: str) -> Falsifier:
    """The W-SVM of the wrong selection: the token after the optimal one in each sequence."""
    return Falsifier(
        "svm-other-token",
        "the max-margin reference W_mm solved for the wrong selection (the token after the optimal one)",
        f"{module}:attention_svm",
        lambda svm: lambda data, norm="fro", **kw: svm(data, norm, select=(data.select + 1) % data.X.shape[1], **kw),
        kind="reference",
    )


def u_svm_other_token(module: str) -> Falsifier:
    """The u-SVM of the non-optimal tokens (``T = 2``): the head's reference selects the wrong token."""
    return Falsifier(
        "u-svm-other-token",
        "the u-SVM solved on the non-optimal token of each sequence (wrong selection)",
        f"{module}:head_svm",
        lambda svm: lambda data, p=2.0, **kw: svm(data, p, select=1 - data.select, **kw),
        kind="reference",
    )


def _plain_step(ngd):
    return lambda params, lr, **kw: torch.optim.SGD(params, lr=lr)


def ngd_gradient_step(module: str) -> Falsifier:
    """NGD that forgets to normalise: a plain gradient step with NGD's step size."""
    return Falsifier(
        "ngd-gradient-step",
        "NGD's update not normalised by ||grad||",
        f"{module}:NormalizedGD",
        _plain_step,
        kind="mechanism",
    )


def rule_gradient_step(module: str) -> Falsifier:
    """The module's NGD rule name (``NGD_RULE``) swapped for plain GD: unnormalised steps of size ``eta``."""
    return Falsifier(
        "ngd-gradient-step",
        "NGD's update not normalised by ||grad||",
        f"{module}:NGD_RULE",
        lambda rule: "gd",
        kind="mechanism",
    )


def rule_gd_normalized(module: str) -> Falsifier:
    """The module's GD rule name (``GD_RULE``) swapped for NGD: GD's step divided by ``||grad||``."""
    return Falsifier(
        "gd-normalized", "GD's step divided by ||grad||", f"{module}:GD_RULE", lambda rule: "ngd", kind="mechanism"
    )


def _gd_weight_decay(train):
    """``train`` whose ``"gd"`` runs decay: ``W <- W - lr (grad + 1e-3 W)`` (torch SGD's ``weight_decay``)."""

    def decayed(*args, optimizer="ngd", lr=None, **options):
        if optimizer != "gd":
            return train(*args, optimizer=optimizer, lr=lr, **options)
        return train(*args, optimizer=tx.Rule((tx.decoupled_decay(1e-3), tx.scale_by_lr(lr))), **options)

    return decayed


def rule_gd_weight_decay(module: str) -> Falsifier:
    """The module's batched GD runs (rule ``"gd"``) with weight decay 1e-3: a bounded norm, not a log t growth."""
    return Falsifier(
        "gd-weight-decay",
        "GD with weight decay 1e-3 (a bounded norm: the gradient and the decay balance)",
        f"{module}:batched_train",
        _gd_weight_decay,
        kind="mechanism",
    )


def _gd_preconditioned(low: float, high: float):
    """``train`` whose ``"gd"`` runs step on ``diag(linspace(low, high)) grad_W`` (spec §4 A1 with a preconditioner)."""

    def wrap(train):
        def preconditioned(*args, optimizer="ngd", lr=None, **options):
            if optimizer != "gd":
                return train(*args, optimizer=optimizer, lr=lr, **options)
            rule = tx.Rule((entry_scale(low, high, 2), tx.scale_by_lr(lr)))  # W <- W - lr (D * grad), D fixed
            return train(*args, optimizer=rule, **options)

        return preconditioned

    return wrap


def rule_gd_preconditioned(module: str, low: float = 0.5, high: float = 1.5) -> Falsifier:
    """The module's batched GD runs (rule ``"gd"``) stepping on ``W``'s gradient times ``linspace(low, high)`` over
    its entries: steepest descent in a weighted norm, whose limit direction is that norm's max-margin ``W``, not the
    Frobenius W-SVM ``W_mm`` of spec §5 (for (0.5, 1.5) on the quick rates data 1 - corr = 0.059 from ``W_mm``)."""
    return Falsifier(
        "gd-preconditioned",
        f"GD on W's gradient times diag(linspace({low:g}, {high:g})) over its entries (a fixed diagonal "
        "preconditioner: GD then tends to the max-margin W of a weighted norm, another direction)",
        f"{module}:batched_train",
        _gd_preconditioned(low, high),
        kind="mechanism",
    )


def _w_not_adaptive(optimizer_type):
    def make(groups, *args, **kw):
        head, attention = groups  # [{"params": [u]}, {"params": [W]}], as rates_joint builds them
        return optimizer_type([head, {**attention, "adaptive": False}], *args, **kw)

    return make


def joint_w_not_adaptive(module: str) -> Falsifier:
    """The module's ``JointAdaptive`` (rule A6) without the ``1 / L`` factor on the ``W`` block: ``W`` steps by
    ``eta (t+1)^-alpha grad_W``, which vanishes with the loss, so ``||W_t||`` levels off (spec §4 A6, §8.10)."""
    return Falsifier(
        "joint-w-not-adaptive",
        "the joint rule A6 without its 1/L(theta_t) factor on the W block (W steps eta (t+1)^-alpha grad_W)",
        f"{module}:JointAdaptive",
        _w_not_adaptive,
        kind="mechanism",
    )


class _ShrunkAfterStep(torch.optim.Optimizer):
    """``inner``'s step, then ``W <- (1 - rate) W``: a plain torch optimizer, which the loop steps with a closure."""

    def __init__(self, inner: torch.optim.Optimizer, W: torch.Tensor, rate: float) -> None:
        self.inner, self.W, self.rate = inner, W, rate
        super().__init__([p for group in inner.param_groups for p in group["params"]], {})

    def step(self, closure=None):
        loss = self.inner.step(closure)
        with torch.no_grad():
            self.W.mul_(1.0 - self.rate)
        return loss


def joint_w_shrunk(module: str, rate: float = 1e-4) -> Falsifier:
    """The module's ``JointAdaptive`` (rule A6) with ``W <- (1 - rate) W`` after each step (weight decay on the
    attention block): ``||W_t||`` then stops growing like ``log t`` once the decay balances the ``eta (t+1)^-alpha``
    steps, the mechanism Lemma 12's rate rules out (spec §8.10)."""

    def shrunk(optimizer_type):
        def make(groups, *args, **kw):
            return _ShrunkAfterStep(optimizer_type(groups, *args, **kw), groups[1]["params"][0], rate)

        return make

    return Falsifier(
        "joint-w-shrunk",
        f"the joint rule A6 with W <- (1 - {rate:g}) W after each step (weight decay on the attention block)",
        f"{module}:JointAdaptive",
        shrunk,
        kind="mechanism",
    )


def _gd_normalized(sgd):
    return lambda params, lr: NormalizedGD(params, lr=lr)


def gd_normalized(module: str) -> Falsifier:
    """GD whose step is divided by the gradient's norm: NGD under GD's name."""
    return Falsifier(
        "gd-normalized", "GD's step divided by ||grad||", f"{module}:_sgd", _gd_normalized, kind="mechanism"
    )


def l_star_zero(module: str) -> Falsifier:
    """``L_*`` taken as 0, as if the loss could vanish with a fixed decoder (spec §3 says it cannot)."""
    return Falsifier(
        "l-star-zero",
        "the infimum of the loss taken as 0 instead of (1/n) sum_i l(gamma_opt)",
        f"{module}:optimal_loss",
        lambda closed_form: lambda *args: 0.0,
        kind="reference",
    )


def polyak_doubled_gap(module: str) -> Falsifier:
    """Polyak's step size computed with SPS's constant ``c = 1/2``: the loss gap doubled."""
    return Falsifier(
        "polyak-doubled-gap",
        "Polyak's step size (L - L_*) / (c ||g||^2) with c = 1/2 (the loss gap doubled)",
        f"{module}:polyak_step_size",
        lambda size: lambda *args, c=1.0, **kw: size(*args, c=c / 2, **kw),
        kind="mechanism",
    )


def _shift_optimal_score(example1):
    """Example 1 whose optimal tokens score ``-rho / 2`` instead of ``rho``: below the others' 0."""

    def shifted(*args, **kw):
        data = example1(*args, **kw)
        rho = float(data.token_scores().gather(1, data.select[:, None]).mean())
        X = data.X.clone()
        rows = torch.arange(data.n)
        X[rows, data.select] -= 1.5 * rho * data.y[:, None] * data.v / data.v.norm() ** 2  # score rho -> -rho / 2
        return TokenSelectionData(X, y=data.y, v=data.v, select=data.select)

    return shifted


def optimal_score_shifted(module: str) -> Falsifier:
    """The data model with the optimal token's score shifted below the other tokens' (Assumption 2's gap < 0).

    It breaks a hypothesis of every fixed-decoder result (the selected token is no longer the optimal one) and fails
    every fixed-decoder row alike, so it is of kind ``"hypothesis"``: it shows a row depends on the hypothesis, not
    that the row tests a mechanism.
    """
    return Falsifier(
        "optimal-score-shifted",
        "Example 1 with the optimal token's score shifted from rho to -rho/2, below the other tokens' 0 (the selected "
        "token no longer optimal: a broken hypothesis)",
        f"{module}:example1",
        _shift_optimal_score,
        kind="hypothesis",
    )


def _trained_on(change):
    """``train`` whose model sees ``change(data)`` instead of ``data`` (the experiment's checks see the true data)."""

    def wrap(train):
        def changed(model, optimizer, data, *args, **kw):
            return train(model, optimizer, change(data), *args, **kw)

        return changed

    return wrap


def attention_temperature(module: str, scale: float = 1.3) -> Falsifier:
    """The trained model's attention logits multiplied by ``scale``: a softmax temperature ``1 / scale``."""
    return Falsifier(
        "attention-temperature",
        f"a softmax temperature 1/{scale:g} in the trained model: its logits x^T W ({scale:g} z)",
        f"{module}:train",
        _trained_on(lambda data: TokenSelectionData(data.X, Z=scale * data.Z, y=data.y, v=data.v, select=data.select)),
        kind="mechanism",
    )


def head_scaled(module: str, scale: float = 1.3) -> Falsifier:
    """The trained model's fixed decoder scaled by ``scale`` (the unit decoder of spec §6.1 left unnormalised)."""
    return Falsifier(
        "head-scaled",
        f"the fixed decoder u of the trained model scaled by {scale:g} (u not normalised)",
        f"{module}:train",
        _trained_on(lambda data: TokenSelectionData(data.X, Z=data.Z, y=data.y, v=scale * data.v, select=data.select)),
        kind="mechanism",
    )


def _preconditioned_heads(low: float, high: float):
    def preconditioned(make):
        return lambda model: scaled_entries(make(model), low, high)

    def wrap(optimizers):
        return lambda config: {name: preconditioned(make) for name, make in optimizers(config).items()}

    return wrap


def head_preconditioned(module: str, low: float = 0.95, high: float = 1.05) -> Falsifier:
    """Every attnlab optimizer of the module's ``_optimizers`` stepping on ``diag(linspace(low, high)) grad_u``.

    A fixed diagonal preconditioner on the head (steepest descent in a weighted norm, as a per-coordinate step size
    left in by mistake would do): the head still grows, but towards the max-margin head of that weighted norm, not
    the u-SVM of spec §5, so ``1 - corr(u_t, u_mm)`` levels off at a positive value.
    """
    return Falsifier(
        "head-preconditioned",
        f"the head's gradient times diag(linspace({low:g}, {high:g})) in the rule of every normalised method (a fixed "
        "diagonal preconditioner on u: its max-margin head is another direction)",
        f"{module}:_optimizers",
        _preconditioned_heads(low, high),
        kind="mechanism",
    )


def joint_head_preconditioned(module: str, low: float = 0.9, high: float = 1.1) -> Falsifier:
    """The module's ``JointAdaptive`` (rule A6) stepping on ``diag(linspace(low, high)) grad_u``: the head grows
    towards the max-margin head of a weighted norm, not the u-SVM, so ``1 - corr(u_t, u_mm)`` levels off."""

    def wrap(optimizer_type):
        def make(groups, *args, **kw):
            return scaled_entries(optimizer_type(groups, *args, **kw), low, high)

        return make

    return Falsifier(
        "joint-head-preconditioned",
        f"the joint rule A6 with the head's gradient times diag(linspace({low:g}, {high:g})) (a fixed diagonal "
        "preconditioner on u: its max-margin head is another direction)",
        f"{module}:JointAdaptive",
        wrap,
        kind="mechanism",
    )


def _without_w(model_type):
    def make(*args, **kw):
        model = model_type(*args, **kw)
        model.weight.requires_grad_(False)  # training leaves a parameter with requires_grad=False where it is
        return model

    return make


def w_frozen(module: str) -> Falsifier:
    """Joint training that forgets ``W``: only the head ``u`` moves (the attention stays uniform from ``W_0 = 0``)."""
    return Falsifier(
        "w-frozen", "W left out of the update: only the head u trains", f"{module}:Combined", _without_w, "mechanism"
    )


def polyak_float64_gap(module: str) -> Falsifier:
    """Polyak's gap ``L - L_*`` formed as the difference of the two float64 numbers instead of from the margins.

    ``L - L_*`` falls below float64's resolution of ``L`` within tens of steps, the difference rounds to 0 and the
    step stops: the module's ``POLYAK_RULE`` runs as the numeric ``L_*`` once did by default. ``module`` is the
    engine that fills the gap (``attnlab.training.engine``), where the rule reads it.
    """

    def in_float64(log_excess_risk):
        def gap(X, Z, y, v, W, loss="exp", *, scores=None):
            risk = attention_loss(X, Z, y, v, W, loss=loss)  # (R,)
            return torch.log((risk - optimal_loss(X, y, v, loss=loss)).clamp_min(0.0))  # log 0 = -inf: no step

        return gap

    return Falsifier(
        "polyak-float64-gap",
        "Polyak's gap L - L_* formed as the difference of the float64 numbers L and L_* (it rounds to 0 below "
        "2e-16 L, and the step stops) instead of from the margins",
        f"{module}:log_excess_risk",
        in_float64,
        kind="mechanism",
    )


def _equal_norms(dm):
    """DM whose other token is drawn at the optimal token's scale: Condition 1's norm gap removed."""

    def equal(n, d, sigma_opt, sigma_oth, *args, **kw):
        data = dm(n, d, sigma_opt, sigma_oth, *args, **kw)
        X = data.X.clone()
        X[:, 1] *= sigma_opt / sigma_oth
        return TokenSelectionData(X, Z=data.Z, y=data.y, v=data.v, select=data.select)

    return equal


def dm_equal_norms(module: str) -> Falsifier:
    """DM with both tokens at the optimal token's scale (Condition 1 off): which token wins is no longer fixed."""
    return Falsifier(
        "dm-equal-norms",
        "DM with the other token drawn at the optimal token's scale (Condition 1's norm gap removed)",
        f"{module}:dm",
        _equal_norms,
        kind="mechanism",
    )


# spec §2: W trained directly, with the chain rule's sign flipped (the model moves W up its gradient)
_ASCENT = Parametrization("W", ("W",), lambda p: p["W"], lambda p, g: {"W": -g})


def _w_uphill(model_type):
    def make(*args, **kw):
        model = model_type(*args, **kw)
        model.parametrization = _ASCENT  # the engine moves each parameter by the rule applied to its chain's gradient
        return model

    return make


def w_ascent(module: str) -> Falsifier:
    """Joint training whose ``W`` moves up its gradient (a sign slip in ``W``'s update); ``u`` trains as it should."""
    return Falsifier(
        "w-ascent", "W's update with the wrong sign: W moves up the loss gradient", f"{module}:Combined", _w_uphill,
        "mechanism",
    )  # fmt: skip


def _transposed(gradient_direction):
    """``gradient_direction`` of the model whose logits are ``z^T W x_t``: ``grad_W L(W^T)`` transposed (spec §2)."""

    def transposed(X, Z, y, v, W, loss="exp"):
        direction, log_grad_norm, log_risk = gradient_direction(X, Z, y, v, W.mT, loss)
        return direction.mT, log_grad_norm, log_risk

    return transposed


def attention_transposed(module: str) -> Falsifier:
    """The module's loss landscape of the model with key and query swapped: logits ``z_i^T W x_it`` for spec §2's
    ``x_it^T W z_i`` (a transposed ``W`` in the logits). Its scores, optimal tokens and assumptions are the true ones;
    its max-margin direction is ``W_mm^T``, so its gradient need not favour ``W_mm`` off the ray (Lemma 2)."""
    return Falsifier(
        "attention-transposed",
        "the attention logits z^T W x_t instead of x_t^T W z (key and query swapped: the model's W transposed)",
        f"{module}:gradient_direction",
        _transposed,
        kind="mechanism",
    )


def _ascending(train):
    """``train`` whose rule steps up the gradient: the direction of ``W`` times -1 before the rule's chain."""

    def climbed(*args, optimizer="ngd", lr=None, **options):
        rule = parse_optimizer(optimizer).rule(("W",), lr=lr)
        flipped = tx.Rule((entry_scale(-1.0, -1.0, 2), *rule.transforms), rule.mirror_p)  # W <- W + step(grad)
        return train(*args, optimizer=flipped, **options)

    return climbed


def step_ascent(module: str) -> Falsifier:
    """The module's batched runs (NGD, GD and Polyak alike) with the sign of ``W``'s step flipped: a sign slip in the
    update, so ``W`` moves up the loss gradient (spec §4 A1-A3 descend)."""
    return Falsifier(
        "step-ascent",
        "the fixed-decoder runs' W step with its sign flipped (W moves up the loss gradient; NGD, GD and Polyak)",
        f"{module}:batched_train",
        _ascending,
        kind="mechanism",
    )
