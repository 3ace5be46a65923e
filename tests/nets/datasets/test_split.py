"""Tests of the train/test split."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.nets.datasets.digits import load_digits_split
from attnlab.nets.datasets.split import Split, train_test_split


def test_split_is_a_seeded_partition():
    x, y = torch.arange(10.0)[:, None], torch.arange(10)
    split = train_test_split(x, y, test_fraction=0.3, seed=1)
    assert len(split.y_test) == 3 and len(split.y_train) == 7
    assert sorted(torch.cat([split.y_train, split.y_test]).tolist()) == list(range(10))
    assert torch.equal(split.x_train[:, 0].long(), split.y_train)  # rows stay paired with their labels
    assert torch.equal(train_test_split(x, y, test_fraction=0.3, seed=1).y_test, split.y_test)
    assert not torch.equal(train_test_split(x, y, test_fraction=0.3, seed=2).y_test, split.y_test)


def test_split_refuses_float_labels_and_length_mismatch():
    with pytest.raises(ValidationError, match=r"y_train .* pass y.long\(\)"):
        Split(torch.zeros(3, 2), torch.zeros(3), torch.zeros(1, 2), torch.zeros(1, dtype=torch.int64))
    with pytest.raises(ValidationError, match="x_test has 2 rows and y_test 1"):
        Split(
            torch.zeros(3, 2), torch.zeros(3, dtype=torch.int64), torch.zeros(2, 2), torch.zeros(1, dtype=torch.int64)
        )


def test_split_refuses_a_test_fraction_outside_zero_one():
    with pytest.raises(ValidationError, match="test_fraction == 1.0"):
        train_test_split(torch.zeros(4, 1), torch.zeros(4, dtype=torch.int64), test_fraction=1.0, seed=0)


def test_digits_are_scaled_images_with_ten_labels():
    split = load_digits_split(seed=0)
    assert split.x_train.shape[1:] == (1, 8, 8) and len(split.y_train) + len(split.y_test) == 1797
    assert float(split.x_train.min()) == 0.0 and float(split.x_train.max()) == 1.0
    assert split.num_classes == 10
