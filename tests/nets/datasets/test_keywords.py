"""Tests of the generated keyword task: exactly one keyword per sequence, and it decides the label."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.nets.datasets.keywords import keyword_task


def test_one_keyword_per_sequence_at_its_position_decides_the_label():
    task = keyword_task(n_train=300, n_test=50, length=7, vocab_size=20, keywords=3, seed=0)
    x, y, position = task.split.x_train, task.split.y_train, task.keyword_position_train
    assert torch.all(x[:, 0] == 1)  # [CLS]
    is_keyword = (x >= 2) & (x < 2 + 2 * 3)
    assert torch.all(is_keyword.sum(1) == 1)
    assert torch.equal(is_keyword.float().argmax(1), position)
    keyword = x[torch.arange(len(y)), position]
    assert torch.equal((keyword < 2 + 3).long(), y)  # ids 2..4 positive, 5..7 negative
    assert 0.35 < float(y.float().mean()) < 0.65  # balanced in expectation; 300 draws, 5 standard deviations wide


def test_keyword_task_is_seeded():
    a, b = keyword_task(n_train=20, n_test=5, seed=4), keyword_task(n_train=20, n_test=5, seed=4)
    assert torch.equal(a.split.x_train, b.split.x_train) and torch.equal(a.split.x_test, b.split.x_test)


def test_keyword_task_needs_filler_ids():
    with pytest.raises(ValidationError, match="pass vocab_size >= 11"):
        keyword_task(vocab_size=10, keywords=4)
