"""X2: diagonal ``(xi_k, xi_q)`` converges in direction to the l1-SVM, ``beta`` trained directly to the l2-SVM.

Spec: kq-nuclear-norm §9 X2 (n=2, T=3, d=8, gap 3, omega0 in {1e-3, 1e-1, 1}, step 2e-3, 1e6 steps), §7.2
(Theorem 4.1 and the l2 contrast of Section 4.2), §7.5 (approximate KKT at the ``1 / ln mu`` rate).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.common import (
    SOURCE,
    ScoresConfig,
    beta_as_kq,
    check_omegas,
    diagonal_init,
    factor_not_trained,
    k_gradient_halved,
    kq_as_beta,
    l2_penalty,
    step_scaled_by_size,
)
from attnlab.experiments.registry import register
from attnlab.metrics import attention_margin, margin_normalized
from attnlab.models import Diagonal, DiagonalW
from attnlab.plotting import house_figure, label_ours, log_gap_axis, new_figure, theory_hline
from attnlab.svm import attention_svm, diagonal_svm
from attnlab.training.flow import constraint_vectors, gradient_flow, kkt_multipliers
from attnlab.verify import Check, Claim, Experiment, ExperimentResult, Reading, Revision, RunContext

__all__ = ["X2Config", "run_x2"]


@dataclass(frozen=True)
class X2Config(ScoresConfig):
    """X2: the normalised-GD path of diagonal ``(xi_k, xi_q)`` for several ``omega_0``, and of ``beta`` directly.

    Spec: kq-nuclear-norm §9 X2, §7.2, §7.5. ``step=0.04, steps=50000`` (ours) covers the spec's arc length 2000 in
    1/20 of the steps; ``--set step=0.002 steps=1000000`` is the spec's setting (about an hour).

    Attributes
    ----------
    gap : float
        Score gap of the optimal token (spec: 3).
    omegas : tuple of float
        Initialisation scales ``omega_0`` of the diagonal runs (spec: 1e-3, 1e-1, 1).
    step : float
        Arc length of each normalised-GD step (ours; spec 2e-3).
    steps : int
        Normalised-GD steps (ours; spec 1e6).
    record_every : int
        Steps between records (ours).
    l1_rtol : float
        Relative gap allowed between ``||beta_hat||_1`` and the l1-SVM optimum at the last step (ours).
    l2_rtol : float
        Relative gap allowed between ``||beta_hat||_2`` of ``beta`` trained directly and the l2-SVM optimum (ours).
    seed : int
        Data seed (ours).
    """

    gap: float = 3.0
    omegas: tuple[float, ...] = (1e-3, 1e-1, 1.0)
    step: float = 0.04
    steps: int = 50_000
    record_every: int = 250
    l1_rtol: float = 0.03
    l2_rtol: float = 1e-3
    seed: int = 0

    OURS = ("step", "steps", "record_every", "l1_rtol", "l2_rtol", "seed")
    INTS = ("n", "T", "d", "steps", "record_every", "seed")
    POSITIVE = ("gap", "step", "l1_rtol", "l2_rtol")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_omegas(self.omegas)


KQ_AS_BETA, BETA_AS_KQ = kq_as_beta("x2"), beta_as_kq("x2")
K_FROZEN, SIZE_SCALED = factor_not_trained("x2"), step_scaled_by_size("x2", "DiagonalW")
K_HALVED, PENALTY = k_gradient_halved("x2"), l2_penalty()
FALSIFIERS = (K_FROZEN, SIZE_SCALED, K_HALVED, PENALTY, KQ_AS_BETA, BETA_AS_KQ)
# the contrast of the paper's Section 4.2 is cited from earlier work (GD on W tends to the Frobenius SVM): ours to
# check, not one of this paper's numbered results
_THM41, _SEC42 = "003:Thm4.1", "003:Ext-Sec4.2"
_DATA = ("n", "T", "d", "gap", "seed")
_LIMIT_SIZES = (*_DATA, "omegas", "step", "steps")
_RATE_SIZES = (*_DATA, "omegas", "step", "steps", "record_every")
_LAST = "the last step"
_EACH_OMEGA = (
    "each omega0 of omegas (one row each), initialisation (5), the one scores_equal data set of the config's seed"
)
_BETA_RUN = "beta = diag(W) trained directly from beta(0) = 0, on the same data set"
_FINITE_REL = "(ours: the gap left after a finite arc length; the theorem gives the limit, no rate, §10)"


def _sizes(step: float, steps: int, record_every: int | None = None, **rtol: float) -> dict:
    """Old values of X2's size fields whose quick value differed (the full values never changed)."""
    full = {"n": 2, "T": 3, "d": 8, "gap": 3.0, "seed": 0, "omegas": [1e-3, 1e-1, 1.0], "step": 0.04, "steps": 50000}
    quick = {**full, "step": step, "steps": steps}
    if record_every is not None:
        full, quick = {**full, "record_every": 250}, {**quick, "record_every": record_every}
    for name, (f, q) in rtol.items():
        full, quick = {**full, name: f}, {**quick, name: q}
    return {k: {"full": full[k], "quick": quick[k]} for k in full}


_CI_BUDGET = (
    "the quick size changed for the CI budget with every experiment's (12fefa3: step 0.2 -> 0.3, steps 1500 -> 800); "
    "the full size did not change"
)
_QUICK_1600 = (
    "the quick run went from 800 to 1600 steps (02eeba0) so that omega0 = 1e-3 reaches the l1 zero pattern and "
    "the approximate-KKT rate is tested at the quick size too; the full size did not change"
)
_L1_READING = Reading(
    "||beta_hat||_1 of the K,Q run, beta_hat = diag(W) / mu(W), against the l1-SVM optimum (LP, "
    "attention_svm(norm='l1-diag'))",
    _LAST,
    _EACH_OMEGA,
    f"relative gap <= config.l1_rtol: 0.03 full, 0.05 quick {_FINITE_REL}",
    sizes=(*_LIMIT_SIZES, "l1_rtol"),
)
L1_OPTIMUM = Claim(
    "diagonal K,Q (omega0={omega:g}): ||beta_hat||_1 -> l1-SVM optimum (Thm 4.1)",
    _THM41,
    f"{SOURCE} §7.2, §9 X2",
    (K_FROZEN.name, KQ_AS_BETA.name),
    id="l1-optimum",
    reading=_L1_READING,
    revisions=(
        Revision(
            _L1_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: 0.8555, 0.8602, 0.8766 for omega0 = 1e-3, 0.1, 1 against 0.852232 (rel 0.05; recomputed at the "
            "old sizes with the current code)",
            "pass: 0.85243, 0.85515, 0.86387 (rel 0.03)",
            sizes=_sizes(0.2, 1500, l1_rtol=(0.03, 0.05)),
        ),
        Revision(
            _L1_READING,
            "2026-11-25",
            _QUICK_1600,
            "pass: 0.85536, 0.86123, 0.88250 against 0.852232 (rel 0.05)",
            "pass: 0.85243, 0.85515, 0.86387 (rel 0.03)",
            sizes=_sizes(0.3, 800, l1_rtol=(0.03, 0.05)),
        ),
    ),
)
_CLOSER_L1_READING = Reading(
    "max-entry distances |beta_hat - beta_l1|_inf and |beta_hat - beta_l2|_inf of the K,Q run to the l1- and "
    "l2-SVM solutions",
    _LAST,
    _EACH_OMEGA,
    "to l1 < to l2 strictly (the sign the theorem gives)",
    sizes=_LIMIT_SIZES,
)
_OLD_CLOSER_L1 = "diagonal K,Q (omega0={omega:g}) is closer to the l1 than to the l2 solution"
CLOSER_L1 = Claim(
    "diagonal K,Q (omega0={omega:g}) is closer to the l1 than to the l2 solution (max-entry distance)",
    _THM41,
    f"{SOURCE} §7.2",
    (K_FROZEN.name, KQ_AS_BETA.name),
    id="closer-to-l1",
    reading=_CLOSER_L1_READING,
    revisions=(
        Revision(
            _CLOSER_L1_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: to l1 0.0038, 0.0357, 0.118 against to l2 0.357, 0.324, 0.242 (omega0 = 1e-3, 0.1, 1; recomputed "
            "at the old sizes with the current code)",
            "pass: to l1 0.0009, 0.0166, 0.0642 against to l2 0.359, 0.344, 0.296",
            claim=_OLD_CLOSER_L1,
            sizes=_sizes(0.2, 1500),
        ),
        Revision(
            _CLOSER_L1_READING,
            "2026-11-25",
            _QUICK_1600,
            "pass: to l1 0.0070, 0.0391, 0.124 against to l2 0.353, 0.321, 0.236",
            "pass: to l1 0.0009, 0.0166, 0.0642 against to l2 0.359, 0.344, 0.296",
            claim=_OLD_CLOSER_L1,
            sizes=_sizes(0.3, 800),
        ),
    ),
)
_L2_READING = Reading(
    "||beta_hat||_2 of beta trained directly against the diagonal l2-SVM optimum (diagonal_svm(p=2))",
    _LAST,
    _BETA_RUN,
    f"relative gap <= config.l2_rtol: 1e-3 full, 0.002 quick {_FINITE_REL}",
    sizes=(*_LIMIT_SIZES, "l2_rtol"),
)
_L2_OLD_READING = dataclasses.replace(
    _L2_READING, tolerance=f"relative gap <= config.l2_rtol: 1e-3 full, 0.01 quick {_FINITE_REL}"
)
_OLD_L2 = "beta trained directly: ||beta_hat||_2 -> diagonal l2-SVM optimum"
_L2_TIGHTER = (
    "the quick tolerance was tightened from 0.01 to 0.002 (measured 2.8e-4) and the quick run went to 1600 steps "
    "(02eeba0), in the falsifier audit; the full size did not change"
)
L2_OPTIMUM = Claim(
    "beta trained directly: ||beta_hat||_2 -> diagonal l2-SVM optimum (Section 4.2)",
    _SEC42,
    f"{SOURCE} §7.2, §7.4",
    (SIZE_SCALED.name, BETA_AS_KQ.name),
    id="l2-optimum",
    reading=_L2_READING,
    revisions=(
        Revision(
            _L2_OLD_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: 0.414199 against 0.414013 (rel 0.01; recomputed at the old sizes with the current code)",
            "pass: 0.414041 (rel 1e-3)",
            claim=_OLD_L2,
            sizes=_sizes(0.2, 1500, l2_rtol=(1e-3, 0.01)),
        ),
        Revision(
            _L2_OLD_READING,
            "2026-11-25",
            _L2_TIGHTER,
            "pass: 0.414245 against 0.414013 (rel 0.01)",
            "pass: 0.414041 (rel 1e-3)",
            claim=_OLD_L2,
            sizes=_sizes(0.3, 800, l2_rtol=(1e-3, 0.01)),
        ),
    ),
)
_CLOSER_L2_READING = Reading(
    "max-entry distances of beta trained directly to the l2- and l1-SVM solutions",
    _LAST,
    _BETA_RUN,
    "to l2 < to l1 strictly (the sign the contrast gives)",
    sizes=_LIMIT_SIZES,
)
_OLD_CLOSER_L2 = "beta trained directly is closer to the l2 than to the l1 solution"
CLOSER_L2 = Claim(
    "beta trained directly is closer to the l2 than to the l1 solution (max-entry distance; Section 4.2)",
    _SEC42,
    f"{SOURCE} §7.2",
    (SIZE_SCALED.name, BETA_AS_KQ.name),
    id="closer-to-l2",
    reading=_CLOSER_L2_READING,
    revisions=(
        Revision(
            _CLOSER_L2_READING,
            "2026-11-22",
            _CI_BUDGET,
            "pass: to l2 0.00068 against to l1 0.360 (recomputed at the old sizes with the current code)",
            "pass: to l2 0.00010 against to l1 0.360",
            claim=_OLD_CLOSER_L2,
            sizes=_sizes(0.2, 1500),
        ),
        Revision(
            _CLOSER_L2_READING,
            "2026-11-25",
            _QUICK_1600,
            "pass: to l2 0.00085 against to l1 0.360",
            "pass: to l2 0.00010 against to l1 0.360",
            claim=_OLD_CLOSER_L2,
            sizes=_sizes(0.3, 800),
        ),
    ),
)
DIVERGES = Claim(
    "diagonal K,Q (omega0={omega:g}): ||beta(t)|| -> infinity, at least like ln t (Lemma 4.2; exponent of ||beta|| "
    "against ln t over the second half of the path)",
    "003:Lem4.2",
    f"{SOURCE} §3.1, §7.1",
    PENALTY.name,
    id="beta-diverges",
    reading=Reading(
        "fitted exponent a of ||beta(t)||_2 ~ c (ln t)^a (least squares of log ||beta|| on log ln t): beta = "
        "diag(W) of the K,Q run, t the flow time the NGD path's clock accumulates (dt = step / ||grad L||)",
        "the second half of the recorded steps",
        _EACH_OMEGA,
        "a >= 1 - tol, tol = 0.1: the lemma says ||beta|| -> infinity, read at the rate we derive (the loss gap "
        "falls like 1 / t, so mu and ||beta|| grow like ln t: a = 1, spec §7.1); tol covers the ln ln t correction "
        "over the window; a path that stalls at a finite minimiser has a -> 0",
        {"tol": 0.1},
        _RATE_SIZES,
    ),
)
_RESIDUAL = (
    "residual = max-entry distance of g = sum_il lambda_il B_il to the l1 subdifferential at beta_hat (entries "
    "below zero_tol of the largest count as zero), lambda = phi / ln mu (phi integrated along the path)"
)
_SETTLED = (
    "the records with mu > 1 from the arrival of the l1 solution's zero pattern on (held to the last record); the "
    "second half of them"
)
PATTERN = Claim(
    "hypothesis of the rate row: beta_hat has the l1 solution's zero pattern over >= 5 records at the end "
    "(the residual's 1 / ln mu rate is measurable only then)",
    _THM41,
    f"{SOURCE} §7.5",
    kind="property",
    id="kkt-hypothesis",
    reading=Reading(
        "number of omega0 whose K,Q run has at least min_records records in the second half of the records that "
        "hold the l1 solution's zero pattern (entries below zero_tol of the largest) to the end",
        _SETTLED,
        _EACH_OMEGA,
        ">= 1 omega0, so that the rate row tests something",
        {"zero_tol": 1e-2, "min_records": 5},
        _RATE_SIZES,
    ),
)
_KKT_SLOPE = Reading(
    f"fitted slope of log residual on log ln mu; {_RESIDUAL}",
    _SETTLED,
    "each omega0 where that window has >= min_records records (the hypothesis row); all of them must pass",
    "-1 +- tol at each, tol = 0.05 (ours: the lower-order terms of O(1/ln mu) over the fitted range of ln mu); "
    "both sides, as check_slope's default computes it, though the row's text says 'slope <= -0.95'",
    {"tol": 0.05, "zero_tol": 1e-2, "min_records": 5},
    _RATE_SIZES,
)
_KKT_READING = Reading(
    f"intercept a of the least-squares fit residual = a + b / ln mu: the residual's limit as mu -> infinity, "
    f"read along the O(1 / ln mu) form the proof gives; {_RESIDUAL}",
    _SETTLED,
    "each omega0 where that window has >= min_records records (the hypothesis row); all of them must pass",
    "|a| <= atol at each, atol = 0.05 (ours: 5% of the unit entries sign(beta_j) that the l1 subgradient must "
    "match; a multiplier estimate off by a constant factor c leaves a = |c - 1| on the support)",
    {"atol": 0.05, "zero_tol": 1e-2, "min_records": 5},
    _RATE_SIZES,
)
_OLD_KKT_V5 = (
    "approx. KKT: the stationarity residual of lambda = phi / ln mu -> 0 at least like 1 / ln mu (slope against "
    "ln mu, second half of the records with the l1 zero pattern) for every omega0 where the hypothesis holds"
)
_OLD_KKT_V1 = "approximate KKT (omega0={omega:g}): stationarity residual of lambda = phi / ln mu decreases"
_KKT_V1 = Reading(
    f"{_RESIDUAL}, at the last record against the first record where it is defined (mu > 1)",
    "the first and the last record with mu > 1",
    _EACH_OMEGA,
    "last < first (a decrease; the row's text said '-> 0 like 1/ln mu')",
    {"zero_tol": 1e-2},
    _RATE_SIZES,
)
_OLD_KKT_V3 = (
    "approx. KKT (omega0={omega:g}): stationarity residual of lambda = phi / ln mu -> 0 at least like 1 / ln mu "
    "(slope against ln mu, second half)"
)
_KKT_V3 = Reading(
    f"fitted slope of log residual on log ln mu; {_RESIDUAL}",
    "the second half of the records with mu > 1",
    _EACH_OMEGA,
    "slope <= -1 + 0.05 (ours: the lower-order terms of O(1/ln mu) over the fitted range of ln mu)",
    {"tol": 0.05, "zero_tol": 1e-2},
    _RATE_SIZES,
)
_OLD_KKT_V4 = (
    "approx. KKT (omega0={omega:g}): stationarity residual of lambda = phi / ln mu -> 0 at least like 1 / ln mu "
    "(slope against ln mu, second half of the records with the l1 zero pattern)"
)
_KKT_V4 = Reading(
    f"fitted slope of log residual on log ln mu; {_RESIDUAL}",
    _SETTLED,
    "each omega0 where that window has >= 5 records; the others get a note and no row",
    "slope <= -1 + 0.05 (ours: the lower-order terms of O(1/ln mu) over the fitted range of ln mu)",
    {"tol": 0.05, "zero_tol": 1e-2, "min_records": 5},
    _RATE_SIZES,
)
_KKT_V1_FULL = "pass at each omega0: 15.2 -> 4.36, 1.17 -> 0.352, 0.844 -> 0.168 (omega0 = 1e-3, 0.1, 1)"
KKT_RATE = Claim(
    "approx. KKT: the stationarity residual of lambda = phi / ln mu -> 0 (its fit a + b / ln mu over the second "
    "half of the records with the l1 zero pattern has a = 0) for every omega0 where the hypothesis holds",
    _THM41,
    f"{SOURCE} §7.5",
    K_HALVED.name,
    id="kkt-rate",
    reading=_KKT_READING,
    revisions=(
        Revision(
            _KKT_V1,
            "2026-11-22",
            _CI_BUDGET,
            "pass at each omega0: 68.0 -> 26.6, 1.39 -> 0.560, 0.845 -> 0.397 (omega0 = 1e-3, 0.1, 1; recomputed at "
            "the old sizes with the current code)",
            _KKT_V1_FULL,
            claim=_OLD_KKT_V1,
            sizes=_sizes(0.2, 1500, 50),
        ),
        Revision(
            _KKT_V1,
            "2026-11-25",
            "'decreases' says nothing about the limit the lemma needs (a residual that stalls at 0.4 decreases "
            "too): replaced by the 1 / ln mu rate the proof gives, in the checks review (b0fb727); the docs say the "
            "decrease had itself replaced a small-value check that failed before the first commit (not in git)",
            "pass at each omega0: 97.3 -> 41.5, 1.55 -> 0.687, 0.841 -> 0.396",
            _KKT_V1_FULL,
            claim=_OLD_KKT_V1,
            sizes=_sizes(0.3, 800, 40),
        ),
        Revision(
            _KKT_V3,
            "2026-11-25",
            "failed at full size for omega0 = 1 (slope -0.05): before the l1 zero pattern arrives the residual is a "
            "plateau of an entry's sign mismatch, not the multipliers; the window moved to the records that hold "
            "the pattern (9237f3b), re-read after this failure",
            "pass: slopes -1.0001, -0.9905, -3.11 (omega0 = 1e-3, 0.1, 1)",
            "fail: slopes -0.99998, -0.981, -0.052 (omega0 = 1: a plateau)",
            claim=_OLD_KKT_V3,
            sizes=_sizes(0.3, 800, 40),
        ),
        Revision(
            _KKT_V4,
            "2026-11-25",
            "an omega0 without the pattern left a note and no row, so the quick run (800 steps, the pattern at no "
            "omega0) tested nothing; in the falsifier audit (02eeba0) the hypothesis became its own property row, "
            "one rate row covers the omega0 where it holds, and the quick run went to 1600 steps",
            "vacuous: no row (the pattern at no omega0 after 800 steps; three notes)",
            "pass: omega0 = 1e-3 slope -0.99998 over 100 records; notes for 0.1 and 1 (pattern not reached)",
            claim=_OLD_KKT_V4,
            sizes=_sizes(0.3, 800, 40),
        ),
        Revision(
            _KKT_SLOPE,
            "2026-11-28",
            "no small wrong mechanism failed it at the quick size. With K's gradient halved the flow is the "
            "balanced flow of a rescaled product, so phi / ln mu tends to sqrt(2) times the KKT multipliers and the "
            "residual to sqrt(2) - 1 = 0.414, not 0; yet its slope over the quick window is -0.989 (passes), "
            "because there the residual is dominated by its b / ln mu term (b ~ 400 at ln mu ~ 10.5). The theorem's "
            "claim is the limit (the multipliers become a KKT certificate), so the new reading extrapolates the fit "
            "a + b / ln mu to a; the slope is kept beside it. The row also computed -1 +- 0.05 on both sides while "
            "its text said '<= -0.95'",
            "pass: omega0 = 1e-3 slope -1.000 over 10 records (and -0.989 with K's gradient halved)",
            "pass: omega0 = 1e-3 slope -0.99998 over 100 records",
            claim=_OLD_KKT_V5,
        ),
    ),
)


def _zero(beta: torch.Tensor) -> torch.Tensor:
    """Entries below ``zero_tol`` (the KKT reading's) of the largest: the zero pattern of ``beta`` (same shape)."""
    return beta.abs() <= KKT_RATE.param("zero_tol") * beta.abs().amax(dim=-1, keepdim=True)


def _support(beta: torch.Tensor) -> torch.Tensor:
    """The zero pattern as one integer per vector, shape ``beta.shape[:-1]``."""
    return (_zero(beta).long() * 2 ** torch.arange(beta.shape[-1])).sum(-1)


def _l1_subgradient_residual(beta_hat: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Distance of ``g`` to ``d||.||_1(beta_hat)`` (entries of the zero pattern count as zero), over the last axis."""
    on = (g - torch.sign(beta_hat)).abs()  # spec kq §4 KKT (b): entry = sign(beta_j) where beta_j != 0
    off = (g.abs() - 1).clamp(min=0)  # ... in [-1, 1] where beta_j = 0
    return torch.where(_zero(beta_hat), off, on).amax(dim=-1)


def _measure(data, flow, refs: dict[str, torch.Tensor], kkt: bool) -> dict[str, torch.Tensor]:
    """Per record and run: margin, norms of ``beta_hat``, distances to both SVMs; the KKT residual if ``kkt``."""
    args = (data.X, data.Z, flow.path["W"], data.select)
    mu, W_hat = attention_margin(*args), margin_normalized(*args)
    beta_hat = torch.diagonal(W_hat, dim1=-2, dim2=-1)  # (S, R, d)
    columns = {
        "mu": mu,
        "l1_norm": beta_hat.abs().sum(-1),
        "l2_norm": beta_hat.norm(dim=-1),
        "dist_l1": (beta_hat - refs["l1"]).abs().amax(-1),
        "dist_l2": (beta_hat - refs["l2"]).abs().amax(-1),
    }
    if kkt:
        lam = kkt_multipliers(flow.path["phi"], mu)  # spec kq §4: lambda = phi / ln mu, (S, R, n, T)
        g = torch.einsum("srnl,nld->srd", lam, constraint_vectors(data.X, data.Z, data.select))
        columns["kkt_residual"] = _l1_subgradient_residual(beta_hat, g)
        columns["support_identified"] = _support(beta_hat) == _support(refs["l1"])  # (S, R)
    return columns


def run_x2(config: X2Config, ctx: RunContext) -> ExperimentResult:
    """X2: NGD paths of diagonal K,Q (one run per omega_0, phi tracked) and of beta directly, against l1/l2 SVMs."""
    data = scores_equal(config.n, config.T, config.d, config.gap, seed=config.seed)
    refs = {"l1": attention_svm(data, norm="l1-diag").beta, "l2": diagonal_svm(data, p=2.0).beta}
    _, xi_k0, xi_q0 = diagonal_init(config.omegas, config.d)
    models = {
        "KQ": Diagonal(config.d, xi_k0=xi_k0, xi_q0=xi_q0),
        "beta": DiagonalW(torch.zeros(1, config.d, dtype=torch.float64)),
    }
    frames = []
    for name, model in models.items():
        flow = gradient_flow(
            model,
            data,
            step=config.step,
            steps=config.steps,
            record_every=config.record_every,
            track_phi=name == "KQ",
            progress=ctx.progress,
        )
        columns = _measure(data, flow, refs, kkt=name == "KQ")
        omegas = config.omegas if name == "KQ" else (math.nan,)
        frames.append(
            flow.frame.assign(
                param=name,
                omega=np.tile(omegas, len(flow.path["step"])),
                **{k: v.reshape(-1).numpy() for k, v in columns.items()},
            )
        )
    frame = pd.concat(frames, ignore_index=True)
    values = {"l1": float(refs["l1"].abs().sum()), "l2": float(refs["l2"].norm())}
    checks = _divergence_checks(frame) + _limit_checks(config, frame, values) + _kkt_checks(frame)
    fig = _x2_figure(config, frame, values["l1"], float(refs["l2"].abs().sum()))
    notes = [f"l1-SVM optimum {values['l1']:.6g} (beta {refs['l1'].tolist()}); l2-SVM optimum {values['l2']:.6g}"]
    return ExperimentResult(frame=frame, checks=checks, figures={"l1_vs_l2": fig}, notes=notes)


def _divergence_checks(frame: pd.DataFrame) -> list[Check]:
    """Lemma 4.2 for each omega_0: the exponent of ``||beta||`` against ``ln t`` over the second half of the path."""
    checks = []
    for omega, rows in frame[frame["param"] == "KQ"].sort_values("step").groupby("omega"):
        late = rows.iloc[len(rows) // 2 :]  # spec §7.1: ||beta(t)|| ~ ln t; the norm column is ||W||_F = ||beta||_2
        checks.append(DIVERGES.format(omega=omega).slope(late["log_time"], late["norm"], 1.0, side="at_least"))
    return checks


def _limit_checks(config: X2Config, frame: pd.DataFrame, values: dict[str, float]) -> list[Check]:
    """Theorem 4.1 for each omega_0 and the l2 contrast for beta directly, at the last step."""
    end = frame[frame["step"] == frame["step"].max()]
    checks = []
    for _, row in end[end["param"] == "KQ"].iterrows():
        checks.append(L1_OPTIMUM.format(omega=row["omega"]).close(values["l1"], float(row["l1_norm"]), config.l1_rtol))
        checks.append(
            CLOSER_L1.format(omega=row["omega"]).ordering(
                {"to l1": float(row["dist_l1"]), "to l2": float(row["dist_l2"])}, ("to l1", "to l2")
            )
        )
    row = end[end["param"] == "beta"].iloc[0]
    checks.append(L2_OPTIMUM.close(values["l2"], float(row["l2_norm"]), config.l2_rtol))
    checks.append(
        CLOSER_L2.ordering({"to l2": float(row["dist_l2"]), "to l1": float(row["dist_l1"])}, ("to l2", "to l1"))
    )
    return checks


def _kkt_checks(frame: pd.DataFrame) -> list[Check]:
    """The rate's hypothesis (share of omega_0 where it holds), the residual's limit wherever it holds, and the slope
    reading it replaced (revision 5) beside it."""
    kq = frame[(frame["param"] == "KQ") & frame["kkt_residual"].notna() & (frame["mu"] > 1)].sort_values("step")
    windows = {}
    for omega, rows in kq.groupby("omega"):
        # spec §7.5: residual = O(1 / ln mu) once the direction's zero pattern is the l1 solution's; before that the
        # residual measures a sign mismatch of an entry still above zero_tol (a plateau), not the multipliers
        identified = rows["support_identified"].astype(float).to_numpy() > 0.5
        settled = rows[np.minimum.accumulate(identified[::-1])[::-1]]  # the last records, from the pattern's arrival
        late = settled.iloc[len(settled) // 2 :]
        if len(late) >= KKT_RATE.param("min_records"):
            windows[f"{omega:g}"] = (np.log(late["mu"].to_numpy()), late["kkt_residual"].to_numpy())
    share = f"{len(windows)} of {kq['omega'].nunique()} omega0 ({', '.join(windows) or 'none'})"
    checks = [PATTERN.holds(">= 1 omega0", share, PATTERN.reading.tolerance, bool(windows))]
    atol = KKT_RATE.param("atol")
    limits = {k: residual_limit(*w) for k, w in windows.items()}  # spec §7.5: residual = a + b / ln mu, a -> 0
    margins = [atol - abs(a) for a, _ in limits.values()]
    checks.append(
        KKT_RATE.holds(
            f"|a| <= {atol:g} at each of {share}",
            "; ".join(
                f"omega0={k}: a = {a:.3g} (b = {b:.3g}, {len(windows[k][0])} records)" for k, (a, b) in limits.items()
            )
            or "untestable: the hypothesis holds at no omega0",
            KKT_RATE.reading.tolerance,
            bool(limits) and min(margins) >= 0,
            margin=min(margins) if margins else None,
            support=len(windows),
        )
    )
    return checks + [_kkt_slope_row(KKT_RATE.revised(5), windows, share)]


def residual_limit(log_mu: np.ndarray, residual: np.ndarray) -> tuple[float, float]:
    """Least-squares fit ``residual = a + b / ln mu``: the residual's limit ``a`` and its ``1 / ln mu`` coefficient.

    Spec: kq-nuclear-norm §7.5 (the approximate-KKT residual of ``lambda = phi / ln mu`` is ``O(1 / ln mu)``).

    Parameters
    ----------
    log_mu : numpy.ndarray, shape (N,)
        ``ln mu`` at the records (all > 0), at least two distinct values.
    residual : numpy.ndarray, shape (N,)

    Returns
    -------
    a, b : float
        Intercept (the limit as ``mu -> infinity``) and slope in ``1 / ln mu``.
    """
    b, a = np.polyfit(1.0 / np.asarray(log_mu, dtype=float), np.asarray(residual, dtype=float), 1)
    return float(a), float(b)


def _kkt_slope_row(claim: Claim, windows: dict[str, tuple[np.ndarray, np.ndarray]], share: str) -> Check:
    """The replaced reading: the log-log slope of the residual against ln mu, -1 +- tol (both sides) at each omega0."""
    slopes = {k: claim.slope(log_mu, residual, -1.0) for k, (log_mu, residual) in windows.items()}
    tol = claim.param("tol")
    fits = {k: c.tolerance.split(";")[0] for k, c in slopes.items()}  # "log-log fit over n points, R^2 r"
    margins = [c.margin for c in slopes.values()]
    return claim.holds(
        f"slope <= {-1 + tol:g} at each of {share}",
        "; ".join(f"omega0={k}: slope {c.measured:.4g} ({fits[k]})" for k, c in slopes.items())
        or "untestable: the hypothesis holds at no omega0",
        f"{tol:g} (ours): the lower-order terms of O(1/ln mu) over the fitted range of ln mu",
        bool(slopes) and all(c.passed for c in slopes.values()),
        margin=min(margins) if margins and None not in margins else None,
        support=len(windows),
    )


@house_figure
def _x2_figure(config: X2Config, frame: pd.DataFrame, l1_value: float, beta_l2_l1_norm: float):
    fig, axes = new_figure(3, width=3.8)
    for (name, omega), rows in frame.groupby(["param", "omega"], dropna=False):
        rows = rows[rows["mu"] > 1].sort_values("step")
        label = r"$\beta$ directly" if name == "beta" else f"$K,Q$, $\\omega_0={omega:g}$"
        axes[0].plot(np.log(rows["mu"]), rows["l1_norm"], label=label)
        axes[1].plot(np.log(rows["mu"]), rows["dist_l1"] if name == "KQ" else rows["dist_l2"], label=label)
        if name == "KQ":
            axes[2].plot(np.log(rows["mu"]), rows["kkt_residual"], label=label)
    theory_hline(axes[0], l1_value, r"$\ell_1$-SVM optimum")
    theory_hline(axes[0], beta_l2_l1_norm, r"$\|\beta_{\ell_2}\|_1$ (margin 1)", color="0.5", ls=":")
    axes[0].set_ylabel(r"$\|\hat\beta\|_1$")
    log_gap_axis(axes[1], "max-entry distance to own SVM")
    axes[1].set_title(r"$K,Q$: to the $\ell_1$-SVM; $\beta$: to the $\ell_2$-SVM")
    log_gap_axis(axes[2], "KKT stationarity residual")
    for ax in axes:
        ax.set_xlabel(r"$\ln \mu(t)$")
        ax.legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="kq-nuclear.x2",
        cost=77.0,
        config_type=X2Config,
        run=run_x2,
        quick={"step": 0.3, "steps": 1600, "record_every": 40, "l1_rtol": 0.05, "l2_rtol": 0.002},
        claims=(DIVERGES, L1_OPTIMUM, CLOSER_L1, L2_OPTIMUM, CLOSER_L2, PATTERN, KKT_RATE),
        falsifiers=FALSIFIERS,
    )
)
