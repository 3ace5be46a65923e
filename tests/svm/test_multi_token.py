"""The multi-token programs against an independent cvxpy formulation written here from the definitions (every
pair of the source's loop, the full d x d variable, no rescaling and no range bases), the closed-form least-norm
solution of the finite part, their own KKT conditions, and the refusals of degenerate selections.

Spec: multi-token §3-4.
"""

import warnings

import cvxpy as cp
import numpy as np
import pytest
import torch

import attnlab as al
from attnlab.data import TokenSelectionData
from attnlab.data.token_sets import as_token_sets, sets_from_probabilities
from attnlab.svm import InfeasibleProgramError, attention_svm
from attnlab.svm.multi_token import finite_part, set_direction_svm, svm_equivalence

# Clarabel at gap 1e-10: the two formulations' directions agree to ~1e-9; the issue's bar is cos >= 1 - 1e-6
COS_TOL = 1e-6


def _cos(a, b):
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def _reference(data, mask, norm, log_s=None):
    """The source's constraints, pair by pair (t1 < t2), on a plain (d, d) variable."""
    X, Z, d = data.X.numpy(), data.Z.numpy(), data.d
    W = cp.Variable((d, d))
    cons = []
    for i in range(data.n):
        for t1 in range(data.T):
            for t2 in range(t1 + 1, data.T):
                a, b = mask[i, t1], mask[i, t2]
                gap = (X[i, t2] - X[i, t1]) @ W @ Z[i]  # (x_t2 - x_t1)^T W z_i
                if log_s is not None:
                    if a and b:
                        cons.append(gap == log_s[i, t2] - log_s[i, t1])
                elif a and b:
                    cons.append(gap == 0)
                elif a:
                    cons.append(-gap >= 1)
                elif b:
                    cons.append(gap >= 1)
    cp.Problem(cp.Minimize(cp.norm(W, norm)), cons).solve(solver="CLARABEL")
    return W.value


def _sets_data(seed, n=3, T=4, d=5):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, T, d, generator=g, dtype=torch.float64)
    Z = torch.randn(n, d, generator=g, dtype=torch.float64)
    return TokenSelectionData(X, Z=Z, y=[1, -1, 1][:n])


def _assert_stationary(data, sol):
    """KKT stationarity of the Frobenius QP written out: W = sum lambda A - sum nu E."""
    X, Z = data.X.numpy(), data.Z.numpy()
    G = sum(
        lam * np.outer(X[i, tau] - X[i, t], Z[i]) for (i, tau, t), lam in zip(sol.pairs.tolist(), sol.duals.numpy())
    )
    G = G - sum(
        nu * np.outer(X[i, tau] - X[i, tau0], Z[i])
        for (i, tau0, tau), nu in zip(sol.equalities.tolist(), sol.equality_duals.numpy())
    )
    np.testing.assert_allclose(G, sol.W.numpy(), atol=1e-7)


SETS = [[0, 2], [1], [1, 2, 3]]


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_direction_program_agrees_with_a_plain_formulation_and_certifies_kkt(norm, seed):
    data = _sets_data(seed)
    sol = set_direction_svm(data, SETS, norm)
    mask = as_token_sets(SETS, 3, 4).numpy()
    assert _cos(sol.W, _reference(data, mask, norm)) >= 1 - COS_TOL
    assert sol.kkt_residual <= 1e-5 and sol.max_violation <= 1e-7
    assert sol.margin == pytest.approx(1.0, abs=1e-7)
    # KKT written out here for the Frobenius QP: W = sum lambda A - sum nu E, lambda >= 0, complementary
    if norm == "fro":
        _assert_stationary(data, sol)


def test_singleton_sets_give_the_attention_svm():
    data = _sets_data(3)
    select = [2, 0, 1]
    sol = set_direction_svm(data, [[s] for s in select])
    assert _cos(sol.W, attention_svm(data, select=select).W) >= 1 - 1e-9
    assert sol.equalities.shape == (0, 3)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_finite_part_agrees_with_a_plain_formulation_and_least_norm(norm):
    data = _sets_data(4)
    log_s = torch.log_softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64), -1)
    sol = finite_part(data, SETS, log_s, norm)
    mask = as_token_sets(SETS, 3, 4).numpy()
    assert _cos(sol.W, _reference(data, mask, norm, log_s.numpy())) >= 1 - COS_TOL
    assert sol.max_violation <= 1e-7 and sol.kkt_residual <= 1e-5
    if norm == "fro":  # closed form: the least-norm solution pinv(E) b of the equality system
        X, Z = data.X.numpy(), data.Z.numpy()
        E = np.array([np.outer(X[i, t] - X[i, s], Z[i]).ravel() for i, s, t in sol.equalities.tolist()])
        b = np.array([float(log_s[i, t] - log_s[i, s]) for i, s, t in sol.equalities.tolist()])
        np.testing.assert_allclose(sol.W.numpy().ravel(), np.linalg.pinv(E) @ b, atol=1e-8)


def test_scale_handling_matches_the_unscaled_solution():
    data = _sets_data(6)
    base = set_direction_svm(data, SETS)
    big = set_direction_svm(data.with_(X=data.X * 1e150, Z=data.Z * 1e-100), SETS)
    # W(a X, b Z) = W(X, Z) / (a b)
    np.testing.assert_allclose(big.W.numpy() * 1e50, base.W.numpy(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("norm", ["fro", "nuc"])
@pytest.mark.parametrize("scale", [1e-8, 3.0, 1e8])
def test_a_finite_part_of_zero_is_zero_at_any_data_scale(norm, scale):
    """Log-ratios all 0 make W_fin = 0; off unit scale this crashed in the scale-back (log10 of the norm 0)."""
    X = scale * torch.tensor([[[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]]], dtype=torch.float64)
    data = TokenSelectionData(X, Z=[[0.5, 1.0]], y=[1])
    fin = finite_part(data, [[0, 1]], torch.zeros(1, 3, dtype=torch.float64), norm)
    assert fin.norm_value == 0.0 and not fin.W.any() and fin.max_violation == 0.0
    eq = svm_equivalence(data, torch.zeros(2, 2, dtype=torch.float64), sets=[[0, 1]], norm=norm)
    assert not eq.finite.W.any() and eq.R == 0.0 and not eq.W.any()


def test_equivalence_direction_reproduces_a_saturated_softmax():
    """W = A + 200 W_dir: inside each set the softmax is A's, outside it below e^-150 (read off by the thresholds)."""
    data = _sets_data(10)
    A = 0.3 * torch.randn(5, 5, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    W = A + 200 * set_direction_svm(data, SETS).W
    eq = svm_equivalence(data, W)
    assert torch.equal(eq.sets, as_token_sets(SETS, 3, 4))
    logits = al.models.attention_logits(data.X, W, data.Z)
    fin = al.models.attention_logits(data.X, eq.finite.W, data.Z)
    for i in range(3):  # log-ratios inside each set are those of the trained softmax
        inside = torch.nonzero(eq.sets[i]).flatten()
        gaps = (logits[i, inside] - logits[i, inside[0]]) - (fin[i, inside] - fin[i, inside[0]])
        assert float(gaps.abs().max()) <= 1e-7
    R = float(((W - eq.finite.W) * eq.direction.W).sum() / (eq.direction.W**2).sum())
    assert eq.R == pytest.approx(R, rel=1e-12)
    assert 1 - _cos(eq.W, W) < 1 - _cos(eq.direction.W, W)


WHOLE = [[0, 2], [0, 1, 2, 3], [1, 2, 3]]  # sequence 1's set is its whole sequence: equalities only


def _scipy_direction(data, mask):
    """The Frobenius direction program with scipy's SLSQP on the plain (d, d) variable (a second solver, no cvxpy):
    every pair (tau in the set, t outside) of the source's loop, and equal logits inside each set written as
    differences to each token's predecessor in the set (the same feasible set as every pair, independent rows)."""
    from scipy.optimize import minimize

    X, Z, d = data.X.numpy(), data.Z.numpy(), data.d
    ineq, eq = [], []
    for i in range(data.n):
        inside, outside = np.flatnonzero(mask[i]), np.flatnonzero(~mask[i])
        ineq += [np.outer(X[i, tau] - X[i, t], Z[i]).ravel() for tau in inside for t in outside]
        eq += [np.outer(X[i, b] - X[i, a], Z[i]).ravel() for a, b in zip(inside[:-1], inside[1:])]
    A, E = np.array(ineq), np.array(eq)
    sol = minimize(
        lambda w: 0.5 * w @ w,
        np.zeros(d * d),
        jac=lambda w: w,
        constraints=[
            {"type": "ineq", "fun": lambda w: A @ w - 1, "jac": lambda w: A},
            {"type": "eq", "fun": lambda w: E @ w, "jac": lambda w: E},
        ],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert sol.success, sol.message
    return sol.x.reshape(d, d)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_whole_sequence_set_adds_equalities_only_against_scipy_and_kkt(seed):
    data = _sets_data(seed)
    with pytest.warns(al.svm.WholeSequenceWarning, match=r"sequences \[1\] hold the whole sequence"):
        sol = set_direction_svm(data, WHOLE)
    mask = as_token_sets(WHOLE, 3, 4).numpy()
    assert mask[1].all()
    # a second solver (scipy, no cvxpy) and the plain cvxpy formulation of every pair
    assert _cos(sol.W, _scipy_direction(data, mask)) >= 1 - COS_TOL
    assert _cos(sol.W, _reference(data, mask, "fro")) >= 1 - COS_TOL
    # sequence 1 has no margin row, three equality rows; every one of its logits is equal under W
    assert not (sol.pairs[:, 0] == 1).any() and int((sol.equalities[:, 0] == 1).sum()) == 3
    logits = al.models.attention_logits(data.X, sol.W, data.Z)
    assert float((logits[1] - logits[1, 0]).abs().max()) <= 1e-7
    assert sol.margin == pytest.approx(1.0, abs=1e-7) and sol.kkt_residual <= 1e-5
    # KKT written out: W = sum lambda A - sum nu E, lambda >= 0, lambda_k > 0 only on margins at 1
    _assert_stationary(data, sol)
    X, Z = data.X.numpy(), data.Z.numpy()
    margins = np.array([(X[i, tau] - X[i, t]) @ sol.W.numpy() @ Z[i] for i, tau, t in sol.pairs.tolist()])
    assert (sol.duals.numpy() >= 0).all() and float(np.max(sol.duals.numpy() * (margins - 1))) <= 1e-7


def test_a_whole_sequence_set_under_the_nuclear_norm_and_in_the_finite_part():
    data = _sets_data(3)
    mask = as_token_sets(WHOLE, 3, 4).numpy()
    with pytest.warns(al.svm.WholeSequenceWarning):
        nuc = set_direction_svm(data, WHOLE, "nuc")
    assert _cos(nuc.W, _reference(data, mask, "nuc")) >= 1 - COS_TOL
    log_s = torch.log_softmax(torch.randn(3, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64), -1)
    with pytest.warns(al.svm.WholeSequenceWarning, match=r"finite part.*sequences \[1\]"):
        fin = finite_part(data, WHOLE, log_s)
    X, Z = data.X.numpy(), data.Z.numpy()  # closed form: the least-norm solution pinv(E) b
    E = np.array([np.outer(X[i, t] - X[i, s], Z[i]).ravel() for i, s, t in fin.equalities.tolist()])
    b = np.array([float(log_s[i, t] - log_s[i, s]) for i, s, t in fin.equalities.tolist()])
    np.testing.assert_allclose(fin.W.numpy().ravel(), np.linalg.pinv(E) @ b, atol=1e-8)
    gaps = al.models.attention_logits(data.X, fin.W, data.Z)[1] - log_s[1]  # every gap of the whole sequence
    assert float((gaps - gaps[0]).abs().max()) <= 1e-7


def test_the_equivalence_direction_accepts_a_whole_sequence_set_and_warns_once():
    """W = A + 200 W_dir with sequence 1 whole: its softmax is A's (every token above 1e-3), the others saturate."""
    data = _sets_data(10)
    A = 0.3 * torch.randn(5, 5, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    with pytest.warns(al.svm.WholeSequenceWarning):
        W = A + 200 * set_direction_svm(data, WHOLE).W
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        eq = svm_equivalence(data, W)
    assert [str(w.message).split(":")[0] for w in caught] == ["SVM-equivalence"]
    assert torch.equal(eq.sets, as_token_sets(WHOLE, 3, 4))
    R = float(((W - eq.finite.W) * eq.direction.W).sum() / (eq.direction.W**2).sum())
    assert eq.R == pytest.approx(R, rel=1e-12)
    assert 1 - _cos(eq.W, W) < 1 - _cos(eq.direction.W, W)
    gaps = al.models.attention_logits(data.X, W - eq.finite.W, data.Z)[1]  # the whole sequence's every logit gap
    assert float((gaps - gaps[0]).abs().max()) <= 1e-7


def test_sets_of_every_whole_sequence_leave_no_margin_and_are_refused():
    data = _sets_data(8)
    with pytest.raises(al.ValidationError, match=r"sequences \[0, 1, 2\] \(every sequence\) hold the whole"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # refused before any warning
            set_direction_svm(data, np.ones((3, 4), dtype=bool))
    with pytest.raises(al.ValidationError, match=r"SVM-equivalence: the token sets of sequences \[0, 1, 2\]"):
        svm_equivalence(data, torch.eye(5, dtype=torch.float64), np.ones((3, 4), dtype=bool))
    fin = finite_part(data, [[0], [1], [2]], torch.zeros(3, 4, dtype=torch.float64))  # singletons: no equality
    assert float(fin.W.abs().max()) == 0.0
    with pytest.raises(al.ValidationError, match=r"sequences \[0, 1\] \(every sequence\)"):
        sets_from_probabilities([[0.25] * 4, [0.4, 0.3, 0.2, 0.1]])


def test_probability_rows_are_validated():
    assert sets_from_probabilities([[0.5, 0.5, 0, 0], [0.25] * 4]).tolist() == [[True, True, False, False], [True] * 4]
    with pytest.raises(al.ValidationError, match=r"sequences \[0\] do not sum to 1 \(sums \[1.8\]"):
        sets_from_probabilities([[0.9, 0.9, 0.0], [1.0, 0.0, 0.0]])
    with pytest.raises(al.ValidationError, match=r"sequences \[1\] have negative entries"):
        sets_from_probabilities([[1.0, 0.0, 0.0], [1.1, -0.1, 0.0]])
    # float32 softmax rows (sums off by ~1e-7) are distributions
    s32 = torch.softmax(torch.tensor([[30.0, 0.1, -30.0], [-30.0, 28.0, 29.0]]), -1)
    assert sets_from_probabilities(s32).tolist() == [[True, False, False], [False, True, True]]


def test_degenerate_selections_are_refused_naming_the_sequence():
    data = _sets_data(8)
    with pytest.raises(al.ValidationError, match=r"sequences \[2\] have softmax probabilities in \(1e-06, 0.001\]"):
        sets_from_probabilities([[0.5, 0.5, 0, 0], [1, 0, 0, 0], [0.9, 0.0995, 5e-4, 0]])
    with pytest.raises(al.ValidationError, match=r"sequences \[0\] are empty"):
        set_direction_svm(data, np.array([[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]], dtype=bool))
    tied = data.X.clone()
    tied[1, 3] = tied[1, 0]  # token 3 of sequence 1 equals token 0: a tie across the set's boundary
    with pytest.raises(InfeasibleProgramError, match=r"sequence i=1: tau=0 in the set, t=3 outside.*tie"):
        set_direction_svm(data.with_(X=tied), [[0], [0], [1]])
    with pytest.raises(al.ValidationError, match="norm"):
        set_direction_svm(data, SETS, norm=1.5)


def test_contradicting_sets_are_infeasible():
    """Two sequences with the same tokens and query ask for opposite sets: no W."""
    g = torch.Generator().manual_seed(9)
    X1 = torch.randn(1, 3, 4, generator=g, dtype=torch.float64)
    Z1 = torch.randn(1, 4, generator=g, dtype=torch.float64)
    data = TokenSelectionData(X1.repeat(2, 1, 1), Z=Z1.repeat(2, 1), y=[1, -1])
    with pytest.raises(InfeasibleProgramError, match="infeasible"):
        set_direction_svm(data, [[0, 1], [2]])


def test_select_accepts_sets_wherever_it_accepts_tokens(tmp_path):
    data = _sets_data(12)
    direct = set_direction_svm(data, SETS, "nuc")
    via_svm = attention_svm(data, "nuc", select=SETS)  # select= as lists of indices
    stored = data.with_(select=as_token_sets(SETS, 3, 4))  # select= as the mask, stored in the data
    data_path = stored.save(tmp_path / "sets.npz")
    loaded = TokenSelectionData.load(data_path)
    assert torch.equal(loaded.select, stored.select) and loaded.select.dtype == torch.bool
    from_data = attention_svm(loaded, "nuc")
    for sol in (via_svm, from_data):
        assert _cos(sol.W, direct.W) >= 1 - 1e-9
    with pytest.raises(al.ValidationError, match="takes one selected token per sequence.*token sets"):
        al.svm.diagonal_svm(loaded, 1.0)


def _notebook_runs(d, runs=10, chunk=200):
    """The TF-as-SVM notebook's setting built with our own code (we do not have its data): n = 3, T = 4, unit
    tokens and queries, a ReLU head, W_0 ~ U(-1/sqrt d, 1/sqrt d), 2000 steps of NGD at lr 0.1 on the logistic
    loss; the first ``runs`` draws its acceptance rule keeps (labels not all +1, nothing in (1e-6, 1e-3], something
    at or below 1e-6), with their trained W."""
    from attnlab.batched import train
    from attnlab.data import multi_token
    from attnlab.models import ReluHead

    kept, start = [], 1
    while len(kept) < runs:
        seeds = range(start, start + chunk)
        start += chunk
        draws = [multi_token(3, 4, d, seed=s) for s in seeds]
        X, Z, y = (torch.stack([getattr(dr.data, k) for dr in draws]) for k in "XZy")
        W0 = torch.stack(
            [
                (2 * torch.rand(d, d, generator=torch.Generator().manual_seed(10**6 + s), dtype=torch.float64) - 1)
                / d**0.5
                for s in seeds
            ]
        )
        head = ReluHead(torch.stack([dr.V for dr in draws]), torch.stack([dr.v for dr in draws]))
        W = train(X, Z, y, head, W0=W0, optimizer="ngd", lr=0.1, loss="logistic", steps=2000).W
        s = torch.softmax(al.models.attention_logits(X, W, Z), dim=-1)
        between = ((s > 1e-6) & (s <= 1e-3)).flatten(1).any(1)
        dropped = (s <= 1e-6).flatten(1).any(1)
        accepted = ~(y == 1).all(1) & ~between & dropped
        kept += [(draws[r].data, W[r]) for r in torch.nonzero(accepted).flatten().tolist()]
    return kept[:runs]


def test_every_run_the_notebooks_rule_accepts_is_solved():
    """On main before whole-sequence sets were accepted, 20 of these 40 runs were refused (each had a set equal to
    its whole sequence); the issue counted 28 of the notebook's own 40. Dropping those sequences instead is another
    program: its direction is farther from the trained W in most of them."""
    whole, closer, moved = {}, 0, 0.0
    for d in (4, 6, 8, 10):
        whole[d] = 0
        for data, W in _notebook_runs(d):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                eq = svm_equivalence(data, W)  # sets read off the final softmax at (1e-6, 1e-3]
            named = [w for w in caught if issubclass(w.category, al.svm.WholeSequenceWarning)]
            full = eq.sets.all(dim=1)
            assert bool(named) == bool(full.any())  # warned exactly when a set is its whole sequence
            assert eq.direction.kkt_residual <= 1e-5 and eq.finite.kkt_residual <= 1e-5
            assert eq.direction.margin == pytest.approx(1.0, abs=1e-6)
            gaps = al.models.attention_logits(data.X, W - eq.finite.W, data.Z)  # W_fin reproduces W's set gaps
            for i in range(data.n):
                inside = gaps[i, eq.sets[i]]
                assert float((inside - inside[0]).abs().max()) <= 1e-6
            if full.any():
                whole[d] += 1
                kept = ~full  # the sequences with a margin constraint only
                rest = TokenSelectionData(data.X[kept], Z=data.Z[kept], y=data.y[kept])
                dropped = set_direction_svm(rest, eq.sets[kept]).W
                moved = max(moved, 1 - _cos(eq.direction.W, dropped))
                closer += 1 - _cos(W, eq.direction.W) < 1 - _cos(W, dropped)
    assert whole == {4: 3, 6: 7, 8: 4, 10: 6}  # the seeds are fixed: which runs have a whole-sequence set
    assert moved == pytest.approx(0.48, abs=0.01) and closer == 18  # docs/theory/multi-token.md §2 quotes both


def test_a_bad_set_is_named_by_the_argument_the_caller_passed():
    with pytest.raises(al.ValidationError, match=r"sets\[1\] = \[7\] must hold token indices in \[0, 3\]"):
        set_direction_svm(_sets_data(8), [[0], [7], [1]])
    with pytest.raises(al.ValidationError, match=r"select\[1\] = \[7\]"):
        as_token_sets([[0], [7], [1]], 3, 4)
