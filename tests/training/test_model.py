"""The training loop: recording, scale-invariant optimizers fed mantissas, the NaN guard."""

import math
import warnings

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
    assert traj.status == ["completed"] and traj.ok
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

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the one divergence policy never warns: the status says it
        traj = al.train(model, _Exploding(model.parameters(), lr=0.1), data, steps=10)
    assert traj.status == ["diverged"] and "step 3" in traj.message
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
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = al.train(model, make(model.parameters()), data, steps=20, record_every=1)
    assert traj.status == ["diverged"] and traj.diverged_runs == [0] and not traj.ok
    assert bool(torch.isfinite(model.loss(data)).all())
    assert traj.frame["step"].max() == traj.last_step[0]


def test_a_model_whose_d_differs_from_the_data_is_refused_by_name():
    model = Combined(3)
    with pytest.raises(
        ValidationError, match="model has d = 3 but the data's tokens have d = 2; build the model with d=2"
    ):
        al.train(model, torch.optim.SGD(model.parameters(), lr=0.1), _data(), steps=1)


def _stacked(R=3):
    from attnlab.data import example1, stack

    return [example1(n=5, T=3, d=4, seed=s) for s in range(R)], stack(
        [example1(n=5, T=3, d=4, seed=s) for s in range(R)]
    )


def test_a_model_broadcast_over_stacked_data_records_each_runs_own_metrics():
    from attnlab.metrics import alignment

    datasets, stacked = _stacked()
    W_ref = torch.randn(4, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    W0 = 0.1 * torch.randn(4, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    model = Combined(4, W0=W0)
    traj = al.train(
        model,
        al.optim.NormalizedGD(model.parameters(), lr=0.2),
        stacked,
        steps=15,
        record_every=5,
        metrics=[alignment(W_ref), opt_softmax()],
        broadcast=True,
    )
    assert model.W.shape == (3, 4, 4)  # the model keeps every run
    for r, data in enumerate(datasets):  # a plain run per data set
        single = Combined(4, W0=W0)
        plain = al.train(
            single,
            al.optim.NormalizedGD(single.parameters(), lr=0.2),
            data,
            steps=15,
            record_every=5,
            metrics=[alignment(W_ref), opt_softmax()],
        )
        rows = traj.frame[traj.frame["run"] == r].reset_index(drop=True)
        for column in ("alignment", "opt_softmax", "loss"):
            assert torch.allclose(
                torch.tensor(rows[column].to_numpy()),
                torch.tensor(plain.frame[column].to_numpy()),
                rtol=1e-9,
                atol=1e-12,
            ), column
        assert torch.allclose(model.W[r].detach(), single.W.detach(), rtol=1e-9, atol=1e-12)


def test_stacked_data_and_a_model_without_runs_need_broadcast():
    _, stacked = _stacked()
    model = Combined(4)
    with pytest.raises(ValidationError, match="pass broadcast=True"):
        al.train(model, al.optim.NormalizedGD(model.parameters(), lr=0.1), stacked, steps=1)
    model = Combined(4, W0=torch.zeros(2, 4, 4))
    with pytest.raises(ValidationError, match="runs axis of 2 runs but the data has 3"):
        al.train(model, al.optim.NormalizedGD(model.parameters(), lr=0.1), stacked, steps=1)


def test_torch_sgd_broadcast_over_stacked_data_trains_each_run():
    datasets, stacked = _stacked()
    model = Combined(4)
    al.train(model, torch.optim.SGD(model.parameters(), lr=0.3), stacked, steps=5, broadcast=True)
    for r, data in enumerate(datasets):
        single = Combined(4)
        al.train(single, torch.optim.SGD(single.parameters(), lr=0.3), data, steps=5)
        assert torch.allclose(model.W[r].detach(), single.W.detach(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda m, d: al.train(m, torch.optim.SGD(m.parameters(), lr=0.1), (d.X, d.Z, d.y), steps=1),
            "data must be a TokenSelectionData or StackedData, got tuple",
        ),
        (
            lambda m, d: al.train(m, torch.optim.SGD(m.parameters(), lr=0.1), d, steps=1, progress="no"),
            "progress == 'no', must be a bool",
        ),
        (lambda m, d: al.train(m, object(), d, steps=1), "optimizer must be a torch.optim.Optimizer"),
        (
            lambda m, d: al.train(m3 := Combined(3), torch.optim.SGD(m3.parameters(), lr=0.1), d, steps=1),
            "model has d = 3 but the data's tokens have d = 2",
        ),
    ],
)
def test_bad_calls_are_refused_by_name(call, match):
    model = Combined(2)
    with pytest.raises(ValidationError, match=match):
        call(model, _data())


def test_integral_steps_of_any_type_and_a_float32_model():
    import numpy as np

    data = _data()
    model = Combined(2).float()
    traj = al.train(
        model, al.optim.NormalizedGD(model.parameters(), lr=0.1), data, steps=np.int64(3), record_every=torch.tensor(1)
    )
    ref = Combined(2)
    plain = al.train(ref, al.optim.NormalizedGD(ref.parameters(), lr=0.1), data, steps=3)
    assert model.W.dtype == torch.float64 and len(traj.frame) == 4
    assert torch.allclose(model.W.detach(), ref.W.detach(), rtol=0, atol=1e-15)
    assert plain.frame["loss"].iloc[-1] == traj.frame["loss"].iloc[-1]


@pytest.mark.parametrize(
    "make", [lambda p: torch.optim.SGD(p, lr=0.5, momentum=0.9), lambda p: torch.optim.Adam(p, 1e110)]
)
def test_a_torch_optimizers_state_of_a_diverged_run_stops_with_it(make):
    # a run stopped by the divergence policy kept stepping its optimizer: its buffers took every later gradient
    g = torch.Generator().manual_seed(0)

    def data(scale):
        X = scale * torch.randn(4, 3, 5, generator=g, dtype=torch.float64)
        y = torch.sign(torch.randn(4, generator=g, dtype=torch.float64))
        return TokenSelectionData(X, X[:, 0].clone(), y, torch.randn(5, generator=g, dtype=torch.float64) / scale)

    # run 1: a finite gradient of 1e200 whose step overflows the logits; run 0's steps move them by 1e-90 at most
    stacked = al.data.stack([data(1e-100), data(1e100)])

    def buffers(steps):
        model = Combined(5, W0=torch.zeros(2, 5, 5, dtype=torch.float64))
        optimizer = make(model.parameters())
        result = al.train(model, optimizer, stacked, steps=steps, record_every=steps)
        assert result.status == ["completed", "diverged"] and result.last_step == [steps, 0]
        (state,) = optimizer.state.values()  # of W, the one tensor trained
        return {k: v[1].clone() for k, v in state.items() if v.dim() > 0}

    early, late = buffers(3), buffers(10)
    assert early and all(torch.equal(early[k], late[k]) for k in early)


def test_polyak_string_on_a_model_that_trains_its_head_takes_l_star_zero():
    # the default L* was the initial head's, no lower bound once the head moves: the run was refused mid-way
    g = torch.Generator().manual_seed(0)
    X = torch.randn(5, 3, 6, generator=g, dtype=torch.float64)
    data = TokenSelectionData(X, X[:, 0].clone(), torch.sign(torch.randn(5, generator=g)), torch.randn(6, generator=g))
    initial = al.metrics.optimal_loss(data.X, data.y, data.v)

    def run(optimizer, freeze_head=False):
        model = Combined(6, W0=0.01 * torch.randn(6, 6, generator=g, dtype=torch.float64), v0=data.v, train_head=True)
        model.v.requires_grad_(not freeze_head)
        return al.train(model, optimizer, data, steps=40, record_every=1)

    trained = run("polyak:max_step=2")
    assert trained.status == ["completed"] and trained.frame.loss.min() < float(initial)
    g.manual_seed(1)
    default = run("polyak:max_step=2", freeze_head=True)  # a head that never moves keeps its own L*
    g.manual_seed(1)
    explicit = run(f"polyak:max_step=2,optimal_loss={float(initial)!r}", freeze_head=True)
    assert torch.equal(default.W, explicit.W)


def test_a_per_run_optimal_loss_of_another_length_is_refused_by_name():
    from attnlab.optim import parse_optimizer

    data = al.data.stack([al.data.example1(n=4, T=3, d=6, seed=s) for s in (0, 1)])
    model = Combined(6, W0=torch.zeros(2, 6, 6, dtype=torch.float64))
    spec = parse_optimizer("polyak").with_options(optimal_loss=torch.zeros(3))
    with pytest.raises(ValidationError, match="optimal_loss has 3 values for 2 runs"):
        al.train(model, spec, data, steps=3)


def test_the_selection_metrics_read_the_tokens_of_the_head_the_model_trains_with():
    # a model with its own head v0 = -v on data carrying v: opt_softmax was measured at v's optimal tokens (3.7e-11
    # at the end of a run that attends to -v's), not at the tokens of the head in use (batched.train's 0.99999999987)
    g = torch.Generator().manual_seed(0)
    X, Z = torch.randn(4, 3, 5, generator=g, dtype=torch.float64), torch.randn(4, 3, generator=g, dtype=torch.float64)
    v, y = torch.randn(5, generator=g, dtype=torch.float64), torch.tensor([1.0, -1.0, 1.0, -1.0])
    data = TokenSelectionData(X, Z=Z, y=y, v=v)
    run = al.train(Combined(5, v0=-v, d_q=3), "ngd", data, steps=300, metrics=[opt_softmax()], progress=False)
    alone = al.batched.train(X, Z, y, -v, optimizer="ngd", steps=300, progress=False)
    assert run.frame.opt_softmax.iloc[-1] == pytest.approx(alone.frame.opt_softmax.iloc[-1], abs=1e-12)
    assert run.frame.opt_softmax.iloc[-1] > 0.999
    relu = al.models.ReluHead(torch.randn(6, 5, generator=g, dtype=torch.float64), torch.ones(6))
    with pytest.raises(ValidationError, match="has no tokens to read"):  # a nonlinear head has no optimal tokens
        al.train(Combined(5, v0=relu, d_q=3), "ngd", data, steps=5, metrics=[opt_softmax()], progress=False)
