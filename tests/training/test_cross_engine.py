"""One rule, three doors: the torch.optim class through al.train, the string name through batched.train, and a slow
reference written from the spec with autograd gradients, over every entry of the optimizer registry x
parametrisation.

The reference shares no code with the engine: plain softmax attention, autograd for the gradient, each rule's
formula written out (spec implicit-bias-ngd §4 A1-A6, mirror-descent-lp §4). The steps are taken before the
softmax saturates, where the autograd gradient is accurate; 1e-12 is the issue's bar (observed ~1e-15).
"""

from __future__ import annotations

import math

import pytest
import torch

import attnlab as al
from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData
from attnlab.losses import log_mean_loss
from attnlab.models import Combined, Diagonal, Factored
from attnlab.models.functional import token_scores
from attnlab.optim import JointAdaptive, NormalizedGD, parse_optimizer, registry
from attnlab.training import batched

STEPS = 25
LR = 0.05


def _data(n=4, T=3, d=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, T, d, generator=g, dtype=torch.float64)
    return TokenSelectionData(
        X,
        X[:, 0].clone(),
        torch.sign(torch.randn(n, generator=g, dtype=torch.float64)),
        torch.randn(d, generator=g, dtype=torch.float64),
    )


def _init(param, d, seed=1):
    g = torch.Generator().manual_seed(seed)
    if param == "W":
        return {"W": 0.1 * torch.randn(d, d, generator=g, dtype=torch.float64)}
    if param == "KQ":
        return {
            "K": 0.5 * torch.randn(d, d, generator=g, dtype=torch.float64),
            "Q": 0.5 * torch.randn(d, d, generator=g, dtype=torch.float64),
        }
    return {
        "xi_k": 0.5 * torch.randn(d, generator=g, dtype=torch.float64),
        "xi_q": 0.5 * torch.randn(d, generator=g, dtype=torch.float64),
    }


def _model(param, init, train_head=False):
    d = next(iter(init.values())).shape[0]
    if param == "W":
        return Combined(d, W0=init["W"], train_head=train_head)
    if param == "KQ":
        return Factored(d, d, K0=init["K"], Q0=init["Q"], train_head=train_head)
    return Diagonal(d, xi_k0=init["xi_k"], xi_q0=init["xi_q"], train_head=train_head)


def _combine(param, p):
    if param == "W":
        return p["W"]
    if param == "KQ":
        return p["K"] @ p["Q"].T
    return torch.diag(p["xi_k"] * p["xi_q"])


def _reference(param, init, data, rule, opts, steps=STEPS, head=False):
    """The rule written from the spec, on autograd gradients of plain softmax attention (exp loss)."""
    p = {k: t.clone() for k, t in init.items()}
    if head:
        p["v"] = torch.zeros_like(data.v)
    m = {k: torch.zeros_like(t) for k, t in p.items()}
    v2 = {k: torch.zeros_like(t) for k, t in p.items()}
    l_star = float(log_mean_loss(token_scores(data.X, data.y, data.v).amax(-1), "exp").exp())
    decay = {"constant": 0.0, "inv_sqrt": 0.5}.get(opts.get("schedule", "constant"))  # steepest-descent §2
    for t in range(steps):
        leaves = {k: x.clone().requires_grad_() for k, x in p.items()}
        W = _combine(param, leaves)
        v = leaves["v"] if head else data.v
        s = torch.einsum("ntd,de,ne->nt", data.X, W, data.Z)
        f = (torch.softmax(s, -1) * (data.X @ v)).sum(-1)
        L = torch.exp(-data.y * f).mean()
        g = dict(zip(leaves, torch.autograd.grad(L, list(leaves.values()))))
        joint = math.sqrt(sum(float(x.pow(2).sum()) for x in g.values()))
        lr = LR * (t + 1) ** -decay
        if rule == "gd":  # A1 (A4: heavy ball m <- beta m + g)
            m = {k: opts.get("momentum", 0.0) * m[k] + g[k] for k in p}
            p = {k: p[k] - lr * m[k] for k in p}
        elif rule == "ngd":  # A2 (cap, eps), A4 (heavy ball: step from ||g||; normalised buffer: m / ||m||)
            beta, variant = opts.get("momentum", 0.0), opts.get("momentum_variant", "heavy_ball")
            m = {k: beta * m[k] + g[k] for k in p}
            if variant == "heavy_ball":
                eta = min(lr / (joint + opts.get("eps", 0.0)), opts.get("max_step", math.inf))
            else:
                eta = lr / math.sqrt(sum(float(x.pow(2).sum()) for x in m.values()))
            p = {k: p[k] - eta * m[k] for k in p}
        elif rule == "polyak":  # A3
            eta = min((float(L.detach()) - l_star) / joint**2, opts.get("max_step", math.inf))
            p = {k: p[k] - eta * g[k] for k in p}
        elif rule == "md":  # md §4, each tensor normalised by its own dual norm
            q = opts["p"] / (opts["p"] - 1.0)
            new = {}
            for k in p:
                G = (
                    g[k] / (g[k].abs().pow(q).sum() ** (1.0 / q) + torch.finfo(torch.float64).eps)
                    if opts["normalized"]
                    else g[k]
                )
                M = torch.sign(p[k]) * p[k].abs().pow(opts["p"] - 1.0) - lr * G
                new[k] = torch.sign(M) * M.abs().pow(1.0 / (opts["p"] - 1.0))
            p = new
        elif rule == "sd":  # steepest-descent §1: sign(g)|g|^(q-1) / ||g||_q^(q-1), one norm over all tensors
            if opts["p"] == math.inf:
                p = {k: p[k] - lr * torch.sign(g[k]) for k in p}
            else:
                q = opts["p"] / (opts["p"] - 1.0)
                norm = sum(float(x.abs().pow(q).sum()) for x in g.values()) ** (1.0 / q)
                p = {k: p[k] - lr * torch.sign(g[k]) * (g[k].abs() / norm) ** (q - 1.0) for k in p}
        elif rule in ("adam", "adam-noeps"):  # Kingma & Ba Algorithm 1; Loshchilov & Hutter Algorithm 2 (decay)
            b1, b2, eps = 0.9, 0.999, (opts.get("eps", 1e-8) if rule == "adam" else 0.0)
            m = {k: b1 * m[k] + (1 - b1) * g[k] for k in p}
            v2 = {k: b2 * v2[k] + (1 - b2) * g[k] ** 2 for k in p}
            step = {k: (m[k] / (1 - b1 ** (t + 1))) / ((v2[k] / (1 - b2 ** (t + 1))).sqrt() + eps) for k in p}
            p = {k: p[k] - lr * (step[k] + opts.get("weight_decay", 0.0) * p[k]) for k in p}
        elif rule == "preconditioned":  # preconditioned-regression §5.4: L^-1 g R^-1
            left, right = torch.linalg.inv(opts["left"]), torch.linalg.inv(opts["right"])
            p = {k: p[k] - lr * left @ g[k] @ right for k in p}
        else:  # A6: per block (v, attention), eta / (L (t+1)^alpha)
            eta = lr / (float(L.detach()) * (t + 1) ** opts["alpha"])
            p = {k: p[k] - eta * g[k] for k in p}
    return p


def _spd(d, seed):
    A = torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return A @ A.T / d + torch.eye(d, dtype=torch.float64)


RULES = [
    ("gd", {}),
    ("gd", {"momentum": 0.5}),
    ("ngd", {}),
    ("ngd", {"max_step": 0.3}),
    ("ngd", {"momentum": 0.5, "max_step": 2.0}),
    ("ngd", {"momentum": 0.5, "momentum_variant": "normalized_buffer"}),
    ("ngd", {"eps": 0.01, "schedule": "inv_sqrt"}),
    ("polyak", {"max_step": 5.0}),
    ("md", {"p": 3.0, "normalized": True}),
    ("md", {"p": 1.5, "normalized": False}),
    ("sd", {"p": math.inf}),
    ("sd", {"p": 1.5}),
    ("sd", {"p": 3.0, "schedule": "inv_sqrt"}),
    ("adam", {}),
    ("adam", {"eps": 1e-3, "weight_decay": 0.1}),
    ("adam-noeps", {}),
    ("preconditioned", {"left": 3, "right": 4}),  # seeds of SPD covariances of the data's width (_covariances)
]


def _covariances(rule, opts, d):
    return {k: _spd(d, seed) for k, seed in opts.items()} if rule == "preconditioned" else opts


def _optimizer(rule, opts, model, l_star):
    """The registry entry's torch.optim class, built as a user would (its own keyword arguments)."""
    cls = registry.get(rule).optimizer_class()
    if rule == "polyak":
        return cls(model.parameters(), optimal_loss=l_star, **opts)
    return cls(model.parameters(), lr=LR, **opts)


def _batched(param, init, data, rule, opts, **extra):
    kwargs = {
        "W": {"W0": init.get("W")},
        "KQ": {"K0": init.get("K"), "Q0": init.get("Q")},
        "diag": {"xi_k0": init.get("xi_k"), "xi_q0": init.get("xi_q")},
    }[param]
    W0 = kwargs.pop("W0", None)
    return batched.train(
        data.X,
        data.Z,
        data.y,
        data.v,
        W0,
        param=param,
        optimizer=parse_optimizer(rule).with_options(**opts),
        lr=None if rule == "polyak" else LR,
        steps=STEPS,
        **kwargs,
        **extra,
    )


# (param, data shape): n T^2 <= d^2 at (3, 3, 6), where the combined W trains through its kernel coefficients
SPACES = [("W", (4, 3, 5)), ("W", (3, 3, 6)), ("KQ", (4, 3, 5)), ("diag", (4, 3, 5))]


def test_the_table_covers_every_registry_entry():
    assert {rule for rule, _ in RULES} | {"joint"} == set(registry.names())  # joint: the trained-head test below


CASES = [
    pytest.param(rule, opts, param, shape, id=f"{rule}-{','.join(opts) or '-'}-{name}")
    for rule, opts in RULES
    for (param, shape), name in zip(SPACES, ["W", "W-kernel", "KQ", "diag"])
    if not (rule == "preconditioned" and param == "diag")  # matrices only: refused by name (test below)
]


@pytest.mark.parametrize("rule,opts,param,shape", CASES)
def test_class_name_and_spec_reference_agree(rule, opts, param, shape):
    opts = _covariances(rule, opts, shape[2])
    data = _data(*shape)
    init = _init(param, shape[2])
    reference = _combine(param, _reference(param, init, data, rule, opts))
    l_star = float(log_mean_loss(token_scores(data.X, data.y, data.v).amax(-1), "exp").exp())
    model = _model(param, init)
    al.train(model, _optimizer(rule, opts, model, l_star), data, steps=STEPS, record_every=STEPS)
    named = _batched(param, init, data, rule, opts).W[0]
    # 1e-12: the bar; the three agree to ~1e-15 over these 25 unsaturated steps
    torch.testing.assert_close(model.W.detach(), reference, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(named, reference, rtol=1e-12, atol=1e-12)


def test_the_preconditioner_refuses_the_diagonals_vectors_by_name():
    data, init = _data(), _init("diag", 5)
    with pytest.raises(ValidationError, match=r"the preconditioner.s left covariance has shape \(5, 5\), but tensor 0"):
        _batched("diag", init, data, "preconditioned", _covariances("preconditioned", dict(RULES)["preconditioned"], 5))


@pytest.mark.parametrize("param", ["W", "KQ", "diag"])
def test_joint_rule_with_a_trained_head_agrees(param):
    data = _data()
    init = _init(param, 5)
    opts = {"alpha": 2.0 / 3.0}
    reference = _reference(param, init, data, "joint", opts, head=True)
    model = _model(param, init, train_head=True)
    attention = [p for n, p in model.named_parameters() if n != "v"]
    optimizer = JointAdaptive([{"params": [model.v]}, {"params": attention}], lr=LR, alpha=opts["alpha"])
    al.train(model, optimizer, data, steps=STEPS, record_every=STEPS)
    named = _batched(
        param,
        init,
        TokenSelectionData(data.X, data.Z, data.y, torch.zeros_like(data.v)),
        "joint",
        opts,
        train_head=True,
    )
    # 1e-12: the bar (both doors and the reference start the head at 0)
    torch.testing.assert_close(model.W.detach(), _combine(param, reference), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model.v.detach(), reference["v"], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(named.params["v"][0], reference["v"], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(named.W[0], _combine(param, reference), rtol=1e-12, atol=1e-12)


def test_normalized_gd_past_saturation_matches_the_exact_direction():
    # past saturation autograd's gradient underflows to 0 while the log-scaled one keeps its direction: both doors
    # keep stepping with length lr exactly (||W_t - W_{t-1}|| = lr), where a plain loop would stop
    data = _data()
    init = _init("W", 5)
    model = _model("W", init)
    steps, lr = 400, 5.0
    al.train(model, NormalizedGD(model.parameters(), lr=lr), data, steps=steps, record_every=steps)
    named = batched.train(
        data.X,
        data.Z,
        data.y,
        data.v,
        init["W"],
        optimizer="ngd",
        lr=lr,
        steps=steps,
        keep_iterates=True,
        record_every=1,
    )
    torch.testing.assert_close(model.W.detach(), named.W[0], rtol=1e-12, atol=1e-9)
    lengths = torch.linalg.matrix_norm(named.iterates["W"][1:, 0] - named.iterates["W"][:-1, 0])
    torch.testing.assert_close(lengths, torch.full_like(lengths, lr), rtol=1e-9, atol=0.0)
    last = named.frame.iloc[-1]
    # saturated: the selected tokens' softmax rounds to 1 and the true gradient underflows double precision
    assert float(last["opt_softmax"]) == 1.0 and float(last["grad_norm"]) < 1e-300
