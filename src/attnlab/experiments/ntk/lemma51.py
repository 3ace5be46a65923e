"""Lemma 5.1 against the weight radius R and the width m, for ``ntk.lazy``; the kernels of the moved networks are
:func:`attnlab.ntk.perturbed_kernels`.

Spec: docs/theory/softmax-ntk-diffusion.md §4.3: if every ``||w_r - w_r(0)|| <= R`` then
``||H(W) - H*||_F <= R n d e^{O(B)}``, a bound linear in ``R`` and free of ``m``. Build, measure, declared check.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from attnlab.experiments.ntk._falsifiers import output_scale
from attnlab.experiments.ntk._shared import SOURCE, log_factor_allowance
from attnlab.verify import Check, Claim, Falsifier, Reading, Revision, fit_slope

__all__ = ["GRAM_UNNORMALISED", "OUTPUT_SCALE_M_SQUARED", "PERTURBATION", "perturbation_check"]

_PERTURBATION_READING = Reading(
    statistic="largest excess over its allowance among the log-log slopes of ||H(W) - H*||_F / (R n d): in m "
    "at each R, and in R at each m",
    window="one move per (m, R): every neuron of W(0) moved by exactly R along sign(<w_r, u>) u, u the mean "
    "input's direction; no training",
    subset="the training widths x the radii, one initialization (seed + 1) of one data set (seed)",
    tolerance="<= 0; allowances: in m, the change a log^log_power m factor makes over the widths; in R, the slope "
    "of e^{B_power B_R} over the radii, B_R = max |w_r(0)^T x_i| + R max ||x_i||: Definition 4.1's bound over the "
    "ball ||w_r - w_r(0)|| <= R the lemma covers (H sums products of two m S_{i,r} <= e^{2B})",
    params={"log_power": 2.0, "B_power": 4.0, "bound": 0.0},
    sizes=("n", "d_in", "d_out", "widths", "sigma_w", "radii", "seed"),
)
PERTURBATION = Claim(
    "Lemma 5.1: ||H(W) - H*||_F <= R n d e^{O(B)} whenever every ||w_r - w_r(0)|| <= R: "
    "||H(W) - H*||_F / (R n d) grows with neither m nor R beyond the e^{O(B)} and log factors",
    "004:Lem5.1",
    f"{SOURCE} §4.3 Lemma 5.1",
    falsifier=("gram-unnormalised", "output-scale-m-squared"),
    id="lem51-perturbation",
    reading=_PERTURBATION_READING,
    revisions=(
        Revision(
            dataclasses.replace(
                _PERTURBATION_READING,
                tolerance="<= 0; allowances: in m, the change a log^log_power m factor makes over the widths; in R, "
                "the slope of e^{B_power B} over the radii (H sums products of two m S_{i,r} <= e^{2B}, B measured at "
                "the moved weights)",
            ),
            "2026-11-29",
            "B measured at the moved weights can fall as R grows (the move does not raise every |w_r^T x_i|), and "
            "then the allowance in R was negative: the row failed at seeds 1, 3 and 5 (full; excess 1.7e-4, 8.1e-3, "
            "0.0185) on slopes in R of -0.0003 against -0.0004 (m = 1000), -0.0009 against -0.0089 (m = 1000) and "
            "+0.002 against -0.016 (m = 16000), while every slope in m was negative (-0.14 to -0.01 against 0.27). "
            "The lemma's e^{O(B)} is Definition 4.1's bound over the whole ball ||w_r - w_r(0)|| <= R, which cannot "
            "fall as the ball grows: max |w_r(0)^T x_i| + R max ||x_i|| (the table's B_ball)",
            "pass at seeds 0, 2, 4 and 6-8; fail at 1, 3 (excess 1.7e-4, 8.1e-3) and 5 (3.2e-3)",
            "pass at seed 0; fail at seeds 1, 3 and 5 (1.7e-4, 8.1e-3, 0.0185)",
        ),
    ),
)
OUTPUT_SCALE_M_SQUARED = Falsifier(
    "output-scale-m-squared",
    "the perturbed networks' output scale m counted twice: F = m^2 a softmax(W^T x)",
    "attnlab.ntk.perturbation:SoftmaxMLP",
    output_scale(2.0),
    kind="mechanism",
)
GRAM_UNNORMALISED = Falsifier(
    "gram-unnormalised",
    "the Gram matrix without its 1/m: H = J J^T",
    "attnlab.ntk.perturbation:gram",
    lambda gram: lambda net, X: net.kernel_scale * gram(net, X),
    kind="reference",
)


def perturbation_check(perturbed: pd.DataFrame) -> list:
    """Lemma 5.1: ``||H(W) - H*||_F / (R n d)`` is bounded by ``e^{O(B)}``, free of ``m`` and of ``R``.

    Its log-log slope in ``m`` (at each R) may not exceed the change a ``log^2 m`` factor can make over the widths,
    nor its slope in ``R`` (at each m) the change of ``e^{4B}`` over the radii (``H`` sums products of two
    ``m S_{i,r} <= e^{2B}``, Definition 4.1), with ``B`` the bound over the ball of radius R (``B_ball``). The row
    reports the largest excess over those allowances; the reading it replaced (``B`` at the moved weights) is
    computed beside it.
    """
    return [
        _perturbation_row(PERTURBATION, perturbed, "B_ball"),
        _perturbation_row(PERTURBATION.revised(1), perturbed, "B"),
    ]


def _perturbation_row(claim: Claim, perturbed: pd.DataFrame, bound_column: str) -> Check:
    """The largest excess of the slopes in m and in R over their allowances, the one in R from ``bound_column``."""
    in_m = log_factor_allowance(sorted(perturbed["width"].unique().tolist()), claim.param("log_power"))
    excess = [fit_slope(part["width"], part["per_radius"])[0] - in_m for _, part in perturbed.groupby("radius")]
    for _, part in perturbed.groupby("width"):
        part = part.sort_values("radius")
        decades = math.log(part["radius"].iloc[-1] / part["radius"].iloc[0])
        B = part[bound_column]
        in_R = claim.param("B_power") * (B.iloc[-1] - B.iloc[0]) / decades  # e^{4B} in log R
        excess.append(fit_slope(part["radius"], part["per_radius"])[0] - in_R)
    worst, bound = max(excess), claim.param("bound")
    which = "B over the ball of radius R" if bound_column == "B_ball" else "B at the moved weights"
    return claim.holds(
        "largest excess <= 0",
        worst,
        f"{len(excess)} log-log slopes: in m at each R, allowed {in_m:.3g} (a log^2 m factor over the widths); in R "
        f"at each m, allowed the slope of e^{{4B}} over the radii ({which}; H sums products of two m S_{{i,r}} <= "
        "e^{2B})",
        math.isfinite(worst) and worst <= bound,
        margin=bound - worst,
    )
