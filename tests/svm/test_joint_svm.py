"""The joint max-margin program of a sum of heads against one cvxpy program over all heads at once, written here
from the definition (sum of the heads' norms, every head's constraints), and its refusals.

Spec: multi-token §9.
"""

import cvxpy as cp
import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.svm import InfeasibleProgramError, joint_attention_svm

H, N, T, D, D_Q = 3, 4, 3, 4, 3


def _data(seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(N, T, D, generator=gen, dtype=torch.float64)
    Z = torch.randn(N, D_Q, generator=gen, dtype=torch.float64)
    return TokenSelectionData(X, Z=Z, y=torch.ones(N)), torch.randn(H, D, generator=gen, dtype=torch.float64)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_joint_program_matches_one_program_over_all_heads(norm):
    data, V = _data()
    result = joint_attention_svm(data, V, norm=norm)
    X, Z = data.X.numpy(), data.Z.numpy()
    select = (data.X @ V.T).argmax(dim=1).T.numpy()  # (H, n): each head's optimal tokens (y = +1)
    heads = [cp.Variable((D, D_Q)) for _ in range(H)]
    cons = [
        (X[i, select[h, i]] - X[i, t]) @ heads[h] @ Z[i] >= 1
        for h in range(H)
        for i in range(N)
        for t in range(T)
        if t != select[h, i]
    ]
    objective = sum(cp.norm(W, "fro") if norm == "fro" else cp.normNuc(W) for W in heads)
    cp.Problem(cp.Minimize(objective), cons).solve(solver="CLARABEL")
    reference = np.stack([W.value for W in heads])
    assert torch.equal(result.select, torch.as_tensor(select))
    cos = float(np.sum(result.W.numpy() * reference) / np.linalg.norm(result.W.numpy()) / np.linalg.norm(reference))
    assert cos >= 1 - 1e-6
    assert result.W.shape == (H, D, D_Q) and result.side_by_side.shape == (D, H * D_Q)
    assert result.margin == pytest.approx(1.0, abs=1e-7)
    assert result.kkt_residual <= 1e-5 and result.max_violation <= 1e-7
    assert result.norm_value == pytest.approx(float(objective.value), rel=1e-6)


def test_a_tied_selection_is_infeasible_naming_the_head_and_the_sequence():
    data, V = _data(1)
    X = data.X.clone()
    X[2, 2] = X[2, 0]  # token 2 of sequence 2 equals token 0: head 1 selecting token 0 there reads 0 >= 1
    select = [[1, 1, 1, 1], [0, 0, 0, 0]]
    with pytest.raises(InfeasibleProgramError, match=r"head 1 \(selection \[0, 0, 0, 0\]\).*\(i=2, t=2\)"):
        joint_attention_svm(data.with_(X=X), select=select)


def test_bad_selections_and_norms_are_refused_by_name():
    data, V = _data()
    with pytest.raises(
        ValidationError, match=r"select must hold one token index per head and sequence, shape \(H, 4\)"
    ):
        joint_attention_svm(data, select=[0, 1, 0, 1])
    with pytest.raises(ValidationError, match="no selection: pass select of shape"):
        joint_attention_svm(data)
    with pytest.raises(ValidationError, match='norm="l1-diag" is a single-head program'):
        joint_attention_svm(data, V, norm="l1-diag")


def test_zero_heads_are_refused_naming_select_or_values():
    """H = 0 reached torch.stack and raised RuntimeError: stack expects a non-empty TensorList."""
    data, _ = _data()
    with pytest.raises(ValidationError, match=r"select has no heads \(shape \(0, 4\)\).*H >= 1"):
        joint_attention_svm(data, select=torch.zeros(0, N, dtype=torch.int64))
    with pytest.raises(ValidationError, match=r"values has no heads \(shape \(0, 4\)\).*H >= 1"):
        joint_attention_svm(data, values=torch.zeros(0, D, dtype=torch.float64))
