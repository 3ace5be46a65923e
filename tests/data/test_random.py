"""Seeded draws: explicit generators only, Haar orthogonal matrices, seed validation."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data._random import generator, random_labels, random_orthogonal


def test_generator_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    before = torch.get_rng_state()
    random_orthogonal(5, generator(0))
    assert torch.equal(torch.get_rng_state(), before)


def test_random_orthogonal_is_orthogonal_and_seeded():
    U = random_orthogonal(7, generator(3))
    assert torch.allclose(U.T @ U, torch.eye(7, dtype=torch.float64), rtol=0, atol=1e-14)  # QR rounding
    assert torch.equal(U, random_orthogonal(7, generator(3)))


def test_random_labels_are_signs():
    y = random_labels(200, generator(0))
    assert set(y.tolist()) == {-1.0, 1.0}


@pytest.mark.parametrize(
    ("seed", "match"), [(-1, "seed == -1, must be >= 0"), (1.5, "seed must be a int"), (True, "seed must be")]
)
def test_bad_seed(seed, match):
    with pytest.raises(ValidationError, match=match):
        generator(seed)
