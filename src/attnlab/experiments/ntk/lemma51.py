"""Lemma 5.1 against the weight radius R and the width m, for ``ntk.lazy``; the kernels of the moved networks are
:func:`attnlab.ntk.perturbed_kernels`.

Spec: docs/theory/softmax-ntk-diffusion.md §4.3: if every ``||w_r - w_r(0)|| <= R`` then
``||H(W) - H*||_F <= R n d e^{O(B)}``, a bound linear in ``R`` and free of ``m``. Build, measure, declared check.
"""

from __future__ import annotations

import math

import pandas as pd

from attnlab.experiments.ntk._falsifiers import output_scale
from attnlab.experiments.ntk._shared import SOURCE, log_factor_allowance
from attnlab.verify import Claim, Falsifier, Reading, fit_slope

__all__ = ["GRAM_UNNORMALISED", "OUTPUT_SCALE_M_SQUARED", "PERTURBATION", "perturbation_check"]

PERTURBATION = Claim(
    "Lemma 5.1: ||H(W) - H*||_F <= R n d e^{O(B)} whenever every ||w_r - w_r(0)|| <= R: "
    "||H(W) - H*||_F / (R n d) grows with neither m nor R beyond the e^{O(B)} and log factors",
    "004:Lem5.1",
    f"{SOURCE} §4.3 Lemma 5.1",
    falsifier=("gram-unnormalised", "output-scale-m-squared"),
    id="lem51-perturbation",
    reading=Reading(
        statistic="largest excess over its allowance among the log-log slopes of ||H(W) - H*||_F / (R n d): in m "
        "at each R, and in R at each m",
        window="one move per (m, R): every neuron of W(0) moved by exactly R along sign(<w_r, u>) u, u the mean "
        "input's direction; no training",
        subset="the training widths x the radii, one initialization (seed + 1) of one data set (seed)",
        tolerance="<= 0; allowances: in m, the change a log^log_power m factor makes over the widths; in R, the "
        "slope of e^{B_power B} over the radii (H sums products of two m S_{i,r} <= e^{2B}, B measured at the "
        "moved weights)",
        params={"log_power": 2.0, "B_power": 4.0, "bound": 0.0},
        sizes=("n", "d_in", "d_out", "widths", "sigma_w", "radii", "seed"),
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


def perturbation_check(perturbed: pd.DataFrame):
    """Lemma 5.1: ``||H(W) - H*||_F / (R n d)`` is bounded by ``e^{O(B)}``, free of ``m`` and of ``R``.

    Its log-log slope in ``m`` (at each R) may not exceed the change a ``log^2 m`` factor can make over the widths,
    nor its slope in ``R`` (at each m) the change of ``e^{4B}`` over the radii (``H`` sums products of two
    ``m S_{i,r} <= e^{2B}``, Definition 4.1; ``B`` measured at the moved weights). The row reports the largest
    excess over those allowances.
    """
    in_m = log_factor_allowance(sorted(perturbed["width"].unique().tolist()), PERTURBATION.param("log_power"))
    excess = [fit_slope(part["width"], part["per_radius"])[0] - in_m for _, part in perturbed.groupby("radius")]
    for _, part in perturbed.groupby("width"):
        part = part.sort_values("radius")
        decades = math.log(part["radius"].iloc[-1] / part["radius"].iloc[0])
        in_R = PERTURBATION.param("B_power") * (part["B"].iloc[-1] - part["B"].iloc[0]) / decades  # e^{4B} in log R
        excess.append(fit_slope(part["radius"], part["per_radius"])[0] - in_R)
    worst, bound = max(excess), PERTURBATION.param("bound")
    return PERTURBATION.holds(
        "largest excess <= 0",
        worst,
        f"{len(excess)} log-log slopes: in m at each R, allowed {in_m:.3g} (a log^2 m factor over the widths); in R "
        "at each m, allowed the slope of e^{4B} over the radii (H sums products of two m S_{i,r} <= e^{2B})",
        math.isfinite(worst) and worst <= bound,
        margin=bound - worst,
    )
