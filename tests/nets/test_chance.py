"""Tests of the chance level: the majority-class rate against a plain count, and the learning bound against the
binomial standard error written out."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.nets.chance import at_chance, binomial_se, chance_bound, majority_rate


def test_majority_rate_is_the_most_frequent_class_share():
    labels = torch.tensor([2, 0, 2, 1, 2, 0, 9])
    counts = {c: sum(int(y) == c for y in labels) for c in set(labels.tolist())}
    assert majority_rate(labels) == max(counts.values()) / len(labels) == 3 / 7


def test_binomial_se_matches_the_spread_of_simulated_accuracies():
    generator = torch.Generator().manual_seed(0)
    draws = torch.bernoulli(torch.full((20000, 40), 0.3, dtype=torch.float64), generator=generator).mean(dim=1)
    assert float(draws.std()) == pytest.approx(binomial_se(0.3, 40), rel=0.02)  # Monte-Carlo: 20 000 runs of 40


def test_chance_bound_is_the_rate_plus_k_binomial_standard_errors():
    assert chance_bound(0.5, 40, 3) == pytest.approx(0.5 + 3 * math.sqrt(0.25 / 40), abs=1e-15)
    assert chance_bound(0.3, 10, 0) == 0.3
    assert chance_bound(1.0, 5, 3) == 1.0  # no spread at a single class


@pytest.mark.parametrize(
    "labels",
    [
        torch.tensor([]),
        torch.tensor([[0, 1]]),
        torch.tensor([0.0, 1.0]),
        torch.tensor([True, False]),
        torch.tensor([0, -1]),
    ],
)
def test_majority_rate_refuses_what_is_not_a_label_vector(labels):
    with pytest.raises(ValidationError, match="labels"):
        majority_rate(labels)


@pytest.mark.parametrize(
    ("args", "name"), [((1.5, 10, 3), "rate"), ((0.5, 0, 3), "size"), ((0.5, 10, -1), "standard_errors")]
)
def test_chance_bound_refuses_out_of_range_arguments(args, name):
    with pytest.raises(ValidationError, match=name):
        chance_bound(*args)


def test_at_chance_compares_counts_of_right_answers():
    assert at_chance(0.5, 0.5, 40)  # a constant output on the majority class
    assert at_chance(0.425, 0.575, 40)  # a constant output on the other class
    assert at_chance(float(torch.tensor(23 / 40, dtype=torch.float32)), 23 / 40, 40)  # float32 rounding: still 23
    assert not at_chance(0.6, 0.575, 40)  # one example more than the majority class gets: some signal


def test_at_chance_refuses_an_accuracy_outside_0_1():
    with pytest.raises(ValidationError, match="accuracy"):
        at_chance(1.5, 0.5, 10)
