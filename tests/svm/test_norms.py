"""The norms of the programs as typed objects: a made-up norm, one Norm entry, works through attention_svm (against
scipy's linprog on the same LP) and the command line; parsing happens once, at the boundary.

Spec: kq-nuclear-norm §4 (the subgradient test of a norm), steepest-descent §3 (an LP and its dual norm).
"""

import cvxpy as cp
import numpy as np
import pytest
from click.testing import CliRunner
from scipy.optimize import linprog

from attnlab._validation import ValidationError
from attnlab.cli import main
from attnlab.data import example1
from attnlab.svm import attention_svm
from attnlab.svm._program import attention_constraint_vectors, constraint_matrices
from attnlab.svm.norms import FRO, NORMS, Norm, as_norm, lp, register_norm

D = 4
WEIGHTS = np.arange(1.0, D * D + 1).reshape(D, D) / 4  # entry (j, k) costs (4 j + k + 1) / 4


def weighted_l1() -> Norm:
    """The made-up norm: sum_jk w_jk |W_jk| (an LP), its dual max_jk |G_jk| / w_jk; nothing else is written."""
    return Norm(
        name="weighted-l1",
        objective=lambda x: cp.Minimize(cp.sum(cp.multiply(WEIGHTS, cp.abs(x)))),
        value=lambda x: float(np.sum(WEIGHTS * np.abs(x))),
        dual=lambda g: float(np.max(np.abs(g) / WEIGHTS)),
    )


@pytest.fixture
def registered():
    norm = register_norm(weighted_l1())
    yield norm
    NORMS.pop(norm.name)


@pytest.fixture(scope="module")
def data():
    return example1(n=3, T=3, d=D, seed=0)


def linprog_value(data):
    """min w . (P + N) s.t. M (P - N) >= 1, P, N >= 0: the same program written for scipy's HiGHS."""
    select = data.optimal_tokens()
    _, diff, queries = attention_constraint_vectors(data, select)
    M = constraint_matrices(diff, queries).reshape(len(diff), -1)
    w = WEIGHTS.reshape(-1)
    out = linprog(np.concatenate([w, w]), A_ub=-np.hstack([M, -M]), b_ub=-np.ones(len(M)), bounds=(0, None))
    assert out.status == 0
    return out.fun


def test_a_made_up_norm_is_one_entry_and_works_through_attention_svm(data, registered):
    for norm in (registered, "weighted-l1", weighted_l1()):  # the object, its registered name, an unregistered copy
        sol = attention_svm(data, norm)
        assert sol.norm == "weighted-l1" and sol.margin == pytest.approx(1.0, abs=1e-7)
        # the LP's optimal value is unique (its solution need not be): HiGHS and Clarabel agree to their accuracy
        assert sol.norm_value == pytest.approx(linprog_value(data), rel=1e-7)
        assert sol.kkt_residual <= 1e-5  # the default test: sum lambda A is a subgradient (dual <= 1, pairing)


def test_the_subgradient_test_of_a_made_up_norm_goes_red_on_a_wrong_answer(data, registered):
    sol = attention_svm(data, registered)
    X, Z = data.X.numpy(), data.Z.numpy()
    # G = sum_it lambda_it (x_{i,sel_i} - x_it) z_i^T from the result's multipliers on the (n, T) grid
    G = sum(
        float(sol.duals[i, t]) * np.outer(X[i, int(sol.select[i])] - X[i, t], Z[i])
        for i in range(data.n)
        for t in range(data.T)
    )
    W = sol.W.numpy()
    assert registered.stationarity(W, G) <= 1e-5
    assert registered.stationarity(W, 1.5 * G) > 0.4  # a wrong multiplier scale: the dual norm is 1.5
    assert registered.stationarity(-W, G) > 1.0  # the wrong sign: <g, x> = -||x||


def test_the_command_line_takes_a_registered_norm_by_name(tmp_path, data, registered):
    src, out = tmp_path / "d.npz", tmp_path / "w.npz"
    data.save(src)
    ran = CliRunner().invoke(main, ["svm", str(src), "--norm", "weighted-l1", "--out", str(out)])
    assert ran.exit_code == 0, ran.output
    assert float(np.load(out)["norm_value"]) == pytest.approx(linprog_value(data), rel=1e-7)


def test_norms_are_parsed_once_into_one_object():
    assert as_norm("fro") is FRO and as_norm(1.5) is lp(1.5) and as_norm(lp(3.0)) is lp(3.0)
    assert as_norm(float("inf")).label == float("inf") and as_norm(1).label == 1.0
    with pytest.raises(ValidationError, match=r'norm must be "fro", "nuc", "l1-diag" or a float p >= 1, got .l2.'):
        as_norm("l2")
    with pytest.raises(ValidationError, match="p == 1.0005 is too close to 1"):
        as_norm(1.0005)
    with pytest.raises(ValidationError, match="registered already"):
        register_norm(FRO)
