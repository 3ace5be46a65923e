"""The check helpers of attnlab.verify: each passes and fails where its rule says, and writes its tolerance
text from the numbers it tested; observations must name the paper's figure, table or remark."""

import ast
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.verify import (
    CHECK_COLUMNS,
    Check,
    check_close,
    check_greater,
    check_less,
    check_ordering,
    check_slope,
    count_checks,
    fit_slope,
    fit_weighted_slope,
    observation,
    spread_observation,
    spread_tolerance,
)

SRC = Path(__file__).resolve().parents[2] / "src" / "attnlab"


def test_check_close_passes_inside_and_fails_outside_its_tolerance():
    assert check_close("c", 2.0, 2.09, rtol=0.05).passed  # |0.09| <= 0.05 * 2
    assert not check_close("c", 2.0, 2.11, rtol=0.05).passed
    assert check_close("c", 0.0, 1e-3, atol=1e-3).passed and not check_close("c", 0.0, 2e-3, atol=1e-3).passed
    assert not check_close("c", 1.0, math.nan, rtol=1.0).passed  # NaN never passes
    row = check_close("c", 1.0, 1.0, rtol=0.1, atol=0.01, spread="3 SE over 5 seeds")
    assert row.tolerance == "abs 0.01 + rel 0.1; 3 SE over 5 seeds" and row.kind == "theory"
    with pytest.raises(ValidationError, match="rtol"):
        check_close("c", 1.0, 1.0)


def test_bounds_respect_strictness_and_name_their_bound():
    assert check_less("c", 1.0, 1.0).passed and not check_less("c", 1.0, 1.0, strict=True).passed
    assert check_greater("c", 1.0, 1.0).passed and not check_greater("c", 1.0, 1.0, strict=True).passed
    assert not check_less("c", math.nan, 1.0).passed and not check_greater("c", math.nan, 1.0).passed
    assert (
        check_less("c", 0.5, 1.0).predicted == "<= 1" and check_greater("c", 2.0, 1.0, strict=True).predicted == "> 1"
    )
    assert check_less("c", 0.5, 1.0, spread="m 2^-52").tolerance == "bound; m 2^-52"


def test_ordering_needs_every_step_to_exceed_the_margin():
    values = {"K": 0.1, "K/2": 0.2, "K/4": 0.25}
    assert check_ordering("c", values, ["K", "K/2", "K/4"]).passed
    assert not check_ordering("c", values, ["K", "K/2", "K/4"], margin=0.06).passed  # 0.25 - 0.2 = 0.05
    assert not check_ordering("c", values, ["K/2", "K"]).passed
    assert check_ordering("c", values, ["K", "K/4"]).predicted == "K < K/4"
    with pytest.raises(ValidationError, match="missing"):
        check_ordering("c", values, ["K", "nope"])


def test_slope_is_the_least_squares_slope_of_the_logs():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    y = 3.0 * x**-1.5 * np.array([1.0, 1.1, 0.9, 1.05])  # noisy power law
    expected = np.polyfit(np.log(x), np.log(y), 1)[0]  # numpy's fit as the second method
    slope, r2 = fit_slope(x, y)
    assert slope == pytest.approx(expected, rel=1e-12) and 0.9 < r2 <= 1.0  # a clean power law: R^2 near 1
    assert check_slope("c", x, y, -1.5, 0.1).passed
    assert not check_slope("c", x, y, -1.0, 0.1).passed
    assert (
        check_slope("c", x, y, -1.0, 0.0, side="at_most").passed
        and not check_slope("c", x, y, -2.0, 0.0, side="at_most").passed
    )
    assert check_slope("c", x, y, -2.0, 0.0, side="at_least").passed
    assert math.isnan(fit_slope([1.0], [1.0])[0]) and not check_slope("c", [1.0], [1.0], 0.0, 1.0).passed
    assert fit_slope(x, 2 * x + 1, logx=False, logy=False)[0] == pytest.approx(2.0, rel=1e-12)


def test_weighted_slope_is_exact_on_a_power_law_and_carries_the_spread():
    ns = [10.0, 100.0, 1000.0]
    slope, se = fit_weighted_slope(ns, [2 * n**-1.5 for n in ns], [0.1 * 2 * n**-1.5 for n in ns])
    assert slope == pytest.approx(-1.5, rel=1e-12)
    # relative SEs of 0.1 on three points one decade apart: SE^2 = 0.01 / sum (log x - mean)^2 = 0.01 / (2 ln(10)^2)
    assert se == pytest.approx(0.1 / (np.sqrt(2) * np.log(10)), rel=1e-12)
    assert np.isnan(fit_weighted_slope(ns, [1.0, -1.0, 1.0], [0.1] * 3)[0])  # a sign change has no slope


def test_weighted_slope_matches_numpys_weighted_fit():
    x = np.array([1.0, 2.0, 3.0, 5.0])
    y = np.array([0.5, 2.1, 2.9, 5.4])
    se = np.array([0.1, 0.4, 0.2, 0.3])
    expected = np.polyfit(x, y, 1, w=1 / se)[0]  # numpy weighs residuals by w, i.e. squares by 1 / se^2
    assert fit_weighted_slope(x, y, se, logx=False, logy=False)[0] == pytest.approx(expected, rel=1e-12)
    expected_log = np.polyfit(np.log(x), np.log(y), 1, w=y / se)[0]  # delta method: SE of log y is se / y
    assert fit_weighted_slope(x, y, se)[0] == pytest.approx(expected_log, rel=1e-12)


def test_spread_tolerance_is_k_standard_errors():
    samples = [1.0, 2.0, 3.0, 4.0]
    tol, text = spread_tolerance(samples, k=3.0)
    assert tol == pytest.approx(3 * np.std(samples, ddof=1) / 2, rel=1e-12)  # SE = std / sqrt(4)
    assert "3 standard errors over 4 seeds" in text
    with pytest.raises(ValidationError, match="more seeds"):
        spread_tolerance([1.0])


def test_an_observation_must_name_the_papers_figure_table_or_remark():
    row = observation("fig. 3: Polyak is fastest", "fastest", 1.0, True, "docs/theory/implicit-bias-ngd.md §9")
    assert row.kind == "observation" and row.passed
    assert observation("Polyak is fastest", "fastest", 0.2, False, "§9 (the paper's remark)").kind == "observation"
    with pytest.raises(ValidationError, match="names no figure, table or remark"):
        observation("softmax exponent within 1 of ReLU's", "<= 1", 3.3, False, "docs/theory/x.md §5")


def test_a_spread_observation_is_inconclusive_inside_its_measured_spread():
    # real.text's first-token attention against uniform 0.2: 0.200072 and 0.199879 were a verdict each, by noise
    seeds = [0.200072, 0.199879]
    se = np.std(seeds, ddof=1) / np.sqrt(2)  # the tolerance is 3 standard errors of the mean, computed here apart
    row = spread_observation("remark: above uniform", seeds, 0.2, "fig. 1")
    assert row.verdict == "inconclusive" and not row.passed and row.inconclusive
    assert row.tolerance.startswith(f"+- {3 * se:.3g}; 3 standard errors over 2 seeds")
    e = 0.001  # two samples mean +- e have a standard error of e: the tolerance is 3e
    assert spread_observation("remark", [0.2 + 2.9 * e - e, 0.2 + 2.9 * e + e], 0.2, "fig. 1").inconclusive
    assert spread_observation("remark", [0.2 + 3.1 * e - e, 0.2 + 3.1 * e + e], 0.2, "fig. 1").verdict == "agrees"
    assert spread_observation("remark", [0.3, 0.32], 0.2, "fig. 1").verdict == "agrees"  # 0.31 - 0.2 > 3 * 0.01
    assert spread_observation("remark", [0.3, 0.32], 0.2, "fig. 1", above=False).verdict == "disagrees"
    assert spread_observation("remark", [0.1, 0.12], 0.2, "fig. 1", above=False).verdict == "agrees"
    one = spread_observation("remark", [0.9], 0.2, "fig. 1")  # one seed measures no spread: nothing decided
    assert one.verdict == "inconclusive" and "run >= 2" in one.tolerance


def test_checks_csv_keeps_passed_a_bool_and_adds_the_verdict():
    rows = [
        Check("t", 1, 1, "abs 0", True),
        Check("t", 1, 2, "abs 0", False),
        observation("fig. 1: a", "a", 1, True, "s"),
        observation("fig. 1: b", "b", 1, False, "s"),
        spread_observation("fig. 1: c", [0.2, 0.2001], 0.2, "s"),
    ]
    table = pd.DataFrame([r.as_row() for r in rows], columns=CHECK_COLUMNS)
    assert table["verdict"].tolist() == ["pass", "fail", "agrees", "disagrees", "inconclusive"]
    assert table["passed"].tolist() == [True, False, True, False, False]
    counts = count_checks(table)
    assert (counts.passed, counts.total, counts.agree, counts.observations) == (1, 2, 1, 3)


def test_only_an_observation_that_did_not_pass_can_be_inconclusive():
    with pytest.raises(ValidationError, match="only an observation that did not pass can be inconclusive"):
        Check("t", 1, 1, "abs 0", False, inconclusive=True)
    with pytest.raises(ValidationError, match="only an observation that did not pass can be inconclusive"):
        Check("fig. 1", 1, 1, "", True, kind="observation", inconclusive=True)


def test_every_observation_in_the_experiments_goes_through_the_helper():
    """An observation built as ``Check(..., kind="observation")`` would skip the figure-or-remark rule."""
    offenders = []
    for path in (SRC / "experiments").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Check":
                kinds = [k for k in node.keywords if k.arg == "kind" and getattr(k.value, "value", "") == "observation"]
                if kinds or len(node.args) >= 7:
                    offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders, offenders


@pytest.mark.parametrize(("successes", "trials"), [(0, 5), (4, 7), (7, 7), (27, 32), (56, 81), (19, 32)])
def test_share_lower_bound_is_the_exact_binomial_bound(successes, trials):
    """Independent truth: at the bound p, P(Binomial(trials, p) >= successes) is 1 - confidence (binomial tail)."""
    from scipy.stats import binom

    from attnlab.verify import share_lower_bound

    bound, text = share_lower_bound(successes, trials, 0.95)
    if successes == 0:
        assert bound == 0.0
    else:
        assert binom.sf(successes - 1, trials, bound) == pytest.approx(0.05, abs=1e-9)
        assert binom.sf(successes - 1, trials, bound + 1e-6) > 0.05  # the largest such p: above it, more likely
    assert bound <= successes / trials and f"{successes}/{trials} runs" in text


def test_share_lower_bound_separates_a_chance_majority_from_a_true_one():
    """A share of 4/7 passes "> 1/2" as a raw share, never as a 95% bound; 7/7 is the fewest runs that can pass."""
    from attnlab.verify import share_lower_bound

    assert share_lower_bound(4, 7)[0] < 0.5 and share_lower_bound(7, 7)[0] > 0.5
    assert share_lower_bound(4, 4)[0] < 0.5  # 0.05 ** (1/4) = 0.47: four runs can never show a majority


@pytest.mark.parametrize(
    ("successes", "trials", "confidence"), [(1.5, 3, 0.95), (4, 3, 0.95), (0, 0, 0.95), (1, 3, 1.0)]
)
def test_share_lower_bound_refuses_bad_counts(successes, trials, confidence):
    from attnlab.verify import share_lower_bound

    with pytest.raises(ValidationError):
        share_lower_bound(successes, trials, confidence)
