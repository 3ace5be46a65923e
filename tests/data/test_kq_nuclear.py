"""scores_equal and aligned_pairs (kq-nuclear-norm §6): the scores and geometry they promise, and their errors."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import (
    AlignedPairs,
    aligned_pairs,
    assumption4_geometry,
    equal_nonopt_scores,
    scores_equal,
    small_initial_loss,
)


def test_scores_equal_has_exact_scores_and_separate_queries():
    data = scores_equal(n=4, T=5, d=12, gap=2.5, seed=3)
    scores = data.token_scores()
    assert bool((scores[:, 0] == 2.5).all()) and bool((scores[:, 1:] == 0).all())  # exact by construction
    assert (data.n, data.T, data.d) == (4, 5, 12) and bool((data.select == 0).all())
    assert not torch.equal(data.Z, data.X[:, 0])
    assert equal_nonopt_scores(data).holds


def test_scores_equal_seeded():
    assert torch.equal(scores_equal(seed=1).X, scores_equal(seed=1).X)
    assert not torch.equal(scores_equal(seed=1).Z, scores_equal(seed=2).Z)


def test_scores_equal_gap_controls_a3():
    assert small_initial_loss(scores_equal(n=4, T=3, d=8, gap=6.0)).holds
    assert not small_initial_loss(scores_equal(n=4, T=3, d=8, gap=1.0)).holds


def test_scores_equal_bad_gap():
    with pytest.raises(ValidationError, match="gap == -1.0, must be > 0"):
        scores_equal(gap=-1.0)


@pytest.fixture
def ap():
    return aligned_pairs(n=3, m_pairs=2, d=8, radii=(0.5, 1.0, 2.0), c=(0.3, -0.6, 0.0), score=4.0, seed=1)


def test_aligned_pairs_scores_are_score_and_c_score(ap):
    scores = ap.data.token_scores()
    c = torch.tensor([0.3, -0.6, 0.0], dtype=torch.float64)
    assert torch.allclose(scores[:, 0], torch.full((3,), 4.0, dtype=torch.float64), rtol=0, atol=1e-13)  # rounding
    assert torch.allclose(scores[:, 1:], (4.0 * c)[:, None].expand(3, 4), rtol=0, atol=1e-13)
    assert equal_nonopt_scores(ap.data).holds


def test_aligned_pairs_frames_witness_eq7(ap):
    assert isinstance(ap, AlignedPairs)
    eye = torch.eye(8, dtype=torch.float64)
    assert torch.allclose(ap.U_K.T @ ap.U_K, eye, rtol=0, atol=1e-14) and torch.allclose(
        ap.U_Q.T @ ap.U_Q, eye, rtol=0, atol=1e-14
    )
    x_opt = ap.data.X[:, 0]
    assert torch.allclose(x_opt / x_opt.norm(dim=1, keepdim=True), ap.U_K[:, ap.pi].T, rtol=0, atol=1e-14)
    assert torch.allclose(ap.data.Z / ap.data.Z.norm(dim=1, keepdim=True), ap.U_Q[:, ap.pi].T, rtol=0, atol=1e-14)
    signs = (ap.U_Q * ap.U_K).sum(dim=0)  # +-1 per column: U_Q is U_K with some columns flipped
    assert torch.allclose(signs.abs(), torch.ones(8, dtype=torch.float64), rtol=0, atol=1e-14)
    assert bool((signs < 0).any())  # seed 1 draws a negative query sign, so the flip is exercised
    assert torch.allclose(x_opt.norm(dim=1), torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64), rtol=0, atol=1e-14)


def test_aligned_pairs_pairs_sum_to_twice_the_centre(ap):
    X, c = ap.data.X, torch.tensor([0.3, -0.6, 0.0], dtype=torch.float64)
    pair_sums = X[:, 1::2] + X[:, 2::2]  # (n, m_pairs, d)
    assert torch.allclose(pair_sums, (2 * c[:, None] * X[:, 0])[:, None].expand_as(pair_sums), rtol=0, atol=1e-14)
    assert assumption4_geometry(ap.data).holds


def test_aligned_pairs_seeded():
    assert torch.equal(aligned_pairs(seed=4).data.X, aligned_pairs(seed=4).data.X)
    assert not torch.equal(aligned_pairs(seed=4).U_K, aligned_pairs(seed=5).U_K)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 8, "d": 8}, "n == 8 needs d >= n \\+ 1 == 9, got d == 8"),
        ({"c": 1.0}, "c must lie in \\[-1, 1\\)"),
        ({"radii": (1.0, 2.0)}, "radii has shape \\(2,\\)"),
        ({"radii": -1.0}, "radii must all be > 0"),
        ({"score": 0.0}, "score == 0.0, must be > 0"),
        ({"m_pairs": 0}, "m_pairs == 0, must be >= 1"),
    ],
)
def test_aligned_pairs_bad_arguments(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        aligned_pairs(**kwargs)
