"""Example 1 and DM (implicit-bias-ngd §6): exact scores, distributions, determinism, errors."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import condition1, dm, equal_nonopt_scores, example1, unique_optimal_token


@pytest.mark.parametrize("opt_pos", ["first", "random"])
@pytest.mark.parametrize("antipodal", [False, True])
def test_example1_scores_are_exactly_rho_and_zero(opt_pos, antipodal):
    data = example1(n=6, T=5, d=32, rho=0.7, opt_pos=opt_pos, antipodal=antipodal, seed=1)
    scores = data.token_scores()
    rows = torch.arange(6)
    assert torch.equal(scores[rows, data.select], torch.full((6,), 0.7, dtype=torch.float64))  # exact: u = e_1
    others = scores.clone()
    others[rows, data.select] = 0.0
    assert bool((others == 0).all())  # noise has an exactly zero first coordinate
    assert torch.equal(data.optimal_tokens(), data.select)
    assert equal_nonopt_scores(data).holds and unique_optimal_token(data).holds


def test_example1_layout_defaults_and_dtype():
    data = example1()
    assert (data.n, data.T, data.d) == (8, 6, 128)  # spec §9 fig. 2 [L] defaults
    assert data.X.dtype == torch.float64
    assert torch.equal(data.v, torch.eye(128, dtype=torch.float64)[0])
    assert torch.equal(data.Z, data.X[:, 0]) and bool((data.select == 0).all())


def test_example1_antipodal_opt_tokens_are_pure_signal():
    data = example1(n=5, T=3, d=16, rho=2.0, antipodal=True, seed=4)
    expected = (2.0 * data.y)[:, None] * data.v
    assert torch.equal(data.X[:, 0], expected)


def test_example1_random_positions_vary():
    data = example1(n=40, T=6, d=8, opt_pos="random", seed=0)
    assert len(set(data.select.tolist())) > 1


def test_example1_noise_variance_is_sigma_sq_over_d():
    n, T, d, sigma = 50, 10, 64, 2.0
    data = example1(n=n, T=T, d=d, sigma=sigma, seed=0)
    noise = data.X[:, 1:, 1:]  # non-opt tokens, coordinates orthogonal to u
    # Monte-Carlo: 29,610 entries, relative std of the variance estimate sqrt(2/N) = 0.8%; 5% is 6 std
    assert abs(float(noise.var()) / (sigma**2 / d) - 1) < 0.05
    assert abs(float(data.y.mean())) < 0.5  # labels are not all one sign (n = 50)


def test_example1_is_deterministic_in_its_seed():
    a, b, c = example1(seed=5), example1(seed=5), example1(seed=6)
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y)
    assert not torch.equal(a.X, c.X)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"T": 1}, "T == 1, must be >= 2"),
        ({"d": 1}, "d == 1, must be >= 2"),
        ({"n": 0}, "n == 0, must be >= 1"),
        ({"rho": 0.0}, "rho == 0.0, must be > 0"),
        ({"sigma": -1.0}, "sigma == -1.0, must be > 0"),
        ({"opt_pos": "last"}, "opt_pos == 'last', must be one of 'first', 'random'"),
        ({"antipodal": 1}, "antipodal must be True or False"),
        ({"seed": -2}, "seed == -2"),
    ],
)
def test_example1_bad_arguments(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        example1(**kwargs)


def test_dm_labels_follow_the_given_direction():
    mu = torch.linspace(-1, 1, 20, dtype=torch.float64)
    data = dm(n=30, d=20, mu=mu, seed=2)
    assert torch.equal(data.y, torch.where(data.X[:, 0] @ mu >= 0, 1.0, -1.0).double())
    assert data.v is None and data.T == 2 and bool((data.select == 0).all())


def test_dm_token_norms_follow_sigmas():
    data = dm(n=400, d=50, sigma_opt=3.0, sigma_oth=1.0, seed=0)
    sq = (data.X**2).sum(dim=2).mean(dim=0)  # E||x||^2 = sigma^2
    # Monte-Carlo: ||x||^2/sigma^2 ~ chi2_50/50, std of the mean over 400 = sqrt(2/50/400) = 1%; 5% is 5 std
    assert torch.allclose(sq, torch.tensor([9.0, 1.0], dtype=torch.float64), rtol=0.05, atol=0)


def test_dm_defaults_satisfy_condition1_and_are_seeded():
    data = dm()
    assert (data.n, data.T, data.d) == (8, 2, 200)  # spec §9 fig. 3 [L] defaults
    assert condition1(data).holds
    assert torch.equal(dm(seed=3).X, dm(seed=3).X)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sigma_opt": 1.0, "sigma_oth": 1.0}, "sigma_opt == 1.0 must exceed sigma_oth == 1.0"),
        ({"mu": [1.0, 2.0]}, "mu has shape \\(2,\\)"),
        ({"sigma_oth": 0.0}, "sigma_oth == 0.0, must be > 0"),
    ],
)
def test_dm_bad_arguments(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        dm(**kwargs)


def test_dm_refuses_a_zero_label_direction():
    with pytest.raises(ValidationError, match="mu == 0 labels every sequence"):
        dm(n=4, d=8, mu=torch.zeros(8))
