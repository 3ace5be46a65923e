"""A probe of the Python API with bad and borderline input: every case ends in a clean error that names the argument,
or in a result that agrees with an independent computation (a plain loop, a closed form, a second solver).

Each case is ``(name, call, expected)``: ``expected`` is a regular expression the error message must match, or
None when ``call`` returns True exactly when its result agrees with the independent answer. Anything else (a
traceback from inside torch or cvxpy, a silent wrong value) fails the case.
"""

import re
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import attnlab as al
from attnlab._validation import ValidationError
from attnlab.data import TokenSelectionData, example1, sets_from_probabilities, stack
from attnlab.explain import explain
from attnlab.metrics import alignment, attention_margin, bregman, cosine, head_alignment
from attnlab.models import Combined, Diagonal, Factored, ReluHead, attention_logits, attention_probabilities
from attnlab.ntk import empirical_ntk
from attnlab.probe import capture, head_W
from attnlab.svm import attention_svm, set_direction_svm
from attnlab.training import batched
from attnlab.training.flow import gradient_flow


def _data(n=4, T=3, d=5, seed=0):
    return example1(n=n, T=T, d=d, seed=seed)


def _sgd(model, data, steps=5, lr=0.3, **kw):
    return al.train(model, torch.optim.SGD(model.parameters(), lr=lr), data, steps=steps, **kw)


def _ngd(model, data, steps=5, lr=0.3, **kw):
    return al.train(model, al.optim.NormalizedGD(model.parameters(), lr=lr), data, steps=steps, **kw)


def _plain_sgd_W(data, steps, lr):
    """Plain torch loop on a combined W: autograd of the model's loss."""
    model = Combined(data.d)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        model.loss(data).backward()
        opt.step()
    return model.W.detach()


def _close(a, b, tol=1e-10):
    return bool(torch.allclose(torch.as_tensor(a), torch.as_tensor(b), rtol=tol, atol=tol))


def _frozen_diag_sgd():
    model = Diagonal(5)
    model.xi_q.requires_grad_(False)
    q0 = model.xi_q.detach().clone()
    _sgd(model, _data(), steps=10)
    return torch.equal(model.xi_q.detach(), q0)


def _frozen_diag_flow():
    model = Diagonal(5, xi_q0=0.1 * torch.ones(5))
    model.xi_k.requires_grad_(False)
    k0 = model.xi_k.detach().clone()
    gradient_flow(model, _data(), step=0.05, steps=10)
    return torch.equal(model.xi_k.detach(), k0)


def _frozen_all():
    model = Combined(5)
    model.weight.requires_grad_(False)
    return _sgd(model, _data())


def _runs_model_matches_single_runs():
    datasets = [_data(seed=s) for s in range(3)]
    model = Combined(5, W0=torch.zeros(3, 5, 5))
    _ngd(model, stack(datasets), steps=6)
    singles = []
    for data in datasets:
        single = Combined(5)
        _ngd(single, data, steps=6)
        singles.append(single.W.detach())
    return _close(model.W.detach(), torch.stack(singles))


def _float32_model():
    half, full = Combined(5).float(), Combined(5)
    _sgd(half, _data())
    _sgd(full, _data())
    return half.W.dtype == torch.float64 and _close(half.W.detach(), full.W.detach(), 0)


def _batched_select_margin():
    data = _data()
    select = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    W0 = 0.1 * torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    run = batched.train(data.X, data.Z, data.y, data.v, W0, steps=3, record_every=1, select=select)
    last = run.frame[run.frame["step"] == 3].sort_values("run")["margin"].to_numpy()
    expected = [float(attention_margin(data.X, data.Z, run.W[r], select[r])) for r in range(2)]  # per run's W
    # plain loop: min over t != sel of (x_sel - x_t)^T W z
    loop = [
        min(
            float((data.X[i, int(select[r, i])] - data.X[i, t]) @ run.W[r] @ data.Z[i])
            for i in range(4)
            for t in range(3)
            if t != int(select[r, i])
        )
        for r in range(2)
    ]
    return np.allclose(last, expected, rtol=1e-12) and np.allclose(last, loop, rtol=1e-12)


def _integer_labels_equal_float_labels():
    data = _data()
    y_int = np.asarray(data.y.numpy(), dtype=np.int64)
    a = batched.train(data.X, data.Z, y_int, data.v, steps=4)
    b = batched.train(data.X, data.Z, data.y, data.v, steps=4)
    return torch.equal(a.W, b.W)


def _flow_gd_is_sgd():
    data = _data()
    model = Combined(5)
    gradient_flow(model, data, step=0.2, steps=5, method="gd")
    return _close(model.W.detach(), _plain_sgd_W(data, 5, 0.2))


def _near_tie_svm():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(4, 3, 3, generator=g, dtype=torch.float64)
    X[0, 1] = X[0, 0] + 1e-8 * torch.tensor([1.0, -0.5, 0.3], dtype=torch.float64)
    data = TokenSelectionData(X, Z=X[:, 0], y=[1, 1, 1, 1], select=[0, 0, 0, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = attention_svm(data, "fro")
    return sol.margin >= 1 - 1e-5 and sol.norm_value == pytest.approx(
        attention_svm(data, "fro", method="dual").norm_value, rel=1e-4
    )


def _svm_primal_equals_dual():
    data = _data(n=3, T=3, d=8)
    return attention_svm(data, "fro").norm_value == pytest.approx(
        attention_svm(data, "fro", method="dual").norm_value, rel=1e-6
    )


def _margin_loop():
    data = _data()
    W = torch.randn(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    sel = data.optimal_tokens()
    loop = min(
        float((data.X[i, sel[i]] - data.X[i, t]) @ W @ data.Z[i]) for i in range(4) for t in range(3) if t != sel[i]
    )
    return abs(float(attention_margin(data.X, data.Z, W, sel)) - loop) < 1e-12


def _linear_ntk():
    net = nn.Linear(3, 2, dtype=torch.float64)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return _close(empirical_ntk(net, x, mode="trace"), 2 * (x @ x.T + 1), 1e-12)  # closed form of a linear layer


def _float32_data():
    X = torch.randn(3, 4, 2, generator=torch.Generator().manual_seed(0))
    data = TokenSelectionData(X, y=[1, -1, 1], v=[1.0, 0.0])
    return data.X.dtype == torch.float64 and torch.equal(data.X, X.double())


def _copied_data():
    X = torch.randn(3, 4, 2, dtype=torch.float64)
    data = TokenSelectionData(X, y=[1, -1, 1])
    X.mul_(0)
    return bool((data.X != 0).any())


def _broadcast_metrics_per_run():
    datasets = [_data(seed=s) for s in range(2)]
    W_ref = torch.eye(5, dtype=torch.float64)
    model = Combined(5, W0=0.1 * torch.ones(5, 5))
    traj = _ngd(model, stack(datasets), steps=4, metrics=[alignment(W_ref)], broadcast=True)
    last = traj.frame[traj.frame["step"] == 4].sort_values("run")["alignment"].to_numpy()
    return np.allclose(last, [float(cosine(model.W[r].detach(), W_ref)) for r in range(2)], rtol=1e-12)


class _MixesSamples(nn.Module):
    """A module whose output for a sample depends on the batch: ``Linear(x - mean over the batch)``."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 2, dtype=torch.float64)

    def forward(self, x):
        return self.linear(x - x.mean(0))


def _eval_batchnorm_ntk():
    """BatchNorm in eval mode is per sample: the kernel is the linear layer's on the normalised inputs."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.BatchNorm1d(3, dtype=torch.float64), nn.Linear(3, 1, dtype=torch.float64))
    net[0].running_mean.fill_(0.5)
    net[0].running_var.fill_(4.0)
    net[0].weight.requires_grad_(False)
    net[0].bias.requires_grad_(False)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    u = (x - 0.5) / (4.0 + net[0].eps) ** 0.5 * net[0].weight.detach() + net[0].bias.detach()
    return _close(empirical_ntk(net, x, mode="trace", eval_mode=True), u @ u.T + 1, 1e-12)  # closed form


def _whole_sequence_set_direction():
    """Sequence 1's set is its whole sequence: the program keeps its equalities (every logit equal) and warns."""
    g = torch.Generator().manual_seed(3)
    data = TokenSelectionData(torch.randn(3, 4, 5, generator=g, dtype=torch.float64), y=[1, -1, 1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sol = set_direction_svm(data, [[0, 2], [0, 1, 2, 3], [1]])
    logits = attention_logits(data.X, sol.W, data.Z)
    named = any("sequences [1] hold the whole sequence" in str(w.message) for w in caught)
    loop = min(  # plain loop over the margin constraints of sequences 0 and 2
        float((data.X[i, a] - data.X[i, t]) @ sol.W @ data.Z[i])
        for i, inside in ((0, (0, 2)), (2, (1,)))
        for a in inside
        for t in range(4)
        if t not in inside
    )
    return named and float((logits[1] - logits[1, 0]).abs().max()) < 1e-7 and abs(loop - 1) < 1e-7


def _relu_head():
    g = torch.Generator().manual_seed(4)
    return ReluHead(torch.randn(5, 5, generator=g, dtype=torch.float64), torch.ones(5, dtype=torch.float64))


class _MaskedMHA(nn.Module):
    """A model around a MultiheadAttention that passes its masks on."""

    def __init__(self, **masks):
        super().__init__()
        torch.manual_seed(0)
        self.mha, self.masks = nn.MultiheadAttention(4, 2, batch_first=True, dtype=torch.float64), masks

    def forward(self, x):
        return self.mha(x, x, x, **self.masks)


def _captured_padding_reproduces_torch():
    padding = torch.tensor([[0, 0, 1, 0], [1, 0, 0, 0]], dtype=torch.bool)
    model, x = _MaskedMHA(key_padding_mask=padding), torch.randn(2, 4, 4, dtype=torch.float64)
    data = capture(model, model.mha, x, query=1)
    with torch.no_grad():
        own = model.mha(x, x, x, key_padding_mask=padding, average_attn_weights=False)[1][:, 0, 1]  # (n, T)
    mine = attention_probabilities(data.X, head_W(model.mha, 0), data.Z)
    return _close(mine, own[~padding].reshape(2, 3), 1e-12)


def _captured_bias():
    model = _MaskedMHA(attn_mask=torch.full((3, 3), 0.5, dtype=torch.float64))  # a bias, not a mask
    return capture(model, model.mha, torch.ones(1, 3, 4, dtype=torch.float64))


D = _data()
X, Z, Y, V = D.X, D.Z, D.y, D.v

CASES = [
    # al.train
    ("train: 0/1 labels", lambda: _sgd(Combined(5), TokenSelectionData(X, y=[0, 1, 0, 1], v=V)), r"y must hold only"),
    ("train: numpy steps", lambda: len(_sgd(Combined(5), D, steps=np.int64(4)).frame) == 5, None),
    ("train: bool steps", lambda: _sgd(Combined(5), D, steps=True), "steps must be a int"),
    ("train: record_every 0", lambda: _sgd(Combined(5), D, record_every=0), "record_every == 0, must be >= 1"),
    ("train: unknown loss", lambda: _sgd(Combined(5), D, loss="hinge"), "loss == 'hinge', must be one of"),
    ("train: data as dict", lambda: _sgd(Combined(5), {"X": X}), "data must be a TokenSelectionData"),
    ("train: d mismatch", lambda: _sgd(Factored(4, 4), D), "model has d = 4 but the data's tokens have d = 5"),
    ("train: float32 model", _float32_model, None),
    ("train: runs axis matches", _runs_model_matches_single_runs, None),
    ("train: progress 1", lambda: _sgd(Combined(5), D, progress=1), "progress == 1, must be a bool"),
    ("train: optimizer list", lambda: al.train(Combined(5), [], D), "optimizer must be a torch.optim.Optimizer"),
    ("train: frozen xi_q", _frozen_diag_sgd, None),
    ("train: everything frozen", _frozen_all, "no parameter of the model is trained"),
    ("train: broadcast 'yes'", lambda: _sgd(Combined(5), D, broadcast="yes"), "broadcast == 'yes', must be a bool"),
    ("train: broadcast metrics", _broadcast_metrics_per_run, None),
    (
        "train: stacked runs reference on one model",
        lambda: _sgd(Combined(5), D, metrics=[alignment(torch.ones(2, 5, 5))]),
        r"W_ref has shape \(2, 5, 5\), but the trained W has shape \(5, 5\)",
    ),
    # batched.train
    ("batched: 0/1 labels", lambda: batched.train(X, Z, (Y + 1) / 2, V, steps=1), r"y must hold only -1 and \+1"),
    ("batched: T = 1", lambda: batched.train(X[:, :1], Z, Y, V, steps=1), "needs at least 2"),
    ("batched: lr < 0", lambda: batched.train(X, Z, Y, V, lr=-1.0, steps=1), "lr must be > 0"),
    (
        "batched: lr per run, wrong R",
        lambda: batched.train(X, Z, Y, V, lr=[0.1, 0.2], steps=1),
        "lr has 2 values, one per run",
    ),
    ("batched: W0 of another d", lambda: batched.train(X, Z, Y, V, torch.zeros(4, 4), steps=1), "W0 has shape"),
    ("batched: float select", lambda: batched.train(X, Z, Y, V, steps=1, select=[0.0, 1.0, 2.0, 0.0]), "got dtype"),
    ("batched: select per run", _batched_select_margin, None),
    ("batched: misspelt option", lambda: batched.train(X, Z, Y, V, steps=1, momentun=0.9), "unknown option"),
    ("batched: momentum 1.5", lambda: batched.train(X, Z, Y, V, steps=1, momentum=1.5), "momentum == 1.5"),
    ("batched: polyak lr", lambda: batched.train(X, Z, Y, V, optimizer="polyak", lr=0.1, steps=1), "takes no lr"),
    (
        "batched: polyak L* inf",
        lambda: batched.train(X, Z, Y, V, optimizer="polyak", optimal_loss=float("inf"), steps=1),
        "optimal_loss has 1 non-finite",
    ),
    ("batched: KQ without Q0", lambda: batched.train(X, Z, Y, V, param="KQ", K0=torch.ones(5, 5)), "missing"),
    ("batched: NaN token", lambda: batched.train(X.masked_fill(X > 1.5, float("nan")), Z, Y, V), "non-finite"),
    ("batched: integer labels", _integer_labels_equal_float_labels, None),
    ("batched: all frozen", lambda: batched.train(X, Z, Y, V, steps=1, trainable={"W": False}), "freezes every"),
    ("batched: device tpu", lambda: batched.train(X, Z, Y, V, steps=1, device="tpu"), "is not a torch device"),
    (
        "batched: device meta",
        lambda: batched.train(X, Z, Y, V, steps=1, device="meta"),
        "device == 'meta' holds shapes",
    ),
    ("batched: W0 'zeros'", lambda: batched.train(X, Z, Y, V, "zeros", steps=1), "W0 == 'zeros' is a string"),
    (
        "batched: d = 0",
        lambda: batched.train(X[..., :0], Z[..., :0], Y, V[:0], steps=1),
        "X has width d = 0 and Z width d_q = 0",
    ),
    ("batched: zero W_ref", lambda: batched.train(X, Z, Y, V, steps=1, W_ref=torch.zeros(5, 5)), "W_ref is zero"),
    (
        "batched: a zero ref of one run",
        lambda: batched.train(
            torch.stack([X, X]), Z, Y, V, steps=1, refs={"svm": torch.stack([torch.eye(5), torch.zeros(5, 5)])}
        ),
        r"refs\['svm'\] is zero \(runs \[1\]\)",
    ),
    # flow
    ("flow: step 0", lambda: gradient_flow(Combined(5), D, step=0.0, steps=1), "step == 0.0, must be > 0"),
    ("flow: unknown method", lambda: gradient_flow(Combined(5), D, step=0.1, steps=1, method="euler"), "method"),
    ("flow: runs axis", lambda: gradient_flow(Combined(5), stack([D, D]), step=0.1, steps=1), "runs axis of 2"),
    ("flow: gd is plain SGD", _flow_gd_is_sgd, None),
    ("flow: frozen xi_k", _frozen_diag_flow, None),
    ("flow: d mismatch", lambda: gradient_flow(Diagonal(3), D, step=0.1, steps=1), "model has d = 3"),
    # svm
    ("svm: p < 1", lambda: attention_svm(D, 0.5), "p == 0.5, must be >= 1"),
    ("svm: select out of range", lambda: attention_svm(D, select=[0, 1, 2, 3]), r"outside \[0, 2\]"),
    ("svm: unknown solver", lambda: attention_svm(D, solver="gurobi"), "solver == 'gurobi'"),
    ("svm: near tie", _near_tie_svm, None),
    ("svm: primal equals dual", _svm_primal_equals_dual, None),
    ("svm: data as tuple", lambda: attention_svm((X, Z, Y)), "data must be a TokenSelectionData"),
    ("svm: a whole-sequence set", _whole_sequence_set_direction, None),
    (
        "svm: every set a whole sequence",
        lambda: set_direction_svm(D, torch.ones(4, 3, dtype=torch.bool)),
        r"sequences \[0, 1, 2, 3\] \(every sequence\) hold the whole sequence",
    ),
    ("svm: probability rows summing to 1.8", lambda: sets_from_probabilities([[0.9, 0.9, 0.0]]), "do not sum to 1"),
    ("svm: negative probabilities", lambda: sets_from_probabilities([[1.1, -0.1, 0.0]]), "negative entries"),
    # explain
    (
        "explain: nonlinear head without select",
        lambda: explain(D.with_(select=None), head=_relu_head(), steps=2),
        r"head= trains with a fixed nonlinear head.*pass select=",
    ),
    # probe
    ("capture: key_padding_mask", _captured_padding_reproduces_torch, None),
    ("capture: a float bias mask", _captured_bias, r"finite non-zero entries \(e.g. 0.5\)"),
    # metrics
    ("metrics: cosine scale-free", lambda: abs(float(cosine(2 * X[0], X[0])) - 1) < 1e-15, None),
    ("metrics: margin by a loop", _margin_loop, None),
    ("metrics: W_ref vector", lambda: alignment([1.0, 2.0]), r"W_ref has shape \(2,\)"),
    ("metrics: zero W_ref", lambda: alignment(torch.zeros(5, 5)), "W_ref is zero"),
    ("metrics: zero W_ref of Bregman", lambda: bregman(torch.zeros(5, 5), 2.0), "W_ref is zero"),
    ("metrics: zero v_ref", lambda: head_alignment(torch.zeros(5)), "v_ref is zero"),
    # data
    ("data: X of 2 axes", lambda: TokenSelectionData(X[0], y=[1, -1, 1]), "expected 3 axes"),
    ("data: d = 0", lambda: TokenSelectionData(X[..., :0], y=Y), "X has 0 entries along axis 'd'"),
    ("data: d_q = 0", lambda: TokenSelectionData(X, Z=Z[:, :0], y=Y), "Z has 0 entries along axis 'q'"),
    ("data: complex tokens", lambda: TokenSelectionData(X.to(torch.complex128), y=Y), "X is complex"),
    ("data: Z of another n", lambda: TokenSelectionData(X, Z=Z[:2], y=Y), "axis 'n' has size 2"),
    ("data: boolean select", lambda: TokenSelectionData(X, y=Y, select=np.ones(4, bool)), "got dtype bool"),
    ("data: float32 converted", _float32_data, None),
    ("data: copied, not aliased", _copied_data, None),
    ("data: stack of unequal shapes", lambda: stack([D, _data(n=3)]), r"must share \(n, T, d, d_q\)"),
    ("data: with_ bad labels", lambda: D.with_(y=torch.full((4,), 2.0)), r"y must hold only"),
    # ntk
    ("ntk: list input", lambda: empirical_ntk(nn.Linear(3, 2), [[1.0, 2.0, 3.0]]), "x1 must be a torch.Tensor"),
    (
        "ntk: dropout in training",
        lambda: empirical_ntk(nn.Sequential(nn.Linear(3, 2), nn.Dropout()), torch.ones(2, 3)),
        r"training mode and holds Dropout",
    ),
    ("ntk: linear closed form", _linear_ntk, None),
    (
        "ntk: module mixing samples",
        lambda: empirical_ntk(_MixesSamples(), torch.ones(4, 3).double().cumsum(0)),
        "mixes samples",
    ),
    ("ntk: module returning a tuple", lambda: empirical_ntk(nn.GRU(3, 2), torch.ones(4, 3)), "returns a tuple"),
    ("ntk: batch norm in eval mode", _eval_batchnorm_ntk, None),
    ("ntk: chunk_size 0", lambda: empirical_ntk(nn.Linear(3, 2), torch.ones(2, 3), chunk_size=0), "chunk_size == 0"),
    (
        "ntk: eval_mode 'yes'",
        lambda: empirical_ntk(nn.Linear(3, 2), torch.ones(2, 3), eval_mode="yes"),
        "eval_mode == 'yes', must be a bool",
    ),
]


def judge(call, expected) -> bool:
    """True when ``call`` ends as ``expected`` says (see the module docstring)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = call()
    except (ValidationError, TypeError) as err:  # attnlab's errors; TypeError where a non-data type is refused
        return expected is not None and re.search(expected, str(err)) is not None
    except Exception:  # a traceback from inside torch, cvxpy or numpy
        return False
    return expected is None and out is True


@pytest.mark.parametrize(("name", "call", "expected"), CASES, ids=[c[0] for c in CASES])
def test_probe_case(name, call, expected):
    assert judge(call, expected), name
