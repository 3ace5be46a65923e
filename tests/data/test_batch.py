"""stack(): a leading runs axis whose slices are the input data sets."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData, dm, example1, stack


def test_stack_slices_are_the_datasets():
    datasets = [example1(n=4, T=3, d=8, seed=s) for s in range(3)]
    batch = stack(datasets)
    assert batch.R == 3
    assert tuple(batch.X.shape) == (3, 4, 3, 8) and tuple(batch.Z.shape) == (3, 4, 8)
    assert tuple(batch.y.shape) == (3, 4) and tuple(batch.v.shape) == (3, 8) and tuple(batch.select.shape) == (3, 4)
    for r, data in enumerate(datasets):
        for key in ("X", "Z", "y", "v", "select"):
            assert torch.equal(getattr(batch, key)[r], getattr(data, key)), (r, key)


def test_stack_drops_fields_that_some_datasets_lack():
    with_head = example1(n=4, T=2, d=8, seed=0)
    batch = stack([with_head, TokenSelectionData(with_head.X, y=with_head.y)])
    assert batch.v is None and batch.select is None
    assert stack([dm(n=4, d=8, seed=s) for s in range(2)]).v is None


@pytest.mark.parametrize(
    ("datasets", "match"),
    [
        ([], "datasets is empty"),
        ([example1(n=4, T=3, d=8), example1(n=4, T=4, d=8)], "must share \\(n, T, d, d_q\\)"),
        ([example1(n=4, T=3, d=8), torch.zeros(4, 3, 8)], "datasets\\[1\\] is a Tensor"),
    ],
)
def test_stack_errors(datasets, match):
    with pytest.raises(ValidationError, match=match):
        stack(datasets)
