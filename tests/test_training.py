"""The training loop: recording, scale-invariant optimizers fed mantissas, the NaN guard."""

import math

import pytest
import torch

import attnlab as al
from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.metrics import margin, norm, opt_softmax
from attnlab.models import Combined


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(4, 3, 2, generator=g)
    return TokenSelectionData(X, y=[1, -1, 1, -1], v=[1.0, 0.0])


class _PlainNGD(torch.optim.Optimizer):
    """A test-local normalised GD: W <- W - lr g/||g||, marked scale-invariant."""

    scale_invariant = True

    def __init__(self, params, lr):
        super().__init__(params, {"lr": lr})

    def step(self, closure):
        with torch.enable_grad():
            value = closure()
        params = [p for group in self.param_groups for p in group["params"]]
        total = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in params))
        with torch.no_grad():
            for p in params:
                p -= self.param_groups[0]["lr"] * p.grad / total
        return value


def test_records_every_k_steps_and_the_last():
    model = Combined(2)
    traj = al.train(
        model,
        torch.optim.SGD(model.parameters(), lr=0.1),
        _data(),
        steps=7,
        record_every=3,
        metrics=[opt_softmax(), margin(), norm("nuc")],
    )
    assert traj.frame["step"].tolist() == [0, 3, 6, 7]
    assert {"loss", "log_loss", "grad_norm", "norm", "opt_softmax", "margin", "norm_nuc"} <= set(traj.frame.columns)
    assert traj.status == "completed"
    assert traj.frame["loss"].is_monotonic_decreasing


def test_gd_loop_equals_manual_gd():
    data = _data()
    model = Combined(2)
    al.train(model, torch.optim.SGD(model.parameters(), lr=0.5), data, loss="logistic", steps=5)
    W = torch.zeros(2, 2)
    for _ in range(5):
        Wr = W.clone().requires_grad_()
        s = torch.einsum("ntd,de,ne->nt", data.X, Wr, data.Z)
        f = (torch.softmax(s, -1) * (data.X @ data.v)).sum(-1)
        (g,) = torch.autograd.grad(torch.nn.functional.softplus(-data.y * f).mean(), Wr)
        W = W - 0.5 * g
    torch.testing.assert_close(model.W.detach(), W, rtol=1e-12, atol=1e-14)


def test_scale_invariant_optimizer_keeps_moving_after_gradient_underflows():
    data = _data()
    model = Combined(2)
    traj = al.train(model, _PlainNGD(model.parameters(), lr=50.0), data, steps=60, record_every=20)
    # step length is exactly lr every step, so ||W_t|| grows linearly even once grad_norm is ~0
    assert (
        traj.frame["grad_norm"].iloc[-1] < 1e-300 or traj.frame["grad_norm"].iloc[-1] < traj.frame["grad_norm"].iloc[0]
    )
    assert traj.frame["norm"].iloc[-1] > 0.9 * 50.0 * 60 * 0.5


def test_nan_guard_restores_last_good_parameters():
    data = _data()
    model = Combined(2)

    class _Exploding(torch.optim.SGD):
        def step(self, closure=None):
            value = super().step(closure)
            if self.state.setdefault("count", [0])[0] == 2:
                with torch.no_grad():
                    model.weight.fill_(float("nan"))
            self.state["count"][0] += 1
            return value

    with pytest.warns(RuntimeWarning, match="non-finite"):
        traj = al.train(model, _Exploding(model.parameters(), lr=0.1), data, steps=10)
    assert traj.status == "diverged" and "step 3" in traj.message
    assert torch.isfinite(model.W).all()
    assert traj.frame["step"].max() == 2


def test_bad_arguments():
    model = Combined(2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValidationError, match="steps"):
        al.train(model, opt, _data(), steps=-1)
    with pytest.raises(ValidationError, match="loss"):
        al.train(model, opt, _data(), loss="mse")


@pytest.mark.parametrize(
    "make",
    [lambda p: al.optim.NormalizedGD(p, lr=1.7e308), lambda p: torch.optim.SGD(p, lr=1.7e308)],
    ids=["engine-rule", "torch-optimizer"],
)
def test_the_returned_model_of_a_diverged_run_has_a_finite_loss(make):
    data = _data()
    model = Combined(2)
    with pytest.warns(RuntimeWarning, match="non-finite loss at step"):
        traj = al.train(model, make(model.parameters()), data, steps=20, record_every=1)
    assert traj.status == "diverged" and traj.extra["status"] == ["diverged"]
    assert bool(torch.isfinite(model.loss(data)).all())
    assert traj.frame["step"].max() == traj.extra["last_step"][0]


def test_a_model_whose_d_differs_from_the_data_is_refused_by_name():
    model = Combined(3)
    with pytest.raises(
        ValidationError, match="model has d = 3 but the data's tokens have d = 2; build the model with d=2"
    ):
        al.train(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(), steps=1)
