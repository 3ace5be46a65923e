"""The shared argument checks: messages name the argument, the constraint and the value."""

import numpy as np
import pytest
import torch

from attnlab._validation import SEED_MAX, ValidationError, check_in, check_scalar, check_seed, check_tensor


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


def test_integers_of_any_integral_type_and_booleans_only_as_booleans():
    from attnlab._validation import check_bool

    for value in (5, np.int64(5), np.int32(5), np.uint8(5), torch.tensor(5)):
        out = check_scalar("steps", value, kind=int, low=0)
        assert out == 5 and type(out) is int
    with pytest.raises(ValidationError, match="steps must be a int"):
        check_scalar("steps", np.float64(5.0), kind=int)
    with pytest.raises(ValidationError, match="must be a int"):
        check_scalar("steps", np.bool_(True), kind=int)
    assert check_bool("train_head", np.bool_(True)) is True
    for bad in ("no", 0, 1, None):
        with pytest.raises(ValidationError, match="train_head == .*, must be a bool"):
            check_bool("train_head", bad)


def test_tensors_are_copied_and_meta_tensors_refused():
    t = torch.ones(3, dtype=torch.float64)
    out = check_tensor("y", t)
    t.add_(1.0)
    assert torch.equal(out, torch.ones(3, dtype=torch.float64))
    with pytest.raises(ValidationError, match="W_ref is a 'meta' tensor"):
        check_tensor("W_ref", torch.empty(2, 2, device="meta"))


def test_select_is_integer_of_the_right_length_and_range():
    from attnlab._validation import check_select

    assert check_select("select", np.array([0, 2], dtype=np.int16), n=2, T=3).dtype == torch.int64
    with pytest.raises(ValidationError, match="select must be 2 integer token indices .* got dtype float64"):
        check_select("select", [1.0, 2.0], n=2, T=3)
    with pytest.raises(ValidationError, match=r"select holds indices outside \[0, 2\]"):
        check_select("select", [0, 3], n=2, T=3)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.ones((2, 2)) + 0.5j, r"X is complex \(complex128\); pass a real-valued array"),
        ([1.0, 2j], r"X is complex"),
        (np.array(["1", "-1"]), r"X holds text \(dtype <U2\), not numbers"),
        (np.array([b"1"]), r"X holds text"),
        (np.array([1.0, None]), r"X holds Python objects \(dtype object, e.g. a NoneType\)"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), r"X has dtype datetime64\[D\], not numbers"),
    ],
)
def test_complex_text_and_objects_are_refused_not_converted(value, match):
    # np.asarray(value, dtype=float64) kept the real part of complex values (with only a warning) and parsed text
    with pytest.raises(ValidationError, match=match):
        check_tensor("X", value)


def test_numbers_of_every_real_kind_are_converted():
    assert check_tensor("y", [True, False]).tolist() == [1.0, 0.0]  # booleans are 1 and 0
    assert check_tensor("y", np.array([1, -1], dtype=np.int8)).tolist() == [1.0, -1.0]
    assert check_tensor("y", np.array([1, 2**70], dtype=object)).tolist() == [1.0, 2.0**70]  # ints beyond int64
    assert check_tensor("y", [torch.tensor(0.1, dtype=torch.float64), 0.2]).tolist() == [0.1, 0.2]  # not via f32


def test_integer_bounds_compare_exactly_at_the_largest_seed():
    # float(2**63 - 1) rounds up to 2**63: the largest seed was refused as "must be <= 9223372036854775807"
    assert check_seed("seed", SEED_MAX) == SEED_MAX
    with pytest.raises(ValidationError, match=r"seed == 9223372036854775808, must be <= 9223372036854775807"):
        check_seed("seed", SEED_MAX + 1)
    assert check_scalar("n", 2**62 + 1, kind=int, high=2**62 + 1) == 2**62 + 1
