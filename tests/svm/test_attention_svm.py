"""The attention SVM against independent truths: KKT conditions written out here from the specs, the Frobenius
dual in closed form, an explicit LP (scipy linprog), a second solver and SLSQP, and norm comparisons.

Spec: implicit-bias-ngd §5, mirror-descent-lp §5, kq-nuclear-norm §4.
"""

import dataclasses

import numpy as np
import pytest
import torch
from scipy.optimize import linprog, minimize

import attnlab.svm._program as program
from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData, example1
from attnlab.svm import InfeasibleProgramError, SolverAccuracyWarning, TieWarning, attention_svm, norms
from attnlab.svm.norms import as_norm

# Clarabel runs at gap 1e-10; solutions and multipliers of these well-conditioned small programs agree to ~1e-7,
# so 1e-6 separates solver noise from any real error (a wrong sign or a wrong constraint moves things by O(1)).
TOL = 1e-6


def multipliers(sol, pairs):
    """The duals of the result in the order of ``pairs``."""
    return np.array([float(sol.duals[i, t]) for i, t in pairs])


def assert_primal_feasible_and_complementary(sol, A, lam):
    margins = np.einsum("kab,ab->k", A, sol.W.numpy())  # <A_it, W>, computed here, not read from the result
    assert margins.min() >= 1 - TOL  # spec §5: (x_sel - x_t)^T W z >= 1
    assert np.all(lam >= 0)
    assert np.max(lam * np.abs(margins - 1)) <= TOL * max(1.0, lam.max())  # complementary slackness
    assert sol.margin == pytest.approx(margins.min(), abs=1e-12)


# --- the Frobenius program --------------------------------------------------------------------------------------


def test_frobenius_kkt_w_equals_sum_of_multipliers_times_constraints(any_data, constraints):
    sol = attention_svm(any_data, "fro")
    pairs, A = constraints(any_data, any_data.optimal_tokens())
    lam = multipliers(sol, pairs)
    assert_primal_feasible_and_complementary(sol, A, lam)
    assert np.abs(sol.W.numpy() - np.einsum("k,kab->ab", lam, A)).max() <= TOL  # spec §5: W = sum lambda A
    assert sol.norm_value**2 == pytest.approx(lam.sum(), rel=TOL)  # strong duality: ||W||^2 = <W, sum lambda A>


def test_frobenius_primal_equals_closed_form_on_its_support(any_data, constraints):
    """Given the active set S, the dual optimum is lambda_S = G_SS^{-1} 1 (G = Gram of the A's): a closed form."""
    sol = attention_svm(any_data, "fro")
    pairs, A = constraints(any_data, any_data.optimal_tokens())
    S = [k for k, pair in enumerate(pairs) if pair in sol.support]
    flat = A.reshape(len(pairs), -1)
    gram = flat[S] @ flat[S].T
    lam_S = np.linalg.solve(gram, np.ones(len(S)))  # spec §5 dual: stationarity with all support margins = 1
    W_closed = (lam_S @ flat[S]).reshape(A.shape[1:])
    assert np.all(lam_S >= -TOL)  # a true optimum: the multipliers of its support are non-negative
    assert np.einsum("kab,ab->k", A, W_closed).min() >= 1 - TOL  # and the closed form is feasible
    np.testing.assert_allclose(sol.W.numpy(), W_closed, atol=TOL)


def test_frobenius_dual_method_matches_cvxpy_primal(any_data):
    primal = attention_svm(any_data, "fro")
    dual = attention_svm(any_data, "fro", method="dual")
    assert dual.solver == "NNLS" and dual.status == "optimal"
    np.testing.assert_allclose(dual.W.numpy(), primal.W.numpy(), atol=TOL)
    np.testing.assert_allclose(dual.duals.numpy(), primal.duals.numpy(), atol=1e-5)  # multipliers: less accurate
    assert dual.support == primal.support
    assert dual.kkt_residual <= 1e-10  # NNLS is exact up to round-off


def test_entrywise_p2_equals_frobenius(data):
    np.testing.assert_allclose(attention_svm(data, 2.0).W.numpy(), attention_svm(data, "fro").W.numpy(), atol=TOL)


# --- nuclear norm --------------------------------------------------------------------------------------------------


def test_nuclear_kkt_sum_of_multipliers_is_a_subgradient(any_data, constraints):
    sol = attention_svm(any_data, "nuc")
    pairs, A = constraints(any_data, any_data.optimal_tokens())
    lam = multipliers(sol, pairs)
    assert_primal_feasible_and_complementary(sol, A, lam)
    G = np.einsum("k,kab->ab", lam, A)
    nuclear = np.linalg.svd(sol.W.numpy(), compute_uv=False).sum()
    assert np.linalg.norm(G, 2) <= 1 + TOL  # G in the dual-norm unit ball
    assert np.sum(G * sol.W.numpy()) == pytest.approx(nuclear, rel=TOL)  # <G, W> = ||W||_*
    assert nuclear == pytest.approx(lam.sum(), rel=TOL)  # strong duality
    assert sol.norm_value == pytest.approx(nuclear, rel=1e-12)


def test_nuclear_and_frobenius_solutions_each_win_their_own_norm(any_data):
    nuc, fro = attention_svm(any_data, "nuc").W.numpy(), attention_svm(any_data, "fro").W.numpy()

    def nuclear(W):
        return np.linalg.svd(W, compute_uv=False).sum()

    assert nuclear(nuc) <= nuclear(fro) + TOL
    assert np.linalg.norm(fro) <= np.linalg.norm(nuc) + TOL


def test_nuclear_scs_agrees_with_clarabel(data):
    a, b = attention_svm(data, "nuc"), attention_svm(data, "nuc", solver="SCS")
    assert b.solver == "SCS"
    assert a.norm_value == pytest.approx(b.norm_value, rel=1e-6)  # the SDP optimum; SCS at eps 1e-9


# --- entrywise l_p ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_lp_kkt_grad_psi_equals_sum_of_multipliers(any_data, constraints, p):
    sol = attention_svm(any_data, p)
    pairs, A = constraints(any_data, any_data.optimal_tokens())
    lam = multipliers(sol, pairs)
    assert_primal_feasible_and_complementary(sol, A, lam)
    W = sol.W.numpy()
    G = np.einsum("k,kab->ab", lam, A)
    # mirror-descent-lp §5 KKT grad psi(W) = G, compared where the map is Lipschitz: |W|^(p-1) has an infinite slope
    # at 0 for p < 2, so there we compare W with grad psi^{-1}(G) = sign(G) |G|^(1/(p-1)) instead. 1e-5 relative:
    # the power-cone form is the least accurate program (residuals ~1e-6 at Clarabel's tolerances).
    if p < 2:
        assert np.abs(W - np.sign(G) * np.abs(G) ** (1 / (p - 1))).max() <= 1e-5 * np.abs(W).max()
    else:
        grad_psi = np.sign(W) * np.abs(W) ** (p - 1)  # mirror-descent-lp §3
        assert np.abs(grad_psi - G).max() <= 1e-5 * np.abs(grad_psi).max()
    assert np.sum(np.abs(W) ** p) == pytest.approx(lam.sum(), rel=1e-5)  # <grad psi(W), W> = ||W||_p^p


@pytest.mark.parametrize("p", [1.5, 3.0])
def test_lp_scs_agrees_with_clarabel(data, p):
    a, b = attention_svm(data, p), attention_svm(data, p, solver="SCS")
    np.testing.assert_allclose(a.W.numpy(), b.W.numpy(), atol=1e-5)  # unique minimiser for 1 < p < inf


def test_lp_agrees_with_slsqp_on_psi(data, constraints):
    """mirror-descent-lp §5 fallback: SLSQP on 1/p ||W||_p^p (smooth for p = 3), from the Frobenius solution."""
    p = 3.0
    pairs, A = constraints(data, data.optimal_tokens())
    flat = A.reshape(len(pairs), -1)
    start = attention_svm(data, "fro").W.numpy().reshape(-1)
    res = minimize(
        lambda w: np.sum(np.abs(w) ** p) / p,
        start,
        jac=lambda w: np.sign(w) * np.abs(w) ** (p - 1),
        constraints=[{"type": "ineq", "fun": lambda w: flat @ w - 1, "jac": lambda w: flat}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    assert res.success
    # SLSQP stops on a relative objective change; 1e-5 on entries of order 0.1-1 is what it reaches
    np.testing.assert_allclose(attention_svm(data, p).W.numpy(), res.x.reshape(A.shape[1:]), atol=1e-5)


def test_l1_program_agrees_with_explicit_lp(any_data, constraints):
    """kq-nuclear-norm §4: the LP with W = W+ - W-, min 1^T (W+ + W-), solved by HiGHS, has cvxpy's optimum."""
    pairs, A = constraints(any_data, any_data.optimal_tokens())
    flat = A.reshape(len(pairs), -1)
    k = flat.shape[1]
    lp = linprog(np.ones(2 * k), A_ub=-np.hstack([flat, -flat]), b_ub=-np.ones(len(pairs)), bounds=(0, None))
    assert lp.status == 0
    sol = attention_svm(any_data, 1.0)
    assert sol.norm_value == pytest.approx(lp.fun, rel=TOL)
    assert np.abs(sol.W.numpy()).sum() == pytest.approx(lp.fun, rel=TOL)


def test_l1_kkt_subgradient(any_data, constraints):
    sol = attention_svm(any_data, 1.0)
    pairs, A = constraints(any_data, any_data.optimal_tokens())
    lam = multipliers(sol, pairs)
    assert_primal_feasible_and_complementary(sol, A, lam)
    W, G = sol.W.numpy(), np.einsum("k,kab->ab", lam, A)
    on = np.abs(W) > 1e-6 * np.abs(W).max()  # interior-point zeros are ~1e-10
    assert np.abs(G[on] - np.sign(W[on])).max() <= TOL  # G_jk = sign W_jk on the support
    assert np.abs(G[~on]).max(initial=0) <= 1 + TOL  # |G_jk| <= 1 off it


# --- diagonal l1 program -----------------------------------------------------------------------------------------


def diagonal_data(seed):
    """kq-nuclear-norm §6 style: d > n (L - 1) so that the diagonal program is feasible and l1 != l2."""
    g = torch.Generator().manual_seed(seed)
    n, T, d = 2, 3, 6
    return TokenSelectionData(torch.randn(n, T, d, generator=g), torch.randn(n, d, generator=g), [1, -1], select=[0, 0])


@pytest.mark.parametrize("seed", [0, 1])
def test_l1_diag_kkt_a_b_c(seed):
    data = diagonal_data(seed)
    sol = attention_svm(data, "l1-diag")
    X, Z = data.X.numpy(), data.Z.numpy()
    B = np.array([Z[i] * (X[i, 0] - X[i, t]) for i in range(2) for t in (1, 2)])  # kq-nuclear-norm §1: B_il
    lam = np.array([float(sol.duals[i, t]) for i in range(2) for t in (1, 2)])
    beta = sol.beta.numpy()
    np.testing.assert_array_equal(sol.W.numpy(), np.diag(beta))
    assert (B @ beta).min() >= 1 - TOL  # (a)
    g = B.T @ lam
    on = np.abs(beta) > 1e-6 * np.abs(beta).max()
    assert np.abs(g[on] - np.sign(beta[on])).max() <= TOL  # (b) on the support
    assert np.abs(g[~on]).max(initial=0) <= 1 + TOL  # (b) off the support
    assert np.max(lam * np.abs(1 - B @ beta)) <= TOL  # (c)
    assert np.abs(beta).sum() == pytest.approx(lam.sum(), rel=TOL)  # strong duality


def test_l1_diag_agrees_with_explicit_lp():
    data = diagonal_data(0)
    X, Z = data.X.numpy(), data.Z.numpy()
    B = np.array([Z[i] * (X[i, 0] - X[i, t]) for i in range(2) for t in (1, 2)])
    d = B.shape[1]
    # kq-nuclear-norm §4: beta = beta+ - beta-, min 1^T (beta+ + beta-), B^T (beta+ - beta-) >= 1, beta+- >= 0
    lp = linprog(np.ones(2 * d), A_ub=-np.hstack([B, -B]), b_ub=-np.ones(len(B)), bounds=(0, None))
    assert lp.status == 0
    sol = attention_svm(data, "l1-diag")
    assert sol.norm_value == pytest.approx(lp.fun, rel=TOL)
    if lp.x is not None:  # compare the vertex when the LP optimum is unique (checked by the value match above)
        np.testing.assert_allclose(np.abs(sol.beta.numpy()).sum(), np.abs(lp.x[:d] - lp.x[d:]).sum(), rtol=TOL)


# --- result contract ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.0, 1.5, "l1-diag"])
def test_result_fields(norm):
    data = diagonal_data(0)
    sol = attention_svm(data, norm)
    assert sol.W.shape == (data.d, data.d) and sol.W.dtype == torch.float64
    assert sol.duals.shape == (data.n, data.T) and bool((sol.duals >= 0).all())
    assert bool((sol.duals[torch.arange(data.n), sol.select] == 0).all())  # zero on the selected tokens
    assert sol.status == "optimal" and sol.solver == "CLARABEL"
    assert sol.margin == pytest.approx(1.0, abs=TOL)
    assert sol.max_violation <= TOL and sol.kkt_residual <= as_norm(norm).kkt_tol
    assert len(sol.support) >= 1 and all(t != int(sol.select[i]) for i, t in sol.support)
    assert (sol.beta is not None) == (norm == "l1-diag")


def test_select_defaults_to_data_select_then_optimal_tokens(data):
    assert torch.equal(attention_svm(data).select, data.optimal_tokens())
    chosen = (data.optimal_tokens() + 1) % data.T
    assert torch.equal(attention_svm(data.with_(select=chosen)).select, chosen)
    assert torch.equal(attention_svm(data, select=chosen.tolist()).select, chosen)


def test_accuracy_warning_when_kkt_residual_exceeds_tolerance(data):
    strict = dataclasses.replace(norms.NUC, kkt_tol=0.0)  # the nuclear norm whose any real residual is "too large"
    with pytest.warns(SolverAccuracyWarning, match="KKT residual"):
        attention_svm(data, strict)


# --- bad input ----------------------------------------------------------------------------------------------------


def test_selected_token_equal_to_another_is_refused_with_its_position(data):
    X = data.X.clone()
    X[2, 1] = X[2, 0]
    with pytest.raises(InfeasibleProgramError, match=r"infeasible.*\(i=2, t=1\).*selected token equals"):
        attention_svm(data.with_(X=X), "fro", select=[0, 0, 0, 0])


def test_contradictory_constraints_name_status_and_sizes():
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    data = TokenSelectionData(X, Z=[[1.0, 1.0], [1.0, 1.0]], y=[1, 1], select=[0, 1])  # same pair, both ways
    for norm in ("fro", "nuc", 1.5, "l1-diag"):
        with pytest.raises(InfeasibleProgramError, match=r"is infeasible \(2 constraints.*not separable"):
            attention_svm(data, norm)


def test_dual_method_refuses_dependent_constraints():
    X = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 2.0]]])
    data = TokenSelectionData(X, Z=[[1.0, 1.0]], y=[1], select=[0])  # A_2 = 2 A_1 with right-hand sides 1, 1
    with pytest.raises(ValidationError, match='dependent.*method="primal"'):
        attention_svm(data, "fro", method="dual")
    assert attention_svm(data, "fro").margin == pytest.approx(1.0, abs=TOL)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"norm": 0.5}, r"p == 0.5, must be >= 1"),
        ({"norm": "l2"}, r'norm must be "fro", "nuc", "l1-diag" or a float p >= 1, got \'l2\''),
        ({"norm": "nuc", "method": "dual"}, r'method="dual" solves only norm="fro"'),
        ({"solver": "MOSEK"}, r"solver == 'MOSEK', must be one of CLARABEL, SCS"),
        ({"select": [0, 0, 0, 5]}, r"select holds indices outside \[0, 2\]"),
    ],
)
def test_bad_arguments_are_named(data, kwargs, match):
    with pytest.raises(ValidationError, match=match):
        attention_svm(data, **kwargs)


def test_missing_selection_and_head_is_explained(data):
    with pytest.raises(ValidationError, match="no token selection"):
        attention_svm(data.with_(v=None))


def test_nan_tokens_are_caught_by_the_data_class(data):
    X = data.X.clone()
    X[0, 0, 0] = float("nan")
    with pytest.raises(ValidationError, match="non-finite"):
        attention_svm(TokenSelectionData(X, y=data.y, v=data.v))


def test_non_data_argument_is_refused_by_name():
    with pytest.raises(ValidationError, match="data must be a TokenSelectionData"):
        attention_svm(np.zeros((2, 2, 2)))


@pytest.mark.parametrize("norm", ["fro", "nuc"])
def test_solve_on_the_constraint_spans_equals_the_full_program(norm):
    """d > n (T - 1): the library solves for U^T W V on the spans; the spec's plain cvxpy program on all of W agrees."""
    import cvxpy as cp

    g = torch.Generator().manual_seed(5)
    data = TokenSelectionData(torch.randn(2, 3, 7, generator=g), torch.randn(2, 7, generator=g), [1, -1], select=[0, 2])
    X, Z, sel = data.X.numpy(), data.Z.numpy(), [0, 2]
    W = cp.Variable((7, 7))
    cons = [(X[i, sel[i]] - X[i, t]) @ W @ Z[i] >= 1 for i in range(2) for t in range(3) if t != sel[i]]
    full = cp.Problem(cp.Minimize(cp.norm(W, "fro") if norm == "fro" else cp.normNuc(W)), cons)
    full.solve(solver="CLARABEL")
    assert full.status == "optimal"
    sol = attention_svm(data, norm)
    assert sol.norm_value == pytest.approx(full.value, rel=1e-6)  # Clarabel's default accuracy on the full program
    if norm == "fro":  # unique minimiser
        np.testing.assert_allclose(sol.W.numpy(), W.value, atol=1e-6)
    assert np.linalg.matrix_rank(sol.W.numpy(), tol=1e-8) <= 2  # rank <= number of distinct queries


# --- scale, extreme p and ties ----------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["fro", "nuc", 1.0, 1.5, "l1-diag"])
@pytest.mark.parametrize(("a", "b"), [(1e50, 1e50), (1e-50, 1e-50), (1e120, 1e-100), (1e-5, 1e3)])
def test_the_programs_are_scale_covariant(data, norm, a, b):
    # Spec §5: the constraints (a x_sel - a x_t)^T W (b z) >= 1 are those of W' = a b W, so W(aX, bZ) = W(X, Z) / (ab)
    if norm == "l1-diag":
        data = TokenSelectionData(
            torch.randn(4, 3, 8, generator=torch.Generator().manual_seed(1)),
            y=[1, -1, 1, 1],
            v=torch.randn(8, generator=torch.Generator().manual_seed(2)),
        )  # d >= n(T-1): feasible
    scaled = data.with_(X=data.X * a, Z=data.Z * b)
    ref, sol = attention_svm(data, norm), attention_svm(scaled, norm)
    assert torch.equal(sol.select, ref.select) and sol.support == ref.support
    # TOL: solver noise on the unit-scale program; the scaling itself costs a few roundings
    np.testing.assert_allclose(sol.W.numpy() * a * b, ref.W.numpy(), rtol=0, atol=TOL * np.abs(ref.W.numpy()).max())
    assert sol.margin == pytest.approx(1.0, abs=TOL)
    assert sol.norm_value * a * b == pytest.approx(ref.norm_value, rel=TOL)
    e = 2.0 if norm == "fro" else (1.0 if norm in ("nuc", "l1-diag") else norm)  # lambda scales by (ab)^(-e)
    duals = sol.duals.numpy() * (a * b) ** e
    np.testing.assert_allclose(duals, ref.duals.numpy(), rtol=TOL, atol=TOL * float(ref.duals.max()))


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_separable_data_out_of_float_range_are_never_called_infeasible(data, scale):
    scaled = data.with_(X=data.X * scale, Z=data.Z * scale)
    match = "the data are separable, but the max-margin solution has norm about 1e"
    with pytest.raises(ValidationError, match=match) as info:
        attention_svm(scaled, "fro")
    assert not isinstance(info.value, InfeasibleProgramError) and "divide X and Z by a common factor" in str(info.value)


@pytest.mark.parametrize(
    ("p", "match"),
    [
        (1.0001, "too close to 1.*pass p = 1"),
        (1.0009, "too close to 1"),
        (1e4, "too large.*pass p <= 100"),
        (101.0, "too large"),
    ],
)
def test_extreme_p_is_a_clear_error(data, p, match):
    with pytest.raises(ValidationError, match=match):
        attention_svm(data, p)


@pytest.mark.parametrize("p", [1.001, 100.0])
def test_p_at_the_ends_of_the_range_is_solved_and_certified(data, p):
    sol = attention_svm(data, p)
    assert sol.max_violation <= TOL and 0 < sol.kkt_residual <= norms.KKT_TOL_POWER_CONE  # a non-vacuous certificate


def test_a_zero_head_is_an_error_not_token_zero_everywhere(data):
    with pytest.raises(ValidationError, match="every token score y_i v\\^T x_it is 0 .* pass select="):
        attention_svm(data.with_(v=torch.zeros(data.d)), "fro")


def test_tied_optimal_tokens_are_warned_about(data):
    X = data.X.clone()
    top = int(data.token_scores()[1].argmax())
    other = (top + 1) % data.T
    X[1, other] = X[1, top] + 0.5 * torch.linalg.svd(data.v[None, :])[2][-1]  # moved orthogonally to v: same score
    with pytest.warns(TieWarning, match=r"not unique in sequences \[1\].*the lowest index was selected"):
        attention_svm(data.with_(X=X), "fro")


def test_a_selected_token_equal_to_another_token_is_named(data):
    X = data.X.clone()
    X[2, 1] = X[2, 0]
    with pytest.raises(InfeasibleProgramError, match=r"\(i=2, t=1\).*the selected token equals that token"):
        attention_svm(data.with_(X=X), "fro", select=[0, 0, 0, 0])


# --- l_inf: a linear program -------------------------------------------------------------------------------------


def linf_reference(flat: np.ndarray) -> tuple[float, np.ndarray]:
    """``min t s.t. -t <= w_j <= t, M w >= 1`` written out for scipy's HiGHS: variables ``(w, t)``."""
    m, k = flat.shape
    cost = np.zeros(k + 1)
    cost[-1] = 1.0  # minimise t = ||w||_inf
    eye, ones = np.eye(k), np.ones((k, 1))
    A_ub = np.vstack([np.hstack([eye, -ones]), np.hstack([-eye, -ones]), np.hstack([-flat, np.zeros((m, 1))])])
    b_ub = np.concatenate([np.zeros(2 * k), -np.ones(m)])
    lp = linprog(cost, A_ub=A_ub, b_ub=b_ub, bounds=(None, None), method="highs")
    assert lp.status == 0
    return lp.fun, lp.x[:k]


@pytest.mark.parametrize("which", ["example1", "random"])
def test_linf_matches_an_independent_linprog(which, constraints, make_data):
    data = example1(n=4, T=3, d=6, seed=0) if which == "example1" else make_data(3)
    sol = attention_svm(data, float("inf"))
    pairs, A = constraints(data, data.optimal_tokens())
    value, w = linf_reference(A.reshape(len(pairs), -1))
    assert sol.norm_value == pytest.approx(value, rel=TOL)
    W = sol.W.numpy().reshape(-1)
    cos = W @ w / (np.linalg.norm(W) * np.linalg.norm(w))
    assert cos >= 1 - 1e-9  # the bar: the same direction, not only the same optimal value
    assert sol.kkt_residual <= norms.KKT_TOL and sol.status == "optimal"


def test_linf_kkt_sum_of_multipliers_is_an_l1_unit_subgradient(any_data, constraints):
    sol = attention_svm(any_data, float("inf"))
    pairs, A = constraints(any_data, any_data.optimal_tokens())
    lam = multipliers(sol, pairs)
    assert_primal_feasible_and_complementary(sol, A, lam)
    G = np.einsum("k,kab->ab", lam, A)
    W = sol.W.numpy()
    assert np.abs(G).sum() <= 1 + TOL  # the dual norm of l_inf is l1
    assert (G * W).sum() == pytest.approx(np.abs(W).max(), rel=TOL)  # <G, W> = ||W||_inf


def test_linf_at_least_every_finite_p(data):
    """||W_p||_inf >= ||W_inf||_inf for every p: W_inf minimises the l_inf norm over the same feasible set."""
    best = attention_svm(data, float("inf")).norm_value
    for p in (1.0, 2.0, 4.0):
        assert np.abs(attention_svm(data, p).W.numpy()).max() >= best * (1 - TOL)


def test_linf_kkt_certificate_accepts_the_lp_solution_and_rejects_the_frobenius_one(data, constraints):
    """The certificate is not vacuous: the Frobenius SVM with its own multipliers is feasible but not l_inf-optimal."""
    pairs, A = constraints(data, data.optimal_tokens())
    M = A.reshape(len(pairs), -1)
    linf, fro = attention_svm(data, float("inf")), attention_svm(data, "fro")
    assert program.kkt_residual(linf.W.numpy(), M, multipliers(linf, pairs), float("inf")) <= norms.KKT_TOL
    assert program.kkt_residual(fro.W.numpy(), M, multipliers(fro, pairs), float("inf")) > 1e-2  # O(1) defects
