"""``regression.context``: the lemmas of Appendix D as declared rows, the moments of one query's softmax weights and
context statistics given the query, against the context size n.

Spec: docs/theory/preconditioned-regression.md §8 (Appendix D). Theorem 4's proof bounds the gap between the expected
empirical gradient and the population gradient through these moments: Lemma 9 (a weight's second moment ~ n^-2),
Lemma 10 (conditional variances of weight statistics), and for the context mean ``mu``, its outer product
``mu mu^T`` and the weighted covariance ``Cov_S`` the mean-square deviation from the ``n -> infinity`` limit
(Lemmas 11, 15, 20) and the conditional variance (Lemmas 14, 19, 23), each ``<= C(x)/n``. The moments are
:func:`attnlab.regression.conditional_moments`; the statements were lost in extraction, so each row's reading says
which statistic it takes from the lemma's proof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_scalar
from attnlab.experiments.registry import register
from attnlab.experiments.regression.common import INSTANCE, SOURCE, TheoryInstanceConfig
from attnlab.experiments.regression.falsifiers import CONTEXT_FALSIFIERS
from attnlab.plotting import house_figure, label_axes, label_ours, new_figure, theory_line
from attnlab.regression import perturbed_manifold_point, sym_sqrt
from attnlab.regression.context import conditional_moments
from attnlab.verify import Claim, Experiment, ExperimentResult, Reading, RunContext, fit_slope

__all__ = ["ContextConfig"]


@dataclass(frozen=True)
class ContextConfig(TheoryInstanceConfig):
    """Settings of the Appendix D rows (sizes are ours; the paper gives none).

    The instance (d, k, noise_std, singular_values, problem_seed) and seed are
    :class:`~attnlab.experiments.regression.common.TheoryInstanceConfig`'s; its step settings are not read here.

    Attributes
    ----------
    point_scale : float
        Entry size of the perturbation of theta_R whose key-query matrix Q the rows use (a point near M, off it).
    ns : tuple of int
        Context sizes n (the query and n - 1 fresh covariates).
    draws : int
        Contexts per n.
    """

    point_scale: float = 0.05
    ns: tuple[int, ...] = (25, 50, 100, 200, 400)
    draws: int = 16_000

    OURS = ("d", "k", "noise_std", "singular_values", "point_scale", "ns", "draws")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_scalar("point_scale", self.point_scale, low=0.0)
        check_scalar("draws", self.draws, kind=int, low=2)
        if len(self.ns) < 3 or min(self.ns) < 2:
            raise ValidationError(f"ns needs >= 3 context sizes, each >= 2, to fit a rate; got {self.ns}")


_D = f"{SOURCE} §8"
_SUBSET = (
    "one query x = Sigma^{1/2} 1 / sqrt(d) (whitened norm 1) and the key-query matrix Q of theta_R + N(0, "
    "point_scale^2) entries off M (perturbed_manifold_point, seed); draws contexts of n - 1 fresh covariates and "
    "the query per n (seed + 1 + n)"
)
_SIZES = (*INSTANCE, "point_scale", "ns", "draws")
_ONE_OVER_N = (
    "slope <= -0.75: the lemma's C(x)/n (slope -1) with a quarter decade per decade of slack for finite-n curvature, "
    "halfway to a half rate (-0.5)"
)


def _moment_claim(text: str, result: str, falsifier: tuple[str, ...], key: str, moment: str, what: str) -> Claim:
    """A row of Appendix D: the least-squares log-log slope over n of one conditional moment, <= the lemma's rate."""
    lemma9 = moment == "cross_weight_sq"
    return Claim(
        text,
        result,
        _D,
        falsifier=falsifier,
        id=key,
        reading=Reading(
            statistic=f"least-squares log-log slope over n of {what} given the query (Monte-Carlo mean over the "
            f"contexts; column {moment} of conditional_moments)",
            window="every context size n of ns",
            subset=_SUBSET,
            tolerance="slope <= -1.75: the lemma's C(x)/n^2 (slope -2) with a quarter decade per decade of slack"
            if lemma9
            else _ONE_OVER_N,
            params={"moment": moment, "bound": -1.75 if lemma9 else -0.75},
            sizes=_SIZES,
        ),
    )


CLAIMS = (
    _moment_claim(
        "L9 E[s_ij^2 | x_i] <= C/n^2: log-log slope over n",
        "000:Lem9",
        ("softmax-unnormalized",),
        "lem9-cross-weight",
        "cross_weight_sq",
        "E[s_j^2] of a context token's weight (j >= 2, averaged over the tokens)",
    ),
    _moment_claim(
        "L10 Var(n s_ii | x_i) <= C/n: log-log slope over n",
        "000:Lem10",
        ("context-shared-draw",),
        "lem10-self-weight",
        "self_weight_var",
        "Var(n s_1) of the query's own weight",
    ),
    _moment_claim(
        "L10 Var(Z/n | x_i) <= C/n, Z = sum_l exp(x_l^T Q x_i): log-log slope over n",
        "000:Lem10",
        ("context-shared-draw",),
        "lem10-normalizer",
        "normalizer_var",
        "Var(Z / n) of the softmax normalizer Z = sum_l exp(x_l^T Q x)",
    ),
    _moment_claim(
        "L11 E[||mu_i - Sigma Q x_i||^2 | x_i] <= C/n: log-log slope over n",
        "000:Lem11",
        ("softmax-unnormalized", "context-shared-draw"),
        "lem11-mean",
        "mean_sq_dev",
        "E ||mu - Sigma Q x||^2 of the context mean",
    ),
    _moment_claim(
        "L14 tr Var(mu_i | x_i) <= C/n: log-log slope over n",
        "000:Lem14",
        ("softmax-unnormalized", "context-shared-draw"),
        "lem14-mean-variance",
        "mean_var",
        "tr Var(mu) of the context mean",
    ),
    _moment_claim(
        "L15 E[||mu_i mu_i^T - m m^T||^2 | x_i] <= C/n, m = Sigma Q x_i: log-log slope over n",
        "000:Lem15",
        ("softmax-unnormalized", "context-shared-draw"),
        "lem15-outer",
        "outer_sq_dev",
        "E ||mu mu^T - m m^T||^2, m = Sigma Q x",
    ),
    _moment_claim(
        "L19 tr Var(mu_i mu_i^T | x_i) <= C/n: log-log slope over n",
        "000:Lem19",
        ("softmax-unnormalized", "context-shared-draw"),
        "lem19-outer-variance",
        "outer_var",
        "tr Var(mu mu^T)",
    ),
    _moment_claim(
        "L20 E[||Cov_S_i - Sigma||^2 | x_i] <= C/n: log-log slope over n",
        "000:Lem20",
        ("softmax-unnormalized", "context-shared-draw"),
        "lem20-covariance",
        "covariance_sq_dev",
        "E ||Cov_S - Sigma||^2 of the weighted context covariance",
    ),
    _moment_claim(
        "L23 tr Var(Cov_S_i | x_i) <= C/n: log-log slope over n",
        "000:Lem23",
        ("softmax-unnormalized",),
        "lem23-covariance-variance",
        "covariance_var",
        "tr Var(Cov_S)",
    ),
)


def run_context(config: ContextConfig, ctx: RunContext) -> ExperimentResult:
    """The conditional moments of one query's weights and statistics against n, and their rates."""
    problem = config.problem()
    _, Q = perturbed_manifold_point(problem, 1, config.point_scale, config.seed)
    query = sym_sqrt(problem.Sigma) @ torch.ones(config.d, dtype=torch.float64) / math.sqrt(config.d)
    table = conditional_moments(problem, Q[0], query, config.ns, config.draws, config.seed + 1)
    ns = table.n.to_numpy(float)
    checks = []
    for claim in CLAIMS:
        values = table[claim.param("moment")].to_numpy()
        power = 2 if claim.param("bound") < -1 else 1
        scaled = ", ".join(f"{v:.3g}" for v in values * ns**power)
        spread = f"{'n' if power == 1 else 'n^2'} x moment = {scaled} (SE under {float((table[claim.param('moment') + '_se'] / values).max()):.1%})"
        checks.append(claim.less(fit_slope(ns, values)[0], claim.param("bound"), spread=spread))
    return ExperimentResult(
        frame=table,
        checks=checks,
        figures={"context": _figure(config, table)},
        notes=[problem.assumptions().describe(), f"query x = {np.round(query.numpy(), 4).tolist()}"],
    )


@house_figure
def _figure(config: ContextConfig, table: pd.DataFrame):
    fig, axes = new_figure(2, width=4.4, height=3.4)
    ns = table.n.to_numpy(float)
    for claim in CLAIMS:
        moment, power = claim.param("moment"), 2 if claim.param("bound") < -1 else 1
        (line,) = axes[0].loglog(
            ns, table[moment], "o-", label=f"{claim.id.split('-')[0].replace('lem', 'L')} {moment}"
        )
        axes[1].loglog(ns, table[moment] * ns**power, "o-", color=line.get_color())
    theory_line(axes[0], ns, ns[0] / ns, "$1/n$ (slope)")
    label_axes(axes[0], "context size $n$", "moment given the query", "Appendix D moments")
    label_axes(axes[1], "context size $n$", r"$n \times$ moment ($n^2$ for L9)", "flat or falling: the rate holds")
    axes[0].legend(fontsize=6)
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="regression.context",
        cost=26.0,
        config_type=ContextConfig,
        run=run_context,
        quick={"ns": (25, 50, 100, 200), "draws": 4000},
        claims=CLAIMS,
        falsifiers=CONTEXT_FALSIFIERS,
    )
)
