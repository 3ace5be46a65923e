"""Diagnostics against direct computations and textbook identities."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.metrics import (
    attention_margin,
    bregman_divergence,
    cosine,
    directional_bregman,
    entrywise_norm,
    gradient_direction,
    largest_gap,
    log_one_minus_selected,
    matrix_norm,
    optimal_loss,
    selected_logistic_probability,
    selected_probabilities,
    selected_probability,
    sequence_margins,
    token_bound,
)


def _tokens(seed=0, n=3, T=4, d=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, T, d, generator=g), torch.randn(n, d, generator=g), torch.randn(d, d, generator=g)


def test_margin_is_min_over_constraints():
    X, Z, W = _tokens()
    sel = torch.tensor([0, 2, 1])
    expected = min(float((X[i, sel[i]] - X[i, t]) @ W @ Z[i]) for i in range(3) for t in range(4) if t != sel[i])
    assert math.isclose(float(attention_margin(X, Z, W, sel)), expected, rel_tol=1e-12)


def test_log_one_minus_selected_matches_direct_and_survives_saturation():
    X, Z, W = _tokens(1)
    sel = torch.tensor([1, 0, 3])
    phi = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), -1)
    direct = torch.log(1 - phi[torch.arange(3), sel])
    torch.testing.assert_close(log_one_minus_selected(X, Z, W, sel), direct, rtol=1e-10, atol=1e-12)
    assert torch.isfinite(log_one_minus_selected(X, Z, 1e4 * W, sel)).all()


def test_selected_probability_and_runs_axis():
    X, Z, W = _tokens(2)
    Wr = torch.stack([W, 2 * W])
    sel = torch.tensor([0, 1, 2])
    batch = selected_probability(X, Z, Wr, sel)
    assert batch.shape == (2,)
    torch.testing.assert_close(batch[1], selected_probability(X, Z, 2 * W, sel))


@pytest.mark.parametrize("p", [1.5, 2.0, 3.0])
def test_bregman_is_nonnegative_zero_at_equality_and_obeys_three_point_identity(p):
    g = torch.Generator().manual_seed(3)
    A, B, C = (torch.randn(3, 3, generator=g) for _ in range(3))
    assert float(bregman_divergence(A, B, p)) > 0
    assert abs(float(bregman_divergence(A, A, p))) < 1e-12
    grad = lambda M: torch.sign(M) * M.abs() ** (p - 1)  # noqa: E731
    lhs = bregman_divergence(A, B, p) + bregman_divergence(B, C, p) - bregman_divergence(A, C, p)
    rhs = ((grad(C) - grad(B)) * (A - B)).sum()
    torch.testing.assert_close(lhs, rhs, rtol=1e-10, atol=1e-10)


def test_bregman_p2_is_half_squared_distance_and_directional_is_scale_free():
    A, B = torch.randn(2, 2), torch.randn(2, 2)
    torch.testing.assert_close(bregman_divergence(A, B, 2.0), 0.5 * ((A - B) ** 2).sum())
    torch.testing.assert_close(directional_bregman(A, 5 * B, 1.7), directional_bregman(3 * A, B, 1.7))


def test_norms_and_cosine():
    W = torch.diag(torch.tensor([3.0, -4.0]))
    assert float(matrix_norm(W, "nuc")) == 7.0 and float(matrix_norm(W, "fro")) == 5.0
    assert float(matrix_norm(W, 1.0)) == 7.0
    assert math.isclose(float(cosine(W, 2 * W)), 1.0)
    with pytest.raises(ValidationError, match="kind"):
        matrix_norm(W, "max")
    with pytest.raises(ValidationError, match="p =="):
        bregman_divergence(W, W, 0.5)


@pytest.mark.parametrize("p", [1.1, 1.5, 2.0, 3.0, 5.0])
def test_lp_and_l2_norms_of_a_matrix_lie_in_lemma_12s_interval_with_both_ends_attained(p):
    """mirror-descent-lp Lemma 12: for m entries, ||W||_2 <= ||W||_p <= m^(1/p - 1/2) ||W||_2 for p <= 2, the ends
    exchanged for p >= 2; 1-sparse matrices attain the end 1, constant ones the end m^(1/p - 1/2)."""
    gen = torch.Generator().manual_seed(12)
    m = 100
    dense = torch.randn(1000, 10, 10, generator=gen, dtype=torch.float64)
    sparse = torch.zeros(10, 10, 10, dtype=torch.float64)
    sparse.view(10, -1)[torch.arange(10), torch.randint(0, m, (10,), generator=gen)] = 3.0
    constant = torch.full((1, 10, 10), -0.7, dtype=torch.float64)
    W = torch.cat([dense, sparse, constant])
    ratio = entrywise_norm(W, p) / torch.linalg.vector_norm(W.flatten(1), dim=-1)  # the l_2 norm of the entries
    ends = sorted((1.0, m ** (1 / p - 0.5)))
    assert bool((ratio >= ends[0] * (1 - 1e-12)).all()) and bool((ratio <= ends[1] * (1 + 1e-12)).all())
    torch.testing.assert_close(ratio[1000:1010], torch.ones(10, dtype=torch.float64), rtol=1e-13, atol=0)
    assert math.isclose(float(ratio[-1]), m ** (1 / p - 0.5), rel_tol=1e-13)  # a constant matrix: (m c^p)^(1/p)


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1.0])
@pytest.mark.parametrize("kind", ["fro", "nuc", "op", 1.0, 1.5, 3.0])
def test_norms_neither_overflow_nor_underflow(scale, kind):
    g = torch.Generator().manual_seed(0)
    W = torch.randn(2, 4, 4, generator=g, dtype=torch.float64)  # two runs
    expected = matrix_norm(W, kind) * scale  # norms are absolutely homogeneous: ||c W|| = |c| ||W||
    got = matrix_norm(W * scale, kind)
    # 1e-13: a few roundings of the scaled entries; the sum of squares alone would give inf or 0 here
    torch.testing.assert_close(got, expected, rtol=1e-13, atol=0)


def test_a_norm_of_4e304_is_reported_not_inf():
    W = torch.full((3, 3), 1.4e304, dtype=torch.float64)
    assert float(matrix_norm(W, "fro")) == pytest.approx(4.2e304, rel=1e-15)  # 3 * 1.4e304 exactly, up to rounding
    assert math.isinf(float(matrix_norm(torch.full((2, 2), math.inf, dtype=torch.float64))))
    assert float(matrix_norm(torch.zeros(2, 2, dtype=torch.float64))) == 0.0


@pytest.mark.parametrize(("a", "b"), [(1e300, 1e-300), (1e-300, 1.0), (1e200, 1e200)])
def test_cosine_does_not_depend_on_scale(a, b):
    g = torch.Generator().manual_seed(1)
    A, B = torch.randn(3, 3, generator=g, dtype=torch.float64), torch.randn(3, 3, generator=g, dtype=torch.float64)
    # 1e-14: rescaling costs a few roundings; unscaled, these products overflow to inf or underflow to 0
    assert float(cosine(a * A, b * B)) == pytest.approx(float(cosine(A, B)), rel=1e-14)
    assert float(cosine(a * A[0], b * B[0])) == pytest.approx(float(cosine(A[0], B[0])), rel=1e-14)


def test_a_reference_of_the_wrong_shape_is_refused_by_name():
    import attnlab as al
    from attnlab.data import example1
    from attnlab.metrics import alignment, bregman, head_alignment, opt_softmax

    data = example1(n=4, T=3, d=5, seed=0)
    model = al.models.Combined(5)
    opt = al.optim.NormalizedGD(model.parameters(), lr=0.1)
    with pytest.raises(ValidationError, match=r"W_ref has shape \(3, 3\), but the trained W has shape \(5, 5\)"):
        al.train(model, opt, data, steps=1, metrics=[alignment(torch.ones(3, 3))])
    with pytest.raises(ValidationError, match=r"W_ref has shape \(5,\), expected \(d, d\) or \(R, d, d\)"):
        alignment(torch.ones(5))
    with pytest.raises(ValidationError, match=r"W_ref has shape \(2, 5, 5\), but the trained W has shape \(5, 5\)"):
        al.train(model, opt, data, steps=1, metrics=[bregman(torch.ones(2, 5, 5), 3.0)])
    with pytest.raises(ValidationError, match=r"v_ref has shape \(2, 2, 5\), expected \(d,\) or \(R, d\)"):
        head_alignment(torch.ones(2, 2, 5))
    with pytest.raises(ValidationError, match=r"select holds indices outside \[0, 2\]"):
        al.train(model, opt, data, steps=1, metrics=[opt_softmax(select=[0, 1, 2, 5])])


def test_sequence_margins_and_selected_probabilities_against_plain_loops():
    X, Z, W = _tokens()
    sel = torch.tensor([0, 2, 1])
    margins = sequence_margins(X, Z, W, sel)
    for i in range(3):
        expected = min(float((X[i, sel[i]] - X[i, t]) @ W @ Z[i]) for t in range(4) if t != sel[i])
        assert math.isclose(float(margins[i]), expected, rel_tol=1e-12)
        probs = torch.softmax(X[i] @ W @ Z[i], dim=0)  # (T,)
        assert math.isclose(float(selected_probabilities(X, Z, W, sel)[i]), float(probs[sel[i]]), rel_tol=1e-12)
    stacked = torch.stack([W, 2 * W])  # a stack of S = 2 matrices against one data set
    assert sequence_margins(X, Z, stacked, sel).shape == (2, 3)
    torch.testing.assert_close(sequence_margins(X, Z, stacked, sel)[1], 2 * margins)


def test_token_bound_largest_gap_and_optimal_loss_against_their_definitions():
    X, Z, _ = _tokens(n=3, T=4, d=3)
    X = X.double()
    g = torch.Generator().manual_seed(1)
    y = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    v = torch.randn(3, generator=g, dtype=torch.float64)
    sel = torch.tensor([0, 2, 1])
    assert math.isclose(float(token_bound(X)), max(float(X[i, t].norm()) for i in range(3) for t in range(4)))
    gamma = [[float(y[i] * (v @ X[i, t])) for t in range(4)] for i in range(3)]
    gaps = [gamma[i][sel[i]] - max(gamma[i][t] for t in range(4) if t != sel[i]) for i in range(3)]
    assert math.isclose(float(largest_gap(X, y, v, sel)), max(gaps), rel_tol=1e-12)
    expected = sum(math.exp(-gamma[i][sel[i]]) for i in range(3)) / 3  # exp loss at the selected scores
    assert math.isclose(float(optimal_loss(X, y, v, sel, "exp")), expected, rel_tol=1e-12)
    with pytest.raises(ValidationError, match="loss"):
        optimal_loss(X, y, v, sel, "hinge")
    with pytest.raises(ValidationError, match=r"expected \(\[R,\] n, T, d\)"):
        token_bound(X[0])


def test_gradient_direction_is_the_unit_negative_autograd_gradient():
    X, Z, W = (t.double() for t in _tokens())
    y = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    v = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    Wg = W.clone().requires_grad_(True)
    f = (torch.softmax(torch.einsum("ntd,de,ne->nt", X, Wg, Z), -1) * (X @ v)).sum(-1)
    risk = torch.exp(-y * f).mean()
    risk.backward()
    direction, log_norm, log_risk = gradient_direction(X, Z, y, v, W, "exp")
    torch.testing.assert_close(direction, -Wg.grad / Wg.grad.norm(), rtol=1e-10, atol=1e-12)
    assert math.isclose(float(log_norm), math.log(float(Wg.grad.norm())), rel_tol=1e-10)
    assert math.isclose(float(log_risk), math.log(float(risk)), rel_tol=1e-10)


def test_selected_logistic_probability_is_a_plain_loop_over_sequences_and_broadcasts_steps():
    """(1/n) sum_i 1 / (1 + exp(-y_i v^T x_{i,sel_i})) by a loop, for (R, n) and (S, R, n) selections."""
    gen = torch.Generator().manual_seed(5)
    R, n, T, d = 2, 3, 4, 5
    X = torch.randn(R, n, T, d, generator=gen, dtype=torch.float64)
    y = torch.tensor([[1.0, -1.0, 1.0], [-1.0, -1.0, 1.0]], dtype=torch.float64)
    v = torch.randn(R, d, generator=gen, dtype=torch.float64)
    select = torch.randint(0, T, (3, R, n), generator=gen)
    got = selected_logistic_probability(X, y, v, select)
    assert got.shape == (3, R)
    for s in range(3):
        for r in range(R):
            terms = [1 / (1 + math.exp(-float(y[r, i] * v[r] @ X[r, i, select[s, r, i]]))) for i in range(n)]
            assert float(got[s, r]) == pytest.approx(sum(terms) / n, rel=1e-14)
    assert torch.equal(selected_logistic_probability(X, y, v, select[0]), got[0])
    with pytest.raises(
        ValidationError, match=r"select must be an integer tensor of shape \(\[S,\] \[R,\] n\) with n = 3"
    ):
        selected_logistic_probability(X, y, v, select.double())


def test_alignment_and_bregman_take_rectangular_references():
    """Cross-attention's W is (d, d_q): its reference is too, one for every run or one per run."""
    import attnlab as al
    import attnlab.batched as batched
    from attnlab.data import TokenSelectionData, example1
    from attnlab.metrics import alignment, bregman
    from attnlab.svm import attention_svm

    base = example1(n=4, T=3, d=6, seed=0)
    queries = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    data = TokenSelectionData(base.X, Z=queries, y=base.y, v=base.v)
    W_ref = attention_svm(data).W
    assert W_ref.shape == (6, 3)
    model = al.models.Combined(6, d_q=3)
    metrics = [alignment(W_ref), bregman(W_ref, 2.0, name="dB")]
    frame = al.train(model, "ngd:lr=0.5", data, steps=5, metrics=metrics, progress=False).frame
    W = model.W.detach()
    assert frame["alignment"].iloc[-1] == pytest.approx(float(cosine(W, W_ref)), rel=1e-14)
    assert frame["dB"].iloc[-1] == pytest.approx(float(directional_bregman(W_ref, W, 2.0)), rel=1e-12)
    refs = torch.stack([W_ref, -W_ref])  # (R, d, d_q): one reference per run
    run = batched.train(
        data.X, data.Z, data.y, data.v, torch.zeros(2, 6, 3), lr=0.5, steps=5, progress=False,
        metrics=[alignment(refs, name="a"), bregman(refs, 2.0, name="dB")],
    )  # fmt: skip
    last = run.frame[run.frame["step"] == 5].sort_values("run")
    torch.testing.assert_close(torch.tensor(last["a"].to_numpy()), cosine(run.W, refs), rtol=1e-14, atol=0)
    torch.testing.assert_close(torch.tensor(last["dB"].to_numpy()), directional_bregman(refs, run.W, 2.0))
    with pytest.raises(ValidationError, match=r"W_ref has shape \(3, 6\), but the trained W has shape \(6, 3\)"):
        al.train(al.models.Combined(6, d_q=3), "ngd", data, steps=1, metrics=[alignment(W_ref.T)], progress=False)
    with pytest.raises(ValidationError, match=r"W_ref has shape \(1, 1, 6, 3\), expected \(d, d\) or \(R, d, d\)"):
        alignment(W_ref[None, None])


def _diagnostic_args():
    X, Z, W = (t.double() for t in _tokens(n=3, T=4, d=3))
    return X, Z, W, torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64), torch.tensor([0.5, -1.0, 2.0]).double()


def _refused_calls():
    X, Z, W, y, v = _diagnostic_args()
    sel = torch.tensor([0, 2, 1])
    return [
        (lambda: optimal_loss(X, (y > 0).double(), v), r"y must hold only -1 and \+1, found \[0.0\]"),
        (lambda: largest_gap(X, (y > 0).double(), v, sel), r"y must hold only -1 and \+1"),
        (lambda: optimal_loss(X, y, v[:2]), r"v has shape \(2,\), but the tokens have width d = 3"),
        (lambda: optimal_loss(X, y[:2], v), r"y has shape \(2,\), but X has n = 3 sequences"),
        (lambda: matrix_norm(W, 0.5), r"kind == 0.5, must be >= 1"),
        (lambda: matrix_norm(W, 0), r"kind == 0, must be >= 1"),
        (lambda: matrix_norm(W, -2), r"kind == -2, must be >= 1"),
        (lambda: entrywise_norm(W, 0.5), r"p == 0.5, must be >= 1"),
        (lambda: matrix_norm(W[0]), r"W has shape \(3,\), expected \(\[R,\] d, d_q\)"),
        (lambda: cosine(W, torch.zeros(3, 3)), "B is zero: a direction of reference must be non-zero"),
        (lambda: cosine(W, torch.ones(4, 4)), r"the shapes of A \(3, 3\), B \(4, 4\) do not broadcast"),
        (lambda: directional_bregman(torch.zeros(3, 3), W, 2.0), "W_ref is zero"),
        (lambda: directional_bregman(W, W, 1.0), r"p == 1.0, must be > 1"),
        (lambda: bregman_divergence(W, torch.ones(2, 2), 2.0), r"the shapes of A \(3, 3\), B \(2, 2\)"),
        (lambda: attention_margin(X, Z, W, torch.tensor([0, 0, 7])), r"select holds indices outside \[0, 3\].*\[7\]"),
        (lambda: attention_margin(X, Z, W, torch.tensor([0, 0, -1])), r"indices outside \[0, 3\].*\[-1\]"),
        (lambda: largest_gap(X, y, v, torch.tensor([0, 0, 9])), r"select holds indices outside \[0, 3\]"),
        (lambda: selected_probability(X, Z, W, sel.double()), "select must be integer token indices"),
        (lambda: selected_probability(X, Z, W, [[0, 1], [1], [2]]), "one integer token index per sequence"),
        (lambda: sequence_margins(X, Z, W, sel[:2]), r"select has shape \(2,\), expected \(\[R,\] n\) with n = 3"),
        (lambda: attention_margin(X, Z, W[:2, :2], sel), r"W has shape \(2, 2\), but the tokens have width d = 3"),
        (lambda: attention_margin(X, Z[:2], W, sel), r"Z has shape \(2, 3\): 2 queries, but X has n = 3"),
        (lambda: attention_margin(X[0], Z, W, sel), r"X has shape \(4, 3\), expected \(\[R,\] n, T, d\)"),
        (lambda: log_one_minus_selected(X, Z, torch.ones(2, 3, 3), torch.zeros(5, 3, dtype=torch.int64)), "select"),
        (lambda: attention_margin(X[None].expand(2, -1, -1, -1), Z, torch.ones(3, 3, 3), sel), "do not broadcast"),
        (lambda: gradient_direction(X, Z, (y > 0).double(), v, W), r"y must hold only -1 and \+1"),
        (lambda: selected_logistic_probability(X, y, v, torch.tensor([0, 0, 4])), r"indices outside \[0, 3\]"),
    ]


@pytest.mark.parametrize("case", range(len(_refused_calls())))
def test_the_diagnostics_refuse_bad_input_by_name(case):
    call, match = _refused_calls()[case]
    with pytest.raises(ValidationError, match=match):
        call()


def test_the_diagnostics_convert_float32_and_lists_and_keep_their_values():
    X, Z, W, y, v = _diagnostic_args()
    sel = torch.tensor([0, 2, 1])
    expected = attention_margin(X, Z, W, sel)
    assert attention_margin(X, Z, W.float(), [0, 2, 1]) == pytest.approx(float(expected), rel=1e-6)
    assert attention_margin(X, Z, W.float(), sel).dtype == torch.float64  # float32 beside float64 data: float64
    assert selected_probability(X, Z, W, sel.int()) == selected_probability(X, Z, W, sel)
    assert float(optimal_loss(X, y.int(), v, sel)) == float(optimal_loss(X, y, v, sel))
    # a zero iterate has no direction yet (W_0 = 0 on a path): nan, not a refusal
    assert math.isnan(float(cosine(torch.zeros(3, 3), W)))
    path = torch.stack([torch.zeros(3, 3, dtype=torch.float64), W])
    assert math.isnan(float(directional_bregman(W, path, 2.0)[0]))
    assert float(directional_bregman(W, path, 2.0)[1]) == pytest.approx(0.0, abs=1e-12)
    assert float(matrix_norm(W, math.inf)) == float(W.abs().max())


def test_the_norm_metric_refuses_an_exponent_below_one():
    from attnlab.metrics import norm

    for kind in (0.5, 0, -1, True):
        with pytest.raises(ValidationError, match="kind"):
            norm(kind)
    assert norm(1.5).name == "norm_1.5" and norm("nuc").name == "norm_nuc"
