"""The shared argument checks: messages name the argument, the constraint and the value."""

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError, check_in, check_scalar, check_tensor


def test_check_scalar_messages():
    assert check_scalar("lr", 0.1, low=0.0, low_inclusive=False) == 0.1
    with pytest.raises(ValidationError, match=r"lr == -1.0, must be > 0.0"):
        check_scalar("lr", -1.0, low=0.0, low_inclusive=False)
    with pytest.raises(ValidationError, match=r"momentum == 1.0, must be < 1.0"):
        check_scalar("momentum", 1.0, low=0.0, high=1.0, high_inclusive=False)
    with pytest.raises(ValidationError, match="steps must be a int"):
        check_scalar("steps", 2.5, kind=int)
    with pytest.raises(ValidationError, match="finite"):
        check_scalar("p", float("nan"))
    with pytest.raises(ValidationError, match="must be a"):
        check_scalar("flag", True)


def test_check_in_lists_choices():
    with pytest.raises(ValidationError, match="'a', 'b'"):
        check_in("mode", "c", ("a", "b"))


def test_check_tensor_shapes_sizes_and_finiteness():
    sizes = {}
    X = check_tensor("X", np.zeros((2, 3, 4)), "nTd", sizes)
    assert X.dtype == torch.float64 and sizes == {"n": 2, "T": 3, "d": 4}
    with pytest.raises(ValidationError, match=r"Z has shape \(3, 4\): axis 'n' has size 3"):
        check_tensor("Z", np.zeros((3, 4)), "nd", sizes)
    with pytest.raises(ValidationError, match="expected 2 axes"):
        check_tensor("Z", np.zeros(4), "nd")
    with pytest.raises(ValidationError, match="1 non-finite"):
        check_tensor("y", [1.0, np.inf])
    with pytest.raises(ValidationError, match="at least 2"):
        check_tensor("X", np.zeros((2, 1, 4)), "nTd", min_size={"T": 2})
    assert check_tensor("lr", 0.5).dim() == 0
