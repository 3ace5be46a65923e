"""Gradient descent on W with a fixed (spec §3.3, Algorithm C), practical step, early stopping, bad input."""

import math

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.ntk import ExpMLP, ReluMLP, SoftmaxMLP, extreme_eigenvalues, gram, practical_step, stability_limit
from attnlab.training.ntk import gradient_descent


def _data(n=8, d_in=4, d_out=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d_in, generator=g, dtype=torch.float64)
    Y = torch.randn(n, d_out, generator=g, dtype=torch.float64)
    return X / X.norm(dim=1, keepdim=True), Y / Y.norm(dim=1, keepdim=True)


def test_one_small_step_moves_outputs_by_minus_lr_s_h_times_residual():
    X, Y = _data()
    net = SoftmaxMLP(4, 2, 2000, seed=1)
    lr = 1e-3 * practical_step(net, X)
    H = gram(net, X)
    F0 = net(X).detach()
    gradient_descent(net, X, Y, lr=lr, steps=1)
    predicted = -lr * net.width * (H @ (F0 - Y).T.reshape(-1))  # spec §4.1: F(t+1) - F(t) ~ -eta m H (F - Y)
    moved = (net(X).detach() - F0).T.reshape(-1)
    assert float((moved - predicted).norm() / predicted.norm()) < 1e-4  # second-order term ~ lr


@pytest.mark.parametrize("cls", [SoftmaxMLP, ReluMLP, ExpMLP])
def test_loss_decays_below_the_contraction_envelope(cls):
    X, Y = _data()
    net = cls(4, 2, 4000, seed=2)
    lam = extreme_eigenvalues(gram(net, X))[0]
    lr = practical_step(net, X, 0.5)
    result = gradient_descent(net, X, Y, lr=lr, steps=400, record_every=50)
    frame = result.frame
    factor = 1 - net.kernel_scale * lr * lam / 2  # spec §5 Lemma 5.3
    envelope = factor ** frame["step"] * frame["sq_error"].iloc[0]
    assert (frame["sq_error"] <= envelope * (1 + 1e-9)).all()
    assert frame["sq_error"].is_monotonic_decreasing


def test_tol_stops_early_and_weight_movement_is_recorded():
    X, Y = _data()
    net = SoftmaxMLP(4, 2, 1000, seed=3)
    result = gradient_descent(net, X, Y, lr=practical_step(net, X), steps=100_000, tol=1e-6, record_every=100)
    assert result.steps < 100_000 and result.frame["sq_error"].iloc[-1] <= 1e-6
    assert result.frame["weight_movement"].iloc[0] == 0.0
    assert math.isclose(result.frame["weight_movement"].iloc[-1], float((net.W.detach() - result.W0).norm(dim=0).max()))


def test_early_stopping_restores_the_weights_of_the_best_held_out_step():
    X, Y = _data(n=16, seed=4)
    Xv, Yv = _data(n=8, seed=5)  # unrelated labels: held-out error rises while the training error falls
    net = SoftmaxMLP(4, 2, 500, seed=4)
    result = gradient_descent(
        net, X, Y, lr=practical_step(net, X), steps=5000, record_every=10, validation=(Xv, Yv), patience=5
    )
    frame = result.frame
    best = frame.loc[frame["val_error"].idxmin()]
    assert result.best_step == int(best["step"])
    held_out = float((net(Xv).detach() - Yv).pow(2).sum(dim=1).mean())
    assert math.isclose(held_out, float(best["val_error"]), rel_tol=1e-12)
    assert result.steps < 5000  # patience ran out


def test_metrics_of_the_state_add_columns_one_or_several_at_once():
    X, Y = _data()
    net = SoftmaxMLP(4, 2, 100, seed=0)
    metrics = {
        "w_norm": lambda state: float(state["W"].norm()),
        "both": lambda state: {"w_max": float(state["W"].abs().max()), "at": state["step"]},
    }
    result = gradient_descent(net, X, Y, lr=practical_step(net, X), steps=4, metrics=metrics)
    assert list(result.frame["step"]) == [0, 1, 2, 3, 4] and list(result.frame["at"]) == [0, 1, 2, 3, 4]
    assert {"w_norm", "w_max"} <= set(result.frame) and "both" not in result.frame
    assert result.frame["w_norm"].iloc[-1] == pytest.approx(float(net.W.norm()), rel=1e-15)


def test_step_past_the_stability_limit_is_refused_with_the_fix():
    X, Y = _data()
    net = SoftmaxMLP(4, 2, 100, seed=0)
    limit = stability_limit(net, X)
    with pytest.raises(ValidationError, match=r"lr == .*must be < 2 / \(s lambda_max\(H\*\)\).*pass lr=practical_step"):
        gradient_descent(net, X, Y, lr=1.01 * limit, steps=3)


def test_inputs_outside_the_unit_ball_are_rescaled_with_a_warning():
    X, Y = _data()
    net = SoftmaxMLP(4, 2, 100, seed=0)
    with pytest.warns(UserWarning, match=r"X: 8 of 8 rows lie outside the unit ball .*divided by 3"):
        result = gradient_descent(net, 3 * X, Y, lr=practical_step(net, X), steps=2)
    assert result.input_scale == pytest.approx(3.0)


def test_patience_without_validation_is_refused():
    X, Y = _data()
    net = SoftmaxMLP(4, 2, 100, seed=0)
    with pytest.raises(ValidationError, match="patience is set but validation is None"):
        gradient_descent(net, X, Y, lr=1e-3, steps=2, patience=3)


def test_a_run_whose_loss_turns_non_finite_stops_with_its_last_finite_weights(monkeypatch):
    # fault injection: the third update is NaN (lr is capped below the stability limit, so real data cannot do it)
    import attnlab.ntk.network as network  # GD looks the gradient up there at every step

    X, Y = _data()
    net = SoftmaxMLP(4, 2, 64, seed=4)
    lr = practical_step(net, X)
    calls, kept = [0], []
    real = network.weight_gradient

    def faulty(*args, **kwargs):
        calls[0] += 1
        grad = real(*args, **kwargs)
        return grad * math.nan if calls[0] == 3 else grad

    reference = SoftmaxMLP(4, 2, 64, seed=4)
    gradient_descent(reference, X, Y, lr=lr, steps=2)  # the same run, stopped where the fault strikes
    kept.append(reference.W.detach().clone())
    monkeypatch.setattr(network, "weight_gradient", faulty)
    result = gradient_descent(net, X, Y, lr=lr, steps=10)  # the one policy: no warning, the status says it
    assert result.status == ["diverged"] and result.steps == 2 and result.best_step == 2
    assert torch.equal(net.W.detach(), kept[0])
    assert math.isfinite(float((net(X) - Y).pow(2).sum()))
    assert result.frame["step"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("cls", [SoftmaxMLP, ReluMLP, ExpMLP])
def test_factors_computed_in_the_logits_storage_equal_the_plain_ones(cls):
    # the GD loop's allocation-free path (overwrite=True) against output_from_logits and jacobian_factors
    X, _ = _data(n=6)
    net = cls(4, 2, 500, seed=6)
    Z = X @ net.W.detach()
    F, phi, b = net.output_and_factors(Z.clone(), overwrite=True)
    phi_ref, b_ref = net.jacobian_factors(Z)
    torch.testing.assert_close(F, net.output_from_logits(Z), rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(phi, phi_ref, rtol=1e-13, atol=1e-15)
    torch.testing.assert_close(b, b_ref, rtol=1e-13, atol=1e-15)
