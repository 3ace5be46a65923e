"""The wrong mechanisms under which this paper's theory checks must fail.

Spec: docs/theory/implicit-bias-ngd.md §4 (the algorithms), §5 (the max-margin programs), §3 (``L_*``). Each
function returns the :class:`~attnlab.verify.Falsifier` for one experiment module: a falsifier
patches the mechanism *where that module looks it up*, so each module builds its own from the module's name.
"""

from __future__ import annotations

import torch

from attnlab.data import TokenSelectionData
from attnlab.optim import NormalizedGD, PolyakStep
from attnlab.verify import Falsifier

__all__ = [
    "gd_normalized",
    "l_star_zero",
    "ngd_gradient_step",
    "optimal_score_shifted",
    "polyak_doubled_gap",
    "polyak_half_gap",
    "rule_gd_normalized",
    "rule_gradient_step",
    "svm_nuclear_norm",
    "svm_other_token",
    "u_svm_other_token",
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


def _half_gap(polyak):
    """Polyak's step with the loss gap halved: ``(L - L_*) / (2 ||g||^2)``."""
    return lambda params, max_step=float("inf"), optimal_loss=0.0: PolyakStep(
        params, max_step=max_step, optimal_loss=optimal_loss, c=2.0
    )


def polyak_half_gap(module: str) -> Falsifier:
    """Polyak's step computed from half the loss gap."""
    return Falsifier(
        "polyak-half-gap",
        "Polyak's step with the loss gap L - L_* halved",
        f"{module}:PolyakStep",
        _half_gap,
        kind="mechanism",
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
    """The data model with the optimal token's score shifted below the other tokens' (Assumption 2's gap < 0)."""
    return Falsifier(
        "optimal-score-shifted",
        "Example 1 with the optimal token's score shifted from rho to -rho/2, below the other tokens' 0",
        f"{module}:example1",
        _shift_optimal_score,
        kind="mechanism",
    )
