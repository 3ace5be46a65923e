"""Assumption predicates against brute-force / closed-form truths, on passing and failing data."""

import dataclasses
import itertools
import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import (
    AssumptionReport,
    TokenSelectionData,
    aligned_pairs,
    assumption4_geometry,
    check_assumptions,
    condition1,
    dm,
    equal_nonopt_scores,
    example1,
    joint_toy,
    near_orthogonal,
    scores_equal,
    small_init,
    small_initial_loss,
    unique_optimal_token,
)


@pytest.fixture
def random_data():
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(3, 4, 5, generator=gen, dtype=torch.float64)
    Z = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    v = torch.randn(5, generator=gen, dtype=torch.float64)
    return TokenSelectionData(X, Z=Z, y=[1, -1, 1], v=v)


def test_report_is_frozen_and_readable():
    report = AssumptionReport("A2 equal non-optimal scores", True, 0.0, 1e-9, "spread")
    assert str(report).startswith("[holds] A2 equal non-optimal scores: measured 0, threshold 1e-09")
    assert "[FAILS]" in str(dataclasses.replace(report, holds=False))
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.holds = False  # type: ignore[misc]


def test_unique_opt_measures_the_top_two_gap(random_data):
    scores = random_data.token_scores()
    top = scores.sort(dim=1, descending=True).values
    report = unique_optimal_token(random_data)
    assert report.measured == pytest.approx(float((top[:, 0] - top[:, 1]).min()), abs=1e-15)
    assert report.holds


def test_unique_opt_fails_on_a_tie():
    X = torch.tensor([[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])  # tokens 0 and 1 score 1 on v = e_1
    report = unique_optimal_token(TokenSelectionData(X, y=[1], v=[1.0, 0.0]))
    assert not report.holds and report.measured == 0.0


def test_kappa_matches_a_brute_force_loop(random_data):
    tokens = [random_data.X[i, t] for i in range(3) for t in range(4)]
    min_sq = min(float(x @ x) for x in tokens)
    kappa = max(abs(float(a @ b)) for a, b in itertools.combinations(tokens, 2)) / min_sq
    report = near_orthogonal(random_data, C=2.0)
    assert report.measured == pytest.approx(kappa * 12, rel=1e-14)  # same sums, rounding only
    assert report.threshold == 0.5 and report.holds == (kappa * 12 <= 0.5)


def test_a1_holds_on_orthogonal_tokens_and_kappa_prime_ignores_opt_pairs():
    e = torch.eye(6, dtype=torch.float64)
    X = torch.stack([torch.stack([e[0], e[1], e[2]]), torch.stack([-e[0], e[3], e[4]])])  # opt tokens antipodal
    data = TokenSelectionData(X, y=[1, -1], v=e[0])
    assert near_orthogonal(data).measured == pytest.approx(6.0)  # kappa = |<e0, -e0>| / 1, times n T = 6
    assert not near_orthogonal(data).holds
    prime = near_orthogonal(data, exclude_opt_pairs=True)
    assert prime.holds and prime.measured == 0.0


def test_a1_fails_at_example1_defaults_as_the_spec_warns():
    report = near_orthogonal(example1())
    assert not report.holds and 5 < report.measured < 100  # spec §7: kappa n T ~ 27 at these sizes


def test_a2_spread_matches_brute_force_and_isotropic_noise_breaks_it():
    data = example1(n=4, T=5, d=16, seed=0)
    assert equal_nonopt_scores(data).holds
    noisy = data.with_(
        X=data.X + 0.1 * torch.randn(4, 5, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    )
    scores = noisy.token_scores()
    spread = max(
        max(s for t, s in enumerate(row) if t != opt) - min(s for t, s in enumerate(row) if t != opt)
        for row, opt in zip(scores.tolist(), scores.argmax(dim=1).tolist())
    )
    report = equal_nonopt_scores(noisy)
    assert not report.holds and report.measured == pytest.approx(spread, abs=1e-15)


def _plain_loss(data, W):
    """L(W) = (1/n) sum_i exp(-gamma_i^T softmax(X_i W z_i)), written as a loop with math.exp (kq-nuclear-norm §2)."""
    total = 0.0
    for i in range(data.n):
        logits = [float(data.X[i, t] @ W @ data.Z[i]) for t in range(data.T)]
        weights = [math.exp(s) for s in logits]
        f = sum(w * g for w, g in zip(weights, data.token_scores()[i].tolist())) / sum(weights)
        total += math.exp(-f)
    return total / data.n


def test_a3_loss_and_bound_match_a_plain_loop(random_data):
    W0 = 0.3 * torch.randn(5, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    report = small_initial_loss(random_data, W0)
    assert report.measured == pytest.approx(_plain_loss(random_data, W0), rel=1e-12)  # log domain vs direct
    scores = random_data.token_scores().sort(dim=1, descending=True).values.tolist()
    bound = min(
        (math.exp(-scores[j][1]) + sum(math.exp(-scores[i][0]) for i in range(3) if i != j)) / 3 for j in range(3)
    )
    assert report.threshold == pytest.approx(bound, rel=1e-12)
    assert report.holds == (report.measured <= report.threshold)


@pytest.mark.parametrize("gap", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_a3_at_zero_init_reduces_to_the_closed_form(gap):
    n, T = 4, 3
    data = scores_equal(n=n, T=T, d=8, gap=gap, seed=0)
    closed_form = n * math.exp(-gap / T) <= 1 + (n - 1) * math.exp(-gap)  # spec §5 [D]
    assert small_initial_loss(data).holds == closed_form


def test_small_init_measures_the_largest_logit(random_data):
    W0 = torch.randn(5, 5, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    brute = max(abs(float(random_data.X[i, t] @ W0 @ random_data.Z[i])) for i in range(3) for t in range(4))
    assert small_init(random_data, W0).measured == pytest.approx(brute, rel=1e-14)
    assert not small_init(random_data, W0).holds
    assert small_init(random_data, 1e-4 * W0).holds


def test_a4_holds_on_aligned_pairs_even_with_shuffled_tokens():
    data = aligned_pairs(n=3, m_pairs=3, d=9, c=0.2, seed=1).data
    order = torch.tensor([0, 5, 2, 6, 1, 4, 3])  # pairs no longer adjacent; the greedy matching must find them
    assert assumption4_geometry(data.with_(X=data.X[:, order])).holds


def test_a4_fails_when_perturbed_or_even():
    data = aligned_pairs(seed=0).data
    X = data.X.clone()
    X[0, 2] += 1e-3 * torch.randn(8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    broken = assumption4_geometry(data.with_(X=X))
    assert not broken.holds and 1e-5 < broken.measured < 1e-2  # the pairing residual sees the perturbation
    even = assumption4_geometry(data.with_(X=data.X[:, :4]))
    assert not even.holds and "even" in even.detail


def test_a4_fails_on_non_orthogonal_queries():
    data = aligned_pairs(seed=0).data
    Z = data.Z.clone()
    Z[1] = Z[0] + Z[1]
    report = assumption4_geometry(data.with_(Z=Z))
    # z_1 now at 45 degrees to z_0 (unit, orthogonal before): (i) cos = 1/sqrt(2) dominates (ii) 1 - 1/sqrt(2)
    assert not report.holds and report.measured == pytest.approx(1 / math.sqrt(2), rel=1e-12)


def test_condition1_ratio_and_its_failures():
    data = dm(n=6, d=40, seed=0)
    sq = (data.X**2).sum(dim=2)
    report = condition1(data)
    assert report.measured == pytest.approx(float(sq[:, 0].min() / sq[:, 1].max()), rel=1e-15)
    assert report.holds
    assert not condition1(data.with_(select=torch.ones(6, dtype=torch.int64))).holds  # the short token as opt
    assert not condition1(data, W0=torch.eye(40)).holds  # not a zero start
    assert not condition1(data, a1_C=1.0).holds  # A1 fails at these sizes, and is now required


def test_check_assumptions_defaults_and_errors():
    with_head = check_assumptions(scores_equal(seed=0))
    assert [r.name.split()[0] for r in with_head] == ["unique", "A1", "A2", "A3", "A4"]
    assert [r.name for r in check_assumptions(dm(seed=0))] == ["A1 near-orthogonal tokens", "Condition 1 (DM)"]
    assert check_assumptions(example1(), which="A2")[0].holds
    with pytest.raises(ValidationError, match="unknown assumption\\(s\\) \\['A7'\\]; known: unique_opt, A1"):
        check_assumptions(example1(), which=["A7"])
    with pytest.raises(ValidationError, match="no head v"):
        check_assumptions(joint_toy(), which=["A2"])
    with pytest.raises(ValidationError, match="data must be a TokenSelectionData"):
        check_assumptions(torch.zeros(2, 2, 2))


def test_token_sets_are_refused_by_the_checks_that_need_one_optimal_token():
    # the (n, T) mask was used as token indices: a raw IndexError from condition1 and the kappa' of A1 and A4
    data = dm(n=4, d=12, seed=0)
    sets = torch.zeros(4, data.T, dtype=torch.bool)
    sets[:, :2] = True
    masked = data.with_(select=sets)
    needs_one = "needs one optimal token per sequence, but data.select holds token sets"
    for which in (["condition1"], ["A1", "condition1"]):
        with pytest.raises(ValidationError, match=needs_one):
            check_assumptions(masked, which=which)
    with pytest.raises(ValidationError, match=needs_one):
        near_orthogonal(masked, exclude_opt_pairs=True)
    report = near_orthogonal(masked)  # kappa' is a diagnostic: unknown without one optimal token per sequence
    assert report.measured == near_orthogonal(data.with_(select=None)).measured and "kappa' (opt pairs" in report.detail
    headed = example1(n=4, T=3, d=8, seed=0)
    headed_sets = headed.with_(select=torch.ones(4, 3, dtype=torch.bool))  # with a head: its optimal tokens
    with pytest.raises(ValidationError, match=needs_one):
        condition1(headed_sets)
    assert [r.measured for r in check_assumptions(headed_sets, which=["A1", "A4"])] == [
        r.measured for r in check_assumptions(headed, which=["A1", "A4"])
    ]


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1e-20])
@pytest.mark.parametrize("check", [near_orthogonal, assumption4_geometry], ids=["kappa", "A4-cosines"])
def test_scale_free_checks_do_not_depend_on_the_scale(check, scale):
    data = example1(n=4, T=3, d=8, seed=0)
    scaled = data.with_(X=data.X * scale, Z=data.Z * scale)
    ref, got = check(data), check(scaled)
    # 1e-12: kappa and cosines are ratios; at unit scale only the rounding of X / max|X| differs
    assert got.measured == pytest.approx(ref.measured, rel=1e-12) and got.holds == ref.holds
    assert "nan" not in got.detail


def test_cross_attention_data_check_their_assumptions_on_a_rectangular_w_and_refuse_a4_by_name():
    from attnlab.data import TokenSelectionData, check_assumptions

    gen = torch.Generator().manual_seed(0)
    X, Z = (
        torch.randn(4, 3, 5, generator=gen, dtype=torch.float64),
        torch.randn(4, 3, generator=gen, dtype=torch.float64),
    )
    data = TokenSelectionData(X, Z=Z, y=[1, -1, 1, -1], v=torch.randn(5, generator=gen, dtype=torch.float64))
    (a3,) = check_assumptions(data, which=["A3"], W0=torch.zeros(5, 3))
    assert a3.measured == pytest.approx(float(torch.exp(-data.y * (X @ data.v).mean(dim=1)).mean()), rel=1e-12)
    with pytest.raises(ValidationError, match=r"tokens have width d = 5 and the queries d_q = 3"):
        check_assumptions(data, which=["A4"])
