"""Bad input to the max-margin programs is refused by name, never solved silently or let through as a raw error.

Each case failed before the audit's fixes: a tied attention solved the SVM of token 0, a boolean select was read as
indices 1/0, non-data raised a plain TypeError, a bad ``norm`` was named ``p``, a bad ``W0`` was named ``W``, and the
l_p ball of ``constrained_erm`` leaked NumPy's overflow warnings at large ``p``.
"""

import warnings

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.svm import (
    InfeasibleProgramError,
    SelectionSVMs,
    aligned_l1_svm,
    attended_svm,
    attention_svm,
    constrained_erm,
    constrained_stationarity,
    diagonal_svm,
    finite_part,
    head_svm,
    is_globally_optimal,
    is_locally_optimal,
    is_separable,
    joint_attention_svm,
    locally_optimal_selections,
    log_excess_risk_and_gradient,
    set_direction_svm,
    support_tokens,
    svm_equivalence,
)


def _data(seed=5):
    rng = np.random.default_rng(seed)
    X, Z = rng.normal(size=(5, 3, 4)), rng.normal(size=(5, 4))
    return TokenSelectionData(X, Z=Z, y=[1, -1, 1, -1, 1.0], v=rng.normal(size=4))


# --- 1: a W whose attention is tied selects no token: refused, not solved for token 0 ---------------------------


def _one_tie(data):
    """A W whose logits ``x_it[0] z_i[0]`` tie tokens 0 and 1 of sequence 2 (made equal, and largest), only."""
    W = torch.zeros(4, 4, dtype=torch.float64)
    W[0, 0] = 1.0
    X = data.X.clone()
    X[2, 0, 0] = 10.0 * torch.sign(data.Z[2, 0])
    X[2, 1] = X[2, 0]
    return data.with_(X=X), W


@pytest.mark.parametrize("case", ["all-zero-W", "one-sequence"])
def test_attended_svm_refuses_a_tied_attention_naming_W_and_the_sequences(case):
    data = _data()
    if case == "all-zero-W":
        data, W, where = data, np.zeros((4, 4)), r"\[0, 1, 2, 3, 4\]"
    else:
        (data, W), where = _one_tie(data), r"\[2\] "
    with pytest.raises(InfeasibleProgramError, match=rf"W attends to no single token in sequences {where}"):
        attended_svm(data, W)


def test_attended_svm_of_an_untied_attention_is_the_svm_of_its_argmax():
    data = _data()
    W = torch.tensor(np.random.default_rng(0).normal(size=(4, 4)))
    attended = torch.einsum("ntd,de,ne->nt", data.X, W, data.Z).argmax(dim=1)  # implicit-bias-ngd §2
    result = attended_svm(data, W)
    assert torch.equal(result.select, attended)
    assert torch.equal(result.W, attention_svm(data, select=attended).W)


# --- 2: the joint program parses select as attention_svm does ----------------------------------------------------


@pytest.mark.parametrize(
    "select",
    [
        np.array([[True, False, True, False, True]]),
        torch.tensor([[True, False, True, False, True]]),
        [[0.0, 1.0, 0.0, 1.0, 2.0]],
        [[0, 1, 0, 1, 3]],
    ],
    ids=["numpy-bool", "torch-bool", "floats", "out-of-range"],
)
def test_joint_svm_refuses_a_select_that_attention_svm_refuses(select):
    with pytest.raises(ValidationError, match="select"):
        joint_attention_svm(_data(), select=select)
    with pytest.raises(ValidationError, match="select"):
        attention_svm(_data(), select=np.asarray(select)[0])


def test_joint_svm_of_integer_selections_is_each_heads_attention_svm():
    data, select = _data(), [[0, 1, 2, 0, 1], [2, 2, 1, 1, 0]]
    result = joint_attention_svm(data, select=np.array(select, dtype=np.int32))
    assert result.select.dtype == torch.int64 and result.select.tolist() == select
    for h, row in enumerate(select):
        assert torch.equal(result.W[h], attention_svm(data, select=row).W)


# --- 7: every entry point refuses non-data with a ValidationError naming data -------------------------------------

_ENTRY_POINTS = {
    "attention_svm": lambda d: attention_svm(d),
    "attended_svm": lambda d: attended_svm(d, np.eye(2)),
    "head_svm": lambda d: head_svm(d),
    "diagonal_svm": lambda d: diagonal_svm(d),
    "aligned_l1_svm": lambda d: aligned_l1_svm(d, np.eye(2), np.eye(2), [0, 1]),
    "joint_attention_svm": lambda d: joint_attention_svm(d, select=[[0, 1, 0]]),
    "set_direction_svm": lambda d: set_direction_svm(d, [[0], [1], [0]]),
    "finite_part": lambda d: finite_part(d, [[0], [1], [0]], np.zeros((3, 3))),
    "svm_equivalence": lambda d: svm_equivalence(d, np.eye(2)),
    "support_tokens": lambda d: support_tokens(d, [0, 1, 0]),
    "is_locally_optimal": lambda d: is_locally_optimal(d, [0, 1, 0]),
    "is_globally_optimal": lambda d: is_globally_optimal(d, [0, 1, 0]),
    "is_separable": lambda d: is_separable(d, [0, 1, 0]),
    "locally_optimal_selections": lambda d: locally_optimal_selections(d),
    "constrained_erm": lambda d: constrained_erm(d, 2.0, 1.0, np.zeros((2, 2)), [0, 1, 0]),
    "constrained_stationarity": lambda d: constrained_stationarity(d, 2.0, np.eye(2), [0, 1, 0]),
    "log_excess_risk_and_gradient": lambda d: log_excess_risk_and_gradient(d, np.eye(2), [0, 1, 0]),
    "SelectionSVMs": lambda d: SelectionSVMs([d]),
    "SelectionSVMs-bare": lambda d: SelectionSVMs(d),
}


@pytest.mark.parametrize(
    "bad", [np.zeros((3, 3, 2)), None, (np.zeros((3, 3, 2)), np.ones(3))], ids=["array", "none", "tuple"]
)
@pytest.mark.parametrize("entry", sorted(_ENTRY_POINTS))
def test_every_entry_point_refuses_non_data_naming_data(entry, bad):
    with pytest.raises(ValidationError, match="data"):
        _ENTRY_POINTS[entry](bad)


# --- 9: the messages name the argument the caller passed ----------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda d: attention_svm(d, norm=0.5), r"^norm == 0\.5 .*p == 0\.5, must be >= 1"),
        (lambda d: attention_svm(d, norm=True), r"^norm == True .*must be a Real"),
        (lambda d: attention_svm(d, norm=1.0005), r"^norm == 1\.0005 .*too close to 1"),
        (lambda d: attended_svm(d, np.eye(4), norm=0.5), r"^norm == 0\.5"),
        (lambda d: joint_attention_svm(d, select=[[0] * 5], norm=0.5), r"^norm == 0\.5"),
        (lambda d: set_direction_svm(d, [[0]] * 5, norm=0.5), r"^norm == 0\.5"),
        (lambda d: support_tokens(d, p=0.5), r"^p == 0\.5, must be >= 1"),
        (lambda d: is_locally_optimal(d, p=True), r"^p must be a Real"),
        (lambda d: SelectionSVMs([d]).locally_optimal([[0] * 5], p=0.5), r"^p == 0\.5"),
        (lambda d: constrained_erm(d, 2.0, 1.0, np.full((4, 4), np.nan), d.optimal_tokens()), r"^W0 has 16 non-fin"),
        (lambda d: constrained_erm(d, 2.0, 1.0, np.zeros((3, 4)), d.optimal_tokens()), r"^W0 has shape \(3, 4\)"),
    ],
    ids=[
        "norm-0.5",
        "norm-bool",
        "norm-near-1",
        "attended",
        "joint",
        "sets",
        "p-support",
        "p-bool",
        "p-selsvms",
        "W0-nan",
        "W0-shape",
    ],
)
def test_messages_name_the_argument(call, match):
    with pytest.raises(ValidationError, match=match):
        call(_data())


# --- 10: the l_p ball at large p: no overflow warning, the same solution --------------------------------------------


@pytest.mark.parametrize("p", [200.0, 1000.0])
def test_constrained_erm_at_large_p_warns_nothing_and_ends_on_the_sphere(p):
    data, R = _data(), 5.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in power" was a RuntimeWarning
        W = constrained_erm(data, p, R, np.zeros((4, 4)), data.optimal_tokens())
    # the ball ||W||_p <= R, by a direct formula at a safe scale (|W| / max |W| <= 1 cannot overflow)
    top = float(W.abs().max())
    norm = top * float(((W.abs() / top) ** p).sum()) ** (1.0 / p)
    assert norm <= R * (1.0 + 1e-8)
    assert norm >= R * (1.0 - 1e-3)  # separable data: the minimiser lies on the sphere
