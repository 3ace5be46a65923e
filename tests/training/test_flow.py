"""Tests of attnlab.training.flow: RK4 against the closed form (Lemma A.1), conserved quantities, NGD step lengths."""

import math

import numpy as np
import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.data import scores_equal
from attnlab.metrics import attention_margin
from attnlab.models import Combined, Diagonal, Factored
from attnlab.training.flow import closed_form_beta, constraint_vectors, gradient_flow, kkt_multipliers, logit_weights


@pytest.fixture
def data():
    return scores_equal(n=3, T=3, d=5, gap=3.0, seed=0)


@pytest.fixture
def omega0():
    return torch.tensor([0.5, 1.0, 0.3, 0.7, 0.2], dtype=torch.float64)  # unequal entries: the general form of A.1


def test_logit_weights_equal_autograd_derivative_of_risk_in_logits(data):
    W = 0.3 * torch.randn(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    s = torch.einsum("ntd,de,ne->nt", data.X, W, data.Z).requires_grad_(True)
    gamma = data.y[:, None] * (data.X @ data.v)
    risk = torch.exp(-(torch.softmax(s, -1) * gamma).sum(-1)).mean()  # plain autograd reference, spec kq §2
    (expected,) = torch.autograd.grad(risk, s)
    log_abs, sign = logit_weights(data.X, data.Z, data.y, data.v, W)
    # float64 round-off of two different formulas of an O(1) quantity
    torch.testing.assert_close(sign * log_abs.exp(), expected, rtol=1e-12, atol=1e-14)


def test_rk4_flow_matches_closed_form_of_lemma_a1(data, omega0):
    model = Diagonal(5, xi_k0=math.sqrt(2) * omega0, xi_q0=torch.zeros(5))  # initialisation (5)
    flow = gradient_flow(model, data, step=5e-3, steps=200, method="rk4", track_phi=True)
    B = constraint_vectors(data.X, data.Z, data.select)
    beta = model.beta.detach()
    assert float(beta.abs().max()) > 0.1  # the flow moved far enough for the check to mean something
    # RK4 global error O(dt^4) = 6e-10 * C at dt = 5e-3; measured 2e-13 (phi is integrated by the same scheme)
    assert float((beta - closed_form_beta(omega0, B, flow.phi)).abs().max()) < 1e-10
    assert float(flow.log_time.exp()) == pytest.approx(1.0, rel=1e-12)  # 200 steps of dt = 5e-3


def test_closed_form_fails_for_the_wrong_phi_sign(data, omega0):
    model = Diagonal(5, xi_k0=math.sqrt(2) * omega0, xi_q0=torch.zeros(5))
    flow = gradient_flow(model, data, step=5e-3, steps=100, method="rk4", track_phi=True)
    B = constraint_vectors(data.X, data.Z, data.select)
    assert float((model.beta.detach() - closed_form_beta(omega0, B, -flow.phi)).abs().max()) > 1e-2


def test_phi_is_nonnegative_on_wrong_tokens_under_assumption_2(data):
    flow = gradient_flow(Diagonal(5, omega=0.5), data, step=1e-2, steps=50, method="gd", track_phi=True)
    assert bool((flow.phi[:, 1:] > 0).all())  # spec kq §3.1: phi_il >= 0 for l != opt under A2


def test_rk4_conserves_xi_k_squared_minus_xi_q_squared(data):
    gen = torch.Generator().manual_seed(2)
    xi_k0, xi_q0 = torch.randn(5, generator=gen), torch.randn(5, generator=gen)
    model = Diagonal(5, xi_k0=xi_k0, xi_q0=xi_q0)
    gradient_flow(model, data, step=1e-2, steps=100, method="rk4")
    conserved = model.xi_k.detach() ** 2 - model.xi_q.detach() ** 2
    assert float((model.xi_k.detach() - xi_k0).abs().max()) > 1e-2  # it moved
    torch.testing.assert_close(conserved, xi_k0**2 - xi_q0**2, rtol=0, atol=1e-11)  # RK4 O(dt^4) drift


def test_rk4_conserves_k_gram_minus_q_gram_for_full_weights(data):
    model = Factored(5, 6, init_scale=0.5, seed=3)
    K0, Q0 = model.K.detach().clone(), model.Q.detach().clone()
    gradient_flow(model, data, step=1e-2, steps=100, method="rk4")
    K, Q = model.K.detach(), model.Q.detach()
    assert float((K - K0).abs().max()) > 1e-2
    # spec kq §3 (flow on a product): K^T K - Q^T Q is invariant; RK4 drift O(dt^4)
    torch.testing.assert_close(K.T @ K - Q.T @ Q, K0.T @ K0 - Q0.T @ Q0, rtol=0, atol=1e-10)


def test_ngd_path_steps_have_exactly_the_requested_joint_length_per_run(data):
    K0 = 0.1 * torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    Q0 = 0.1 * torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    flow = gradient_flow(Factored(5, 5, K0=K0, Q0=Q0), data, step=0.05, steps=20, method="ngd", record_every=1)
    dK = flow.path["K"].diff(dim=0)  # (20, 3, 5, 5)
    dQ = flow.path["Q"].diff(dim=0)
    lengths = torch.sqrt(dK.pow(2).sum((-2, -1)) + dQ.pow(2).sum((-2, -1)))  # (20, 3): joint norm per run
    torch.testing.assert_close(lengths, torch.full_like(lengths, 0.05), rtol=1e-12, atol=0)  # round-off only


def test_ngd_relative_steps_have_length_eta_times_one_plus_the_norm_per_run(data):
    K0 = 0.1 * torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    Q0 = 0.1 * torch.randn(3, 5, 5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    model = Factored(5, 5, K0=K0, Q0=Q0)
    flow = gradient_flow(model, data, step=0.05, steps=40, method="ngd-relative", record_every=1)
    K, Q = flow.path["K"], flow.path["Q"]  # (41, 3, 5, 5)
    norms = torch.sqrt(K.pow(2).sum((-2, -1)) + Q.pow(2).sum((-2, -1)))  # ||theta|| before each step, per run
    lengths = torch.sqrt(K.diff(dim=0).pow(2).sum((-2, -1)) + Q.diff(dim=0).pow(2).sum((-2, -1)))
    torch.testing.assert_close(lengths, 0.05 * (1 + norms[:-1]), rtol=1e-12, atol=0)  # round-off only
    assert float(norms[-1].min()) > 2 * float(norms[0].max())  # the norm grew, so the steps did


def test_ngd_relative_follows_the_ngd_path_at_matched_norms(data):
    # one flow, discretised two ways (unit-speed NGD of 1e-3 and relative NGD of 1e-3): W / ||W|| where ||W|| first
    # reaches 5 and 10; NGD with unit steps, far from the flow near the start, fails the same reading
    W0 = 0.1 * torch.randn(5, 5, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    fine = gradient_flow(Combined(5, W0=W0), data, step=1e-3, steps=20000, record_every=10)
    relative = gradient_flow(Combined(5, W0=W0), data, step=1e-3, steps=2500, method="ngd-relative", record_every=1)
    coarse = gradient_flow(Combined(5, W0=W0), data, step=1.0, steps=30, record_every=1)

    def direction_at(flow, level):
        W = flow.path["W"]
        first = int((W.norm(dim=(-2, -1)) >= level).nonzero()[0])
        return W[first] / W[first].norm()

    for level in (5.0, 10.0):
        reference = direction_at(fine, level)
        # measured 1.3e-4 and 1.6e-5 (the records' spacing and O(step) discretisation); unit steps 0.052 and 0.040
        assert float((direction_at(relative, level) - reference).norm()) < 1e-3
        assert float((direction_at(coarse, level) - reference).norm()) > 1e-2


def test_ngd_relative_phi_gives_lemma_a1s_closed_form_to_first_order_in_the_step(data, omega0):
    # the integrated phi of the relative steps (per-run arc lengths) against the closed form beta = omega0^2
    # sinh(B phi): the error is O(step) (halves with the step), and a phi integrated at half its arc (the factor
    # 2 arc w / ||g|| taken as arc w / ||g||) is far off
    B = constraint_vectors(data.X, data.Z, data.select)
    errors = []
    for step, steps in ((1e-3, 2000), (5e-4, 4000)):
        model = Diagonal(5, xi_k0=math.sqrt(2) * omega0, xi_q0=torch.zeros(5))
        flow = gradient_flow(model, data, step=step, steps=steps, method="ngd-relative", track_phi=True)
        beta = model.beta.detach()
        scale = float(beta.abs().max())
        assert scale > 10  # far out: beta grew from 0 to about 68
        errors.append(float((beta - closed_form_beta(omega0, B, flow.phi)).abs().max()) / scale)
        assert float((beta - closed_form_beta(omega0, B, 0.5 * flow.phi)).abs().max()) / scale > 0.5
    assert errors[0] < 1e-2  # measured 4.3e-3
    assert 1.8 < errors[0] / errors[1] < 2.2  # first order: measured 2.0


def test_ngd_runs_axis_equals_separate_runs(data):
    W0 = 0.1 * torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    both = gradient_flow(Combined(5, W0=W0), data, step=0.1, steps=30)
    for r in range(2):
        alone = gradient_flow(Combined(5, W0=W0[r]), data, step=0.1, steps=30)
        torch.testing.assert_close(both.model.W[r], alone.model.W, rtol=1e-12, atol=1e-12)  # same ops, batched
        torch.testing.assert_close(both.log_time[r], alone.log_time, rtol=1e-12, atol=0)


def test_ngd_direction_stays_exact_after_the_softmax_saturates(data):
    flow = gradient_flow(Combined(5), data, step=5.0, steps=300, record_every=1)
    W = flow.path["W"]
    mu = attention_margin(data.X, data.Z, W[-2], data.select)
    assert float(mu) > 800  # every wrong-token probability e^{-mu} underflows float64 (below 1e-308)
    last = (W[-1] - W[-2]).norm()
    assert float(last) == pytest.approx(5.0, rel=1e-12)  # still a full step: the direction did not vanish
    assert bool(torch.isfinite(flow.path["log_loss"]).all())


def test_gd_and_ngd_record_tidy_frames(data):
    flow = gradient_flow(Diagonal(5, omega=0.5), data, step=1e-2, steps=10, method="gd", record_every=5)
    frame = flow.frame
    assert list(frame["step"]) == [0, 5, 10]
    assert {"run", "time", "log_time", "loss", "log_loss", "norm"} <= set(frame.columns)
    torch.testing.assert_close(torch.tensor(frame["log_time"].to_numpy()), flow.path["log_time"], rtol=0, atol=0)
    assert frame["loss"].is_monotonic_decreasing  # Lemma 4.2: the flow decreases the loss


def test_kkt_multipliers_are_phi_over_log_margin_and_nan_below_margin_one():
    phi = torch.ones(2, 2, 3)
    out = kkt_multipliers(phi, torch.tensor([math.e, 0.5]))
    torch.testing.assert_close(out[0], torch.ones(2, 3))
    assert bool(out[1].isnan().all())


def test_bad_arguments_name_themselves(data):
    with pytest.raises(ValidationError, match="method"):
        gradient_flow(Combined(5), data, step=0.1, steps=1, method="euler")
    with pytest.raises(ValidationError, match="step"):
        gradient_flow(Combined(5), data, step=0.0, steps=1)
    with pytest.raises(ValidationError, match="record_every"):
        gradient_flow(Combined(5), data, step=0.1, steps=1, record_every=0)
    with pytest.raises(ValidationError, match="TokenSelectionModel"):
        gradient_flow(torch.nn.Linear(2, 2), data, step=0.1, steps=1)


def test_flow_checks_d_runs_and_data_and_converts_a_float32_model():
    from attnlab.data import example1

    data = example1(n=4, T=3, d=5, seed=0)
    with pytest.raises(ValidationError, match="model has d = 3 but the data's tokens have d = 5"):
        gradient_flow(Combined(3), data, step=0.1, steps=1)
    with pytest.raises(ValidationError, match="data must be a TokenSelectionData or StackedData, got tuple"):
        gradient_flow(Combined(5), (data.X, data.Z, data.y, data.v), step=0.1, steps=1)
    with pytest.raises(ValidationError, match="track_phi == 'yes', must be a bool"):
        gradient_flow(Combined(5), data, step=0.1, steps=1, track_phi="yes")
    single, half = Combined(5), Combined(5).float()
    gradient_flow(single, data, step=0.1, steps=3)
    gradient_flow(half, data, step=0.1, steps=np.int64(3))
    assert half.W.dtype == torch.float64 and torch.equal(half.W, single.W)
