"""Nonlinear heads against independent truths: autograd through the plain model, finite differences, and a plain
autograd training loop of the TF-as-SVM multi-token model (the source's NGD form)."""

import pytest
import torch
from torch import nn

import attnlab as al
from attnlab.losses import loss as loss_fn
from attnlab.models import Combined, Diagonal, Factored, ModuleHead, ReluHead
from attnlab.models.functional import loss_gradients, outputs

FLOAT64_EPS = torch.finfo(torch.float64).eps


def _draw(seed=0, d=5, R=None):
    draw = al.data.multi_token(n=3, T=4, d=d, seed=seed)
    g = torch.Generator().manual_seed(100 + seed)
    shape = (d, d) if R is None else (R, d, d)
    W = (2 * torch.rand(*shape, generator=g, dtype=torch.float64) - 1) / d**0.5
    return draw, W


def _plain_outputs(X, Z, W, V, v):
    """The model written out with autograd ops only: h(u) = v^T ReLU(V u), u = X^T softmax(X W z)."""
    s = torch.einsum("...ntd,...de,...ne->...nt", X, W, Z)
    u = torch.einsum("...nt,...ntd->...nd", torch.softmax(s, dim=-1), X)
    return torch.einsum("...nm,...m->...n", torch.relu(torch.einsum("...md,...nd->...nm", V, u)), v)


@pytest.mark.parametrize("loss", ["exp", "logistic"])
@pytest.mark.parametrize("R", [None, 3])
def test_relu_head_gradient_matches_autograd(loss, R):
    draw, W = _draw(R=R)
    X, Z, y = draw.data.X, draw.data.Z, draw.data.y
    Wr = W.clone().requires_grad_(True)
    risk = loss_fn(y * _plain_outputs(X, Z, Wr, draw.V, draw.v), loss).mean(-1)
    (expected,) = torch.autograd.grad(risk.sum(), Wr)
    gW, gv, log_risk = loss_gradients(X, Z, y, ReluHead(draw.V, draw.v), W, loss)
    assert gv is None
    torch.testing.assert_close(gW.value(), expected, rtol=1e-12, atol=1e-15)  # float64 rounding of one sum
    torch.testing.assert_close(log_risk.exp(), risk.detach(), rtol=1e-13, atol=0)


def test_relu_head_gradient_matches_finite_differences():
    draw, W = _draw(seed=2)
    X, Z, y = draw.data.X, draw.data.Z, draw.data.y
    head = ReluHead(draw.V, draw.v)
    gW, _, _ = loss_gradients(X, Z, y, head, W, "logistic")
    direction = torch.randn(W.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    h = 1e-6

    def risk(M):
        return loss_fn(y * outputs(X, M, Z, head), "logistic").mean()

    central = (risk(W + h * direction) - risk(W - h * direction)) / (2 * h)
    # central differences: O(h^2) truncation plus eps / h rounding, about 1e-10 here (no ReLU kink within h)
    assert float((gW.value() * direction).sum()) == pytest.approx(float(central), abs=1e-9)


def test_module_head_gradient_matches_autograd():
    draw, W = _draw(seed=4)
    X, Z, y = draw.data.X, draw.data.Z, draw.data.y
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 1)).double()
    Wr = W.clone().requires_grad_(True)
    s = torch.einsum("ntd,de,ne->nt", X, Wr, Z)
    u = torch.einsum("nt,ntd->nd", torch.softmax(s, dim=-1), X)
    risk = loss_fn(y * module(u).squeeze(-1), "exp").mean()
    (expected,) = torch.autograd.grad(risk, Wr)
    gW, _, log_risk = loss_gradients(X, Z, y, ModuleHead(module, 5), W, "exp")
    torch.testing.assert_close(gW.value(), expected, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(log_risk.exp(), risk.detach(), rtol=1e-13, atol=0)


@pytest.mark.parametrize("kind", ["KQ", "diag"])
def test_relu_head_chain_rule_matches_autograd(kind):
    draw, _ = _draw(seed=5)
    X, Z, y = draw.data.X, draw.data.Z, draw.data.y
    head = ReluHead(draw.V, draw.v)
    model = Factored(5, 5, v0=head, init_scale=0.5, seed=1) if kind == "KQ" else Diagonal(5, v0=head, omega=0.7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64))
    grads, _ = model.gradients(draw.data, "logistic")
    risk = loss_fn(y * _plain_outputs(X, Z, model.W, draw.V, draw.v), "logistic").mean()
    names = [n for n, _ in model.named_parameters()]
    expected = torch.autograd.grad(risk, list(model.parameters()))
    for name, e in zip(names, expected):
        torch.testing.assert_close(grads[name].value(), e, rtol=1e-11, atol=1e-15)


def _peer_loop(X, Z, y, V, v, params, combine, steps, lr=0.1, eps=FLOAT64_EPS):
    """TF-as-SVM's training loop written plainly: autograd through softmax and ReLU, logistic loss, each tensor's
    gradient divided by its Frobenius norm plus float64 eps, then a step of lr."""
    params = [p.clone().requires_grad_(True) for p in params]
    for _ in range(steps):
        risk = torch.log1p(torch.exp(-y * _plain_outputs(X, Z, combine(*params), V, v))).mean()
        grads = torch.autograd.grad(risk, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p -= lr * g / (g.norm() + eps)
    return combine(*params).detach()


COMBINE = {"W": lambda W: W, "KQ": lambda K, Q: K @ Q.T, "diag": lambda a, b: torch.diag(a * b)}


@pytest.mark.parametrize("kind", ["W", "KQ", "diag"])
def test_training_matches_the_sources_autograd_loop(kind):
    """Done-when of issue 21 item 1: same V, v, data and initial W, 100 steps, single and batched, to 1e-10."""
    draw, W0 = _draw(seed=6, d=6)
    X, Z, y = draw.data.X, draw.data.Z, draw.data.y
    g = torch.Generator().manual_seed(8)
    init = {
        "W": {"W0": W0},
        "KQ": {
            "K0": torch.randn(6, 6, generator=g, dtype=torch.float64),
            "Q0": torch.randn(6, 6, generator=g, dtype=torch.float64),
        },
        "diag": {
            "xi_k0": torch.rand(6, generator=g, dtype=torch.float64) + 0.5,
            "xi_q0": torch.rand(6, generator=g, dtype=torch.float64),
        },
    }[kind]
    # the source's eps (float64 eps in each norm) moves the step by eps / ||g|| ~ 1e-13 relative: under 1e-10
    reference = _peer_loop(X, Z, y, draw.V, draw.v, list(init.values()), COMBINE[kind], 100)
    head = ReluHead(draw.V, draw.v)
    model = {
        "W": lambda: Combined(6, W0=init["W0"], v0=head),
        "KQ": lambda: Factored(6, 6, K0=init["K0"], Q0=init["Q0"], v0=head),
        "diag": lambda: Diagonal(6, xi_k0=init["xi_k0"], xi_q0=init["xi_q0"], v0=head),
    }[kind]()
    opt = al.optim.NormalizedGD(model.parameters(), lr=0.1, normalization="tensor")
    al.train(model, opt, draw.data, loss="logistic", steps=100)
    torch.testing.assert_close(model.W.detach(), reference, rtol=0, atol=1e-10)
    # batched: three runs (the same data), the first at the reference's initialisation
    shift = 0.1 * torch.arange(3, dtype=torch.float64)
    runs = {k: t + shift.reshape((3,) + (1,) * t.dim()) for k, t in init.items()}
    batch = al.batched.train(
        X,
        Z,
        y,
        head,
        param=kind,
        optimizer="ngd:normalization=tensor",
        loss="logistic",
        steps=100,
        **({"W0": runs["W0"]} if kind == "W" else {k: runs[k] for k in init}),
    )
    torch.testing.assert_close(batch.W[0], reference, rtol=0, atol=1e-10)
    for r in (1, 2):
        other = _peer_loop(X, Z, y, draw.V, draw.v, [t[r] for t in runs.values()], COMBINE[kind], 100)
        torch.testing.assert_close(batch.W[r], other, rtol=0, atol=1e-10)


@pytest.mark.parametrize("optimizer", ["gd", "ngd", "md", "polyak"])
def test_every_rule_runs_a_relu_head_on_the_runs_axis(optimizer):
    """Each run of a batch equals that run trained alone (runs never interact), for every rule."""
    draws = [al.data.multi_token(d=4, seed=s) for s in range(3)]
    X = torch.stack([dr.data.X for dr in draws])
    Z = torch.stack([dr.data.Z for dr in draws])
    y = torch.stack([dr.data.y for dr in draws])
    head = ReluHead(torch.stack([dr.V for dr in draws]), torch.stack([dr.v for dr in draws]))
    optimizer = "polyak:optimal_loss=0,max_step=1" if optimizer == "polyak" else optimizer
    batch = al.batched.train(X, Z, y, head, optimizer=optimizer, loss="logistic", steps=30)
    for r, dr in enumerate(draws):
        alone = al.batched.train(
            dr.data.X,
            dr.data.Z,
            dr.data.y,
            ReluHead(dr.V, dr.v),
            optimizer=optimizer,
            loss="logistic",
            steps=30,
        )
        torch.testing.assert_close(batch.W[r], alone.W[0], rtol=1e-12, atol=1e-13)
        assert float(batch.W[r].norm()) > 0.1  # it moved


def test_nonlinear_heads_are_refused_where_they_cannot_act():
    draw, _ = _draw()
    head = ReluHead(draw.V, draw.v)
    with pytest.raises(al.ValidationError, match="train_head=True trains a linear head"):
        Combined(5, v0=head, train_head=True)
    with pytest.raises(al.ValidationError, match="train_head=True trains a linear head"):
        al.batched.train(draw.data.X, draw.data.Z, draw.data.y, head, steps=1, train_head=True)
    with pytest.raises(al.ValidationError, match="needs optimal_loss"):
        al.batched.train(draw.data.X, draw.data.Z, draw.data.y, head, optimizer="polyak", steps=1)
    with pytest.raises(al.ValidationError, match="width 5 but the tokens have d = 4"):
        al.batched.train(
            torch.randn(3, 4, 4, dtype=torch.float64),
            torch.randn(3, 4, dtype=torch.float64),
            draw.data.y,
            head,
            steps=1,
        )
    with pytest.raises(al.ValidationError, match="v has shape"):
        ReluHead(draw.V, torch.ones(4))
    with pytest.raises(al.ValidationError, match="one value per sequence"):
        loss_gradients(
            draw.data.X,
            draw.data.Z,
            draw.data.y,
            ModuleHead(nn.Linear(5, 2).double(), 5),
            torch.zeros(5, 5, dtype=torch.float64),
        )
