"""Token-selection math against independent truths: autograd through the plain softmax, finite differences,
and the closed form of implicit-bias-ngd §3.1 under Assumption 2."""

import math

import pytest
import torch

from attnlab.losses import loss as loss_fn
from attnlab.models.functional import (
    attention_loss,
    centred_scores,
    loss_gradients,
    margins,
    outputs,
    token_scores,
    tokens_first,
)

LOSSES = ("exp", "logistic")


def _problem(seed=0, R=None, n=4, T=5, d=3, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, T, d, generator=g)
    Z = torch.randn(n, d, generator=g)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0])[:n]
    v = torch.randn(d, generator=g)
    shape = (d, d) if R is None else (R, d, d)
    W = scale * torch.randn(*shape, generator=g)
    return X, Z, y, v, W


def _reference_risk(X, Z, y, v, W, loss):
    """Plain autograd reference: softmax then loss, no log-domain tricks."""
    s = torch.einsum("...ntd,...de,...ne->...nt", X, W, Z)
    f = (torch.softmax(s, dim=-1) * (X @ v)).sum(-1)
    return loss_fn(y * f, loss).mean(-1)


@pytest.mark.parametrize("loss", LOSSES)
def test_gradients_match_autograd_at_random_points(loss):
    X, Z, y, v, W = _problem()
    Wr, vr = W.clone().requires_grad_(), v.clone().requires_grad_()
    gW_ref, gv_ref = torch.autograd.grad(_reference_risk(X, Z, y, vr, Wr, loss), (Wr, vr))
    gW, gv, log_risk = loss_gradients(X, Z, y, v, W, loss, head=True)
    # 1e-13: both are exact formulas evaluated in float64 at O(1) values
    torch.testing.assert_close(gW.value(), gW_ref, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(gv.value(), gv_ref, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(log_risk.exp(), _reference_risk(X, Z, y, v, W, loss))


@pytest.mark.parametrize("loss", LOSSES)
def test_attention_loss_passes_gradcheck(loss):
    X, Z, y, v, W = _problem(seed=1)
    fn = lambda W_, v_: attention_loss(X, Z, y, v_, W_, loss)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (W.clone().requires_grad_(), v.clone().requires_grad_()), eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("loss", LOSSES)
def test_gradient_matches_finite_differences_at_saturated_point(loss):
    # logits of size 50+: the plain softmax Jacobian form phi (a - phi^T a) loses every digit here
    X, Z, y, v, W = _problem(seed=2, scale=40.0)
    s = torch.einsum("ntd,de,ne->nt", X, W, Z)
    assert float((s.amax(-1) - s.amin(-1)).min()) > 50
    gW, _, _ = loss_gradients(X, Z, y, v, W, loss)
    h = 1e-6
    fd = torch.zeros_like(W)
    for j in range(W.shape[0]):
        for k in range(W.shape[1]):
            E = torch.zeros_like(W)
            E[j, k] = h
            fd[j, k] = (_reference_risk(X, Z, y, v, W + E, loss) - _reference_risk(X, Z, y, v, W - E, loss)) / (2 * h)
    # central differences: error O(h^2 * third derivative) + O(eps/h); 1e-7 absolute on entries of size <= 1
    torch.testing.assert_close(gW.value(), fd, rtol=1e-5, atol=1e-7)


def test_closed_form_gradient_under_equal_nonopt_scores():
    # spec ngd §3.1: -grad = (1/n) sum_i l_i phi_opt Delta_i sum_{t != opt} phi_t (x_opt - x_t) z_i^T (exp loss)
    g = torch.Generator().manual_seed(3)
    n, T, d = 3, 4, 5
    X = torch.randn(n, T, d, generator=g)
    X[:, :, 0] = 0.0
    y = torch.tensor([1.0, -1.0, 1.0])
    X[:, 0, 0] = 2.0 * y  # opt token 0 with score 2, others 0
    v = torch.zeros(d)
    v[0] = 1.0
    Z = torch.randn(n, d, generator=g)
    W = torch.randn(d, d, generator=g)
    phi = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), -1)
    ell = torch.exp(-margins(X, Z, y, v, W))
    expected = torch.zeros(d, d)
    for i in range(n):
        inner = sum(phi[i, t] * torch.outer(X[i, 0] - X[i, t], Z[i]) for t in range(1, T))
        expected += ell[i] * phi[i, 0] * 2.0 * inner / n
    gW, _, _ = loss_gradients(X, Z, y, v, W, "exp")
    torch.testing.assert_close(-gW.value(), expected, rtol=1e-12, atol=1e-14)


def test_normalized_direction_survives_underflow():
    # at 2e4x scale the non-opt probabilities underflow to 0 in float64, but the direction stays defined
    X, Z, y, v, W = _problem(seed=4)
    big, _, _ = loss_gradients(X, Z, y, v, 2e4 * W, "exp")
    assert float(big.log_scale) < -745 and float(big.value().abs().max()) == 0.0
    direction = big.mantissa / big.mantissa.norm()
    assert torch.isfinite(direction).all() and math.isclose(float(direction.norm()), 1.0, rel_tol=1e-12)
    # and it agrees with the direction at a nearby scale, also computed in the log domain
    mid, _, _ = loss_gradients(X, Z, y, v, 1.9e4 * W, "exp")
    assert float(torch.dot(direction.flatten(), (mid.mantissa / mid.mantissa.norm()).flatten())) > 0.9


def test_centred_scores_equal_naive_form_where_naive_is_accurate():
    g = torch.Generator().manual_seed(5)
    log_phi = torch.log_softmax(torch.randn(3, 6, generator=g), -1)
    gamma = torch.randn(3, 6, generator=g)
    log_abs, sign = centred_scores(log_phi, gamma)
    naive = gamma - (log_phi.exp() * gamma).sum(-1, keepdim=True)
    torch.testing.assert_close(sign * log_abs.exp(), naive, rtol=1e-12, atol=1e-14)


def test_centred_score_of_opt_token_is_exact_when_saturated():
    # phi_opt = 1 - 1e-30: the naive form gives 0, the centred form gives 1e-30 * gap
    log_phi = torch.tensor([[math.log1p(-1e-30), math.log(1e-30)]])
    gamma = torch.tensor([[3.0, 1.0]])
    log_abs, sign = centred_scores(log_phi, gamma)
    assert sign[0, 0] == 1.0
    assert math.isclose(float(log_abs[0, 0].exp()), 2e-30, rel_tol=1e-12)


@pytest.mark.parametrize("loss", LOSSES)
def test_runs_axis_equals_single_runs(loss):
    X, Z, y, v, W = _problem(seed=6, R=3)
    batch, _, risk = loss_gradients(X, Z, y, v, W, loss)
    for r in range(3):
        single, _, risk_r = loss_gradients(X, Z, y, v, W[r], loss)
        torch.testing.assert_close(batch.value()[r], single.value(), rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(risk[r], risk_r, rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("shared", [False, True])
def test_token_first_tokens_give_the_same_bits(shared):
    """The logits from ``tokens_first`` are the transposed logits' bits (the engine's per-step layout)."""
    X, Z, y, v, W = _problem(seed=7, R=3, n=4, T=5, d=6)
    X, Z, y, v, W = (t.double() for t in (X, Z, y, v, W))
    XR = X.expand(3, *X.shape) if shared else X[None] * torch.tensor([1.0, -2.0, 0.5]).double()[:, None, None, None]
    ZR, yR, vR = Z.expand(3, *Z.shape), y.expand(3, *y.shape), v.expand(3, *v.shape)
    first = tokens_first(XR)
    assert first.shape == (5, 3, 4, 6) and (first.stride(1) == 0) == shared
    torch.testing.assert_close(first, XR.movedim(-2, 0), rtol=0, atol=0)
    for risk in (True, False):
        plain = loss_gradients(XR, ZR, yR, vR, W, "exp", risk=risk)
        fast = loss_gradients(XR, ZR, yR, vR, W, "exp", risk=risk, X_first=first)
        assert torch.equal(plain[0].mantissa, fast[0].mantissa)
        assert torch.equal(plain[0].log_scale, fast[0].log_scale)
        assert (plain[2] is None and fast[2] is None) or torch.equal(plain[2], fast[2])


def test_outputs_and_scores_shapes():
    X, Z, y, v, W = _problem(R=2)
    assert outputs(X, W, Z, v).shape == (2, 4)
    assert token_scores(X, y, v).shape == (4, 5)


def test_numerics_exp_and_logsumexp_agree_with_torch_including_special_values():
    from attnlab._numerics import exp, logsumexp

    x = torch.linspace(-700.0, 0.0, 1001, dtype=torch.float64)
    eps = torch.finfo(torch.float64).eps
    relative = ((exp(x) - torch.exp(x)) / torch.exp(x)).abs()
    assert bool((relative <= (x.abs() + 2.0) * eps).all())  # the docstring's bound: |x| eps, plus rounding
    rows = torch.tensor(
        [
            [0.0, -1.0, -2.0],
            [700.0, 699.0, -5.0],
            [-math.inf, -math.inf, -math.inf],
            [math.inf, 0.0, 1.0],
            [math.nan, 0.0, 1.0],
            [-math.inf, 0.0, -3.0],
        ],
        dtype=torch.float64,
    )
    ours, reference = logsumexp(rows, dim=-1), torch.logsumexp(rows, dim=-1)
    special = ~reference.isfinite()
    assert torch.equal(ours[special].nan_to_num(nan=7.0), reference[special].nan_to_num(nan=7.0))  # inf, -inf, nan
    # exp2(x log2 e) is off by |x| eps relative, so the sum by max|x - max x| eps and its log by that, absolutely
    finite = rows[~special].nan_to_num(neginf=0.0)
    spread = (finite - finite.amax(dim=-1, keepdim=True)).abs().amax(dim=-1)
    error = (ours[~special] - reference[~special]).abs()
    assert bool((error <= (spread + 4.0) * eps * reference[~special].abs().clamp(min=1.0)).all())


def _mp_gradients(X, Z, y, v, W, loss):
    """``grad_W L`` and ``grad_v L`` in 60-digit mpmath, straight from the definitions (no log domain)."""
    import mpmath as mp

    mp.mp.dps = 60
    n, T, d = X.shape
    f = lambda t: mp.mpf(float(t))  # noqa: E731
    gW = [[mp.mpf(0)] * d for _ in range(d)]
    gv = [mp.mpf(0)] * d
    for i in range(n):
        s = [sum(f(X[i, t, a]) * f(W[a, b]) * f(Z[i, b]) for a in range(d) for b in range(d)) for t in range(T)]
        e = [mp.exp(st - max(s)) for st in s]
        phi = [x / sum(e) for x in e]
        gam = [f(y[i]) * sum(f(v[a]) * f(X[i, t, a]) for a in range(d)) for t in range(T)]
        z = sum(p * g for p, g in zip(phi, gam))
        lp = -mp.exp(-z) if loss == "exp" else -1 / (1 + mp.exp(z))
        for t in range(T):
            w = lp / n * phi[t] * (gam[t] - z)  # dL/ds_it
            for a in range(d):
                gv[a] += lp / n * f(y[i]) * phi[t] * f(X[i, t, a])
                for b in range(d):
                    gW[a][b] += w * f(X[i, t, a]) * f(Z[i, b])
    return [x for row in gW for x in row] + gv


@pytest.mark.parametrize("loss", ["exp", "logistic"])
@pytest.mark.parametrize("scale", [1e3, 1e13, 3e14, 3e16, 1e100, 1e300])
def test_log_scaled_gradient_keeps_its_direction_at_huge_margins(loss, scale):
    import mpmath as mp

    g = torch.Generator().manual_seed(0)
    X = torch.randn(4, 4, 3, generator=g, dtype=torch.float64)
    Z, W = X[:, 0].clone(), torch.randn(3, 3, generator=g, dtype=torch.float64)
    v = scale * torch.randn(3, generator=g, dtype=torch.float64)  # token scores, hence margins |y f|, of size scale
    y = torch.tensor([1.0, -1.0, 1.0, 1.0], dtype=torch.float64)
    gW, gv, _ = loss_gradients(X, Z, y, v, W, loss, head=True)
    ours = [mp.mpf(float(x)) for x in torch.cat([gW.mantissa.reshape(-1), gv.mantissa])]
    exact = _mp_gradients(X, Z, y, v, W, loss)
    cos = mp.fsum(a * b for a, b in zip(ours, exact)) / mp.sqrt(
        mp.fsum(a * a for a in ours) * mp.fsum(b * b for b in exact)
    )
    assert 1 - cos <= 1e-12, float(1 - cos)
