"""Support tokens, local and global optimality (Definition 3) on hand-made cases, their enumeration, separability.

Spec: mirror-descent-lp §5 (Definition 3), §7; kq-nuclear-norm §5 (A1).
"""

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.svm import (
    InfeasibleProgramError,
    SolverToleranceError,
    attention_svm,
    is_globally_optimal,
    is_locally_optimal,
    is_separable,
    locally_optimal_selections,
    support_tokens,
)
from attnlab.svm import _program as program


@pytest.fixture
def trap():
    """One sequence, z = e_1: margins (x_0 - x_t)^T u with u = W z. Scores gamma = (0, -1, 2) with v = (1, 5).

    Selecting token 0: the SVM is u = (1, 0); token 1 is its only support token (margin 1), token 2 sits at
    margin 3. Token 1 scores below token 0, so alpha = (0) is locally optimal, yet token 2 is the optimal token.
    Selecting token 1: both constraints are active (u = (-1, -3)) and token 0 scores above token 1: not locally
    optimal.
    """
    X = torch.tensor([[[0.0, 0.0], [-1.0, 0.0], [-3.0, 1.0]]])
    return TokenSelectionData(X, Z=[[1.0, 0.0]], y=[1], v=[1.0, 5.0])


def test_support_tokens_of_the_hand_made_case(trap):
    assert support_tokens(trap, [0]) == ((0, 1),)
    assert support_tokens(trap, [1]) == ((0, 0), (0, 2))
    np.testing.assert_allclose(attention_svm(trap, select=[0]).W.numpy(), [[1.0, 0.0], [0.0, 0.0]], atol=1e-7)


def test_locally_but_not_globally_optimal_selection(trap):
    local = is_locally_optimal(trap, [0])
    assert local.holds and local.measured == pytest.approx(1.0)  # gamma_0 - gamma_1 = 0 - (-1)
    assert local.svm.support == ((0, 1),) and local.select.tolist() == [0]
    glob = is_globally_optimal(trap, [0])
    assert not glob.holds and glob.measured == pytest.approx(-2.0)  # gamma_0 - gamma_2
    assert is_globally_optimal(trap).holds  # default: the optimal tokens


def test_selection_with_a_better_support_token_is_not_locally_optimal(trap):
    report = is_locally_optimal(trap, [1])
    assert not report.holds and report.measured == pytest.approx(-3.0)  # gamma_1 - gamma_2 = -1 - 2
    assert "[(0, 0), (0, 2)]" in report.detail  # both support tokens score above the selected one


def test_enumeration_finds_the_global_and_the_local_selection(trap):
    found = locally_optimal_selections(trap, p=2.0)
    assert [r.select.tolist() for r in found] == [[2], [0]]  # sorted by total score, globally optimal first
    assert all(r.holds for r in found)


def test_enumeration_skips_infeasible_selections(trap):
    X = trap.X.clone()
    X[0, 1] = X[0, 0]  # tokens 0 and 1 equal: neither can be selected
    found = locally_optimal_selections(trap.with_(X=X))
    assert [r.select.tolist() for r in found] == [[2]]


def test_neighbourhood_when_exhaustive_search_is_too_large(make_data):
    data = make_data(3, n=5, T=3, d=4)  # 3^5 = 243 selections
    found = locally_optimal_selections(data, max_candidates=4)
    opt = data.optimal_tokens().tolist()
    assert found and found[0].select.tolist() == opt  # the optimal selection is always a candidate


def test_the_budget_takes_the_selections_of_least_score_loss_changes_in_several_sequences_included(make_data):
    import itertools

    from attnlab.svm.selection import _candidates

    scores = make_data(3, n=5, T=3, d=4).token_scores()
    every = sorted(
        (float((scores.max(dim=1).values - scores[torch.arange(5), list(c)]).sum()), c)
        for c in itertools.product(range(3), repeat=5)
    )  # brute force over all 243 selections
    picked = _candidates(scores, 40)
    losses = sorted(float((scores.max(dim=1).values - scores[torch.arange(5), c]).sum()) for c in picked)
    assert losses == pytest.approx([loss for loss, _ in every[:40]], abs=1e-12)
    opt = scores.argmax(dim=1).tolist()
    assert max(sum(a != b for a, b in zip(c, opt)) for c in picked) >= 2  # not only one-sequence changes


def test_included_selections_are_always_tried(make_data):
    data = make_data(3, n=5, T=3, d=4)
    found = locally_optimal_selections(data, max_candidates=1, include=[[1, 1, 1, 1, 1], data.optimal_tokens()])
    tried = {tuple(r.select.tolist()) for r in found}
    assert tuple(data.optimal_tokens().tolist()) in tried


def test_globally_optimal_selection_is_locally_optimal(any_data):
    """Definition 3: at alpha = opt every support token scores below the optimal one (unique opt)."""
    assert is_locally_optimal(any_data).holds
    assert is_locally_optimal(any_data, p=1.5).holds


def test_is_locally_optimal_raises_on_infeasible_selection(trap):
    X = trap.X.clone()
    X[0, 1] = X[0, 0]
    with pytest.raises(InfeasibleProgramError, match="infeasible"):
        is_locally_optimal(trap.with_(X=X), [0])


def test_separable_margin_is_inverse_frobenius_norm(any_data):
    # measured is the margin of the data at unit scale (largest |x_sel - x_t| and largest |z| equal to 1)
    select = attention_svm(any_data, "fro").select
    rows = torch.arange(any_data.n)
    diff = any_data.X[rows, select][:, None, :] - any_data.X  # (n, T, d), zero rows at the selected tokens
    a, b = float(diff.abs().max()), float(any_data.Z.abs().max())
    unit = any_data.with_(X=any_data.X / a, Z=any_data.Z / b)
    report = is_separable(any_data)
    assert report.holds and report.threshold == 1e-8
    # 1e-6: the conic solver's accuracy on the unit-norm margin program
    assert report.measured == pytest.approx(1 / attention_svm(unit, "fro", select=select).norm_value, rel=1e-6)


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1e-20])
def test_separability_does_not_depend_on_scale(any_data, scale):
    scaled = any_data.with_(X=any_data.X * scale, Z=any_data.Z * scale)
    report, reference = is_separable(scaled), is_separable(any_data)
    assert report.holds == reference.holds
    assert report.measured == pytest.approx(reference.measured, rel=1e-6)  # 1e-6: two conic solves


def test_contradictory_data_are_not_separable():
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    data = TokenSelectionData(X, Z=[[1.0, 1.0], [1.0, 1.0]], y=[1, 1], select=[0, 1])
    report = is_separable(data)
    assert not report.holds and report.measured <= 1e-8  # best unit-norm margin is 0


def _rows_over_seven_decades(seed: int) -> TokenSelectionData:
    """12 sequences of 2 tokens whose differences span 1e-7..1: SCS stops ``optimal_inaccurate`` on these."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((12, 2, 3)) * 10.0 ** rng.uniform(-7, 0, size=(12, 1, 1))
    return TokenSelectionData(torch.tensor(X), rng.standard_normal((12, 3)), np.ones(12), select=np.zeros(12, int))


@pytest.mark.parametrize("seed", [3, 11])  # separable data that SCS's inaccurate stop called "not separable"
def test_separability_verdict_is_certified_against_an_exact_lp(seed):
    from scipy.optimize import linprog

    data = _rows_over_seven_decades(seed)
    rows = torch.arange(data.n)
    diff = (data.X[rows, 0] - data.X[:, 1]).numpy()  # (n, d): the one constraint of each sequence
    M = (diff[:, :, None] * data.Z.numpy()[:, None, :]).reshape(data.n, -1)  # <A_i, W> = M_i vec(W)
    lp = linprog(np.zeros(M.shape[1]), A_ub=-M, b_ub=-np.ones(data.n), bounds=(None, None), method="highs")
    assert lp.status in (0, 2)  # the second solver: feasible (separable) or infeasible
    # unit scale as is_separable reads it: the LP's point bounds the unit-norm margin from below
    unit = 1 / (np.abs(diff).max() * np.abs(data.Z.numpy()).max())
    separable = lp.status == 0 and 1 / (np.linalg.norm(lp.x) * unit) > 1e-8
    assert separable
    for solver in ("SCS", "CLARABEL"):
        assert is_separable(data, solver=solver).holds == separable


@pytest.mark.parametrize("bad_solves", [1, 2])
def test_an_uncertified_inaccurate_margin_is_solved_again_or_refused(monkeypatch, bad_solves):
    # a solver that stops "optimal_inaccurate" at a point claiming margin 1e-3 on contradictory data (true margin 0)
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    data = TokenSelectionData(X, Z=[[1.0, 1.0], [1.0, 1.0]], y=[1, 1], select=[0, 1])
    real, calls = program.run_solver, []

    def inaccurate(problem, solver, *, what):
        calls.append(solver)
        if len(calls) > bad_solves:
            return real(problem, solver, what=what)
        for variable in problem.variables():
            variable.value = np.full(variable.shape, 1e-3)  # w = (1e-3, ...), t = 1e-3: w's own margin is 0
        for constraint in problem.constraints:
            constraint.dual_variables[0].value = np.zeros(constraint.shape)
        problem._status = "optimal_inaccurate"
        return problem.status

    monkeypatch.setattr(program, "run_solver", inaccurate)
    if bad_solves == 2:  # neither solver's verdict is certified: refused, never a guess
        with pytest.raises(SolverToleranceError, match="do not certify a verdict"):
            is_separable(data, solver="SCS")
        return
    report = is_separable(data, solver="SCS")
    assert calls == ["SCS", "CLARABEL"] and not report.holds and report.measured <= 1e-8


def test_separability_needs_a_unique_optimal_token():
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.0, -1.0]]])
    data = TokenSelectionData(X, Z=[[1.0, 1.0]], y=[1], v=[1.0, 1.0])  # gamma = (1, 1, -1): a tie
    report = is_separable(data)
    assert not report.holds and "not unique in sequences [0]" in report.detail


def test_bad_max_candidates_is_named(trap):
    with pytest.raises(ValidationError, match="max_candidates == 0, must be >= 1"):
        locally_optimal_selections(trap, max_candidates=0)
