"""Batched runs: R runs at once equal R single runs; per-run rules match the single-run formulas."""

import pytest
import torch

from attnlab._validation import ValidationError
from attnlab.optim import parse_optimizer
from attnlab.training import batched


def _runs(R=4, n=5, T=4, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(R, n, T, d, generator=g)
    y = torch.sign(torch.randn(R, n, generator=g))
    v = torch.randn(R, d, generator=g)
    W0 = 0.01 * torch.randn(R, d, d, generator=g)
    return X, X[:, :, 0], y, v, W0


CASES = [
    ("gd", {}),
    ("ngd", {"max_step": 10.0}),
    ("ngd", {"momentum": 0.9, "max_step": 10.0}),
    ("ngd", {"momentum": 0.5, "momentum_variant": "normalized_buffer"}),
    ("polyak", {"max_step": 10.0}),
    ("md", {"p": 1.75}),
    ("md", {"p": 3.0, "normalized": False}),
]


def _lr(optimizer, lr=0.1):
    """Polyak takes no lr (its step is (L - L*)/||g||^2); every other rule takes one."""
    return None if optimizer == "polyak" else lr


@pytest.mark.parametrize("optimizer,options", CASES)
def test_batch_of_R_equals_R_single_runs(optimizer, options):
    X, Z, y, v, W0 = _runs()
    lr = _lr(optimizer)
    spec = parse_optimizer(optimizer).with_options(**options)
    batch = batched.train(X, Z, y, v, W0, optimizer=spec, lr=lr, steps=100).W
    for r in range(4):
        single = batched.train(X[r], Z[r], y[r], v[r], W0[r], optimizer=spec, lr=lr, steps=100).W[0]
        # 1e-12: the bar; reductions over a batch may sum in a different order than over one run
        torch.testing.assert_close(batch[r], single, rtol=1e-12, atol=1e-12)


def test_ngd_steps_have_exactly_the_asked_length_per_run():
    X, Z, y, v, W0 = _runs()
    lr = torch.tensor([0.1, 0.2, 0.3, 0.4])
    one = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=lr, steps=1).W
    torch.testing.assert_close(torch.linalg.matrix_norm(one - W0), lr, rtol=1e-12, atol=0.0)


def test_md_p2_equals_gd():
    X, Z, y, v, W0 = _runs()
    md = batched.train(X, Z, y, v, W0, optimizer="md:2,normalized=false", lr=0.3, steps=20).W
    gd = batched.train(X, Z, y, v, W0, optimizer="gd", lr=0.3, steps=20).W
    torch.testing.assert_close(md, gd, rtol=1e-12, atol=1e-14)


def test_kq_and_diag_match_the_module_gradients():
    from attnlab.data import TokenSelectionData
    from attnlab.models import Diagonal, Factored

    X, Z, y, v, _ = _runs(R=1)
    data = TokenSelectionData(X[0], Z[0], y[0], v[0])
    g = torch.Generator().manual_seed(1)
    K0, Q0 = torch.randn(6, 7, generator=g), torch.randn(6, 7, generator=g)
    res = batched.train(X, Z, y, v, param="KQ", optimizer="gd", lr=0.05, steps=3, K0=K0, Q0=Q0)
    model = Factored(6, 7, K0=K0, Q0=Q0)
    sgd = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(3):
        sgd.zero_grad()
        model.loss(data).sum().backward()
        sgd.step()
    torch.testing.assert_close(res.W[0], model.W.detach(), rtol=1e-12, atol=1e-13)
    xk, xq = torch.randn(6, generator=g), torch.randn(6, generator=g)
    res = batched.train(X, Z, y, v, param="diag", optimizer="gd", lr=0.05, steps=3, xi_k0=xk, xi_q0=xq)
    model = Diagonal(6, xi_k0=xk, xi_q0=xq)
    sgd = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(3):
        sgd.zero_grad()
        model.loss(data).sum().backward()
        sgd.step()
    torch.testing.assert_close(res.W[0], model.W.detach(), rtol=1e-12, atol=1e-13)


def test_records_tidy_metrics():
    X, Z, y, v, W0 = _runs()
    res = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=0.1, steps=10, record_every=5, W_ref=W0, bregman_p=2.0)
    assert len(res.frame) == 4 * 3
    assert {"run", "step", "loss", "grad_norm", "norm", "opt_softmax", "margin", "alignment", "bregman"} <= set(
        res.frame.columns
    )


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lr": -1.0}, "lr"),
        ({"optimizer": "md", "p": 1.0}, "p =="),
        ({"optimizer": "ngd", "max_step": 0.0}, "max_step"),
        ({"optimizer": "ngd", "momentum": 1.0}, "momentum"),
        ({"optimizer": "gd", "p": 2.0}, "unknown option"),
        ({"param": "KQ"}, "K0"),
    ],
)
def test_bad_arguments_name_the_problem(kwargs, match):
    X, Z, y, v, W0 = _runs()
    args = {"optimizer": "ngd", "lr": 0.1, "steps": 2, **kwargs}
    with pytest.raises(ValidationError, match=match):
        batched.train(X, Z, y, v, W0, **args)


def test_polyak_refuses_an_lr_it_would_ignore():
    X, Z, y, v, W0 = _runs()
    with pytest.raises(ValidationError, match="polyak' takes no lr.*max_step"):
        batched.train(X, Z, y, v, W0, optimizer="polyak", lr=1e-3, steps=2)


def test_a_diverging_run_stops_alone_with_its_last_finite_iterate():
    from attnlab.models.functional import attention_loss

    X, Z, y, v, W0 = (t.double() for t in _runs())
    # run 1 overflows: its first step puts W near 1e307, the logits at inf (an lr of 1e306 does not diverge: the
    # log-domain loss stays finite and the gradient underflows)
    lr = torch.tensor([0.1, 1.7e308, 0.1, 0.1], dtype=torch.float64)
    res = batched.train(X, Z, y, v, W0, optimizer="gd", lr=lr, steps=50, record_every=1)
    assert res.status == ["completed", "diverged", "completed", "completed"]
    stop = res.last_step[1]
    assert stop < 50
    # the returned iterate of the diverged run has a finite loss, and it is the iterate of its last step
    assert bool(torch.isfinite(attention_loss(X[1], Z[1], y[1], v[1], res.W[1])).all())
    again = batched.train(X[1], Z[1], y[1], v[1], W0[1], optimizer="gd", lr=lr[1], steps=stop).W[0]
    torch.testing.assert_close(res.W[1], again, rtol=0, atol=0)
    # the other runs are exactly the runs trained without it
    alone = batched.train(
        X[[0, 2, 3]],
        Z[[0, 2, 3]],
        y[[0, 2, 3]],
        v[[0, 2, 3]],
        W0[[0, 2, 3]],
        optimizer="gd",
        lr=lr[[0, 2, 3]],
        steps=50,
    ).W
    torch.testing.assert_close(res.W[[0, 2, 3]], alone, rtol=1e-12, atol=1e-14)
    rows = res.frame[res.frame["run"] == 1]
    assert rows["step"].max() == stop and bool(rows["loss"].notna().all()) and bool((rows["loss"] < float("inf")).all())


def _reference_W_loop(X, Z, y, v, W0, optimizer, lr, steps, momentum=0.0, max_step=None):
    """Plain per-run loop from the spec on W itself (loss_gradients, no kernel, no log-domain step sizes)."""
    from attnlab.losses import log_mean_loss
    from attnlab.models.functional import loss_gradients, token_scores

    W, m = W0.clone(), torch.zeros_like(W0)
    l_star = log_mean_loss(token_scores(X, y, v).amax(dim=-1), "exp").exp()
    for _ in range(steps):
        grad, _, log_risk = loss_gradients(X, Z, y, v, W, "exp")
        g = grad.value()
        norm = torch.linalg.matrix_norm(g)
        m = momentum * m + g
        if optimizer == "gd":
            eta = lr
        elif optimizer == "ngd":
            eta = lr / norm if max_step is None else min(lr / norm, max_step)
        else:  # spec ngd A3: min((L - L*) / ||g||^2, cap)
            eta = min((log_risk.exp() - l_star) / norm**2, max_step)
        W = W - eta * m
    return W


@pytest.mark.parametrize(
    "optimizer,options",
    [
        ("gd", {}),
        ("ngd", {}),
        ("ngd", {"max_step": 0.5}),
        ("ngd", {"momentum": 0.9, "max_step": 10.0}),
        ("polyak", {"max_step": 10.0}),
    ],
)
def test_kernel_coefficients_path_equals_steps_on_W(optimizer, options):
    # d = 12 >= sqrt(n) T: train moves the nT kernel coefficients, not W; it must follow the same iterates
    X, Z, y, v, W0 = _runs(R=3, n=5, T=3, d=12, seed=7)
    spec = parse_optimizer(optimizer).with_options(**options)
    res = batched.train(X, Z, y, v, W0, optimizer=spec, lr=_lr(optimizer), steps=60)
    for r in range(3):
        ref = _reference_W_loop(X[r], Z[r], y[r], v[r], W0[r], optimizer, 0.1, 60, **options)
        # 1e-11: 60 steps of rounding, logits updated rather than recomputed; a wrong step is off by ~1e-2
        torch.testing.assert_close(res.W[r], ref, rtol=1e-11, atol=1e-12)


def test_kernel_path_batch_equals_single_runs_and_shared_data():
    X, Z, y, v, W0 = _runs(R=4, n=5, T=3, d=12, seed=8)
    batch = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=0.1, steps=100).W
    for r in range(4):
        single = batched.train(X[r], Z[r], y[r], v[r], W0[r], optimizer="ngd", lr=0.1, steps=100).W[0]
        torch.testing.assert_close(batch[r], single, rtol=1e-12, atol=1e-12)  # 1e-12: the bar
    # one data set, R initialisations: one shared kernel, same runs as with the data repeated per run
    shared = batched.train(X[0], Z[0], y[0], v[0], W0, optimizer="ngd", lr=0.1, steps=100).W
    repeated = batched.train(
        X[:1].expand(4, -1, -1, -1).clone(),
        Z[:1].expand(4, -1, -1).clone(),
        y[:1].expand(4, -1).clone(),
        v[:1].expand(4, -1).clone(),
        W0,
        optimizer="ngd",
        lr=0.1,
        steps=100,
    ).W
    torch.testing.assert_close(shared, repeated, rtol=1e-12, atol=1e-12)


def test_kernel_path_ngd_step_has_the_asked_length_and_records():
    X, Z, y, v, W0 = _runs(R=4, n=5, T=3, d=12, seed=9)
    lr = torch.tensor([0.1, 0.2, 0.3, 0.4])
    one = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=lr, steps=1).W
    # ||W_1 - W_0|| comes out of the kernel form u^T K u; 1e-12 relative
    torch.testing.assert_close(torch.linalg.matrix_norm(one - W0), lr, rtol=1e-12, atol=0.0)
    res = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=0.1, steps=10, record_every=5, W_ref=W0)
    assert len(res.frame) == 4 * 3 and bool((res.frame["loss"].diff().dropna() != 0).any())


def test_normalized_md_on_kq_normalises_each_tensor_by_its_own_dual_norm():
    # documented: K and Q are normalised separately (the official code's per-tensor ||G||_q + eps), so with p = 2 each
    # of K and Q moves by exactly lr in Frobenius norm (a joint normalisation would move (K, Q) by lr together)
    X, Z, y, v, _ = (t.double() for t in _runs(R=1))
    g = torch.Generator().manual_seed(3)
    K0, Q0 = torch.randn(6, 4, generator=g, dtype=torch.float64), torch.randn(6, 4, generator=g, dtype=torch.float64)
    one = batched.train(X, Z, y, v, param="KQ", optimizer="md:2,eps=0", lr=0.1, steps=1, K0=K0, Q0=Q0)
    for name, start in (("K", K0), ("Q", Q0)):
        moved = torch.linalg.matrix_norm(one.params[name][0] - start)
        torch.testing.assert_close(moved, torch.tensor(0.1, dtype=torch.float64), rtol=1e-12, atol=0.0)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"y": "zero-one"}, r"y must hold only -1 and \+1, found \[0.0\]"),
        ({"y": "two"}, r"y must hold only -1 and \+1, found \[-2.0, 2.0\]"),
        ({"X": "one-token"}, "X has 1 entries along axis 'T', needs at least 2"),
        ({"optimizer": "polyak", "optimal_loss": float("nan")}, "optimal_loss has 1 non-finite"),
        ({"optimizer": "polyak", "optimal_loss": -1.0}, "optimal_loss == -1.0, must be finite and >= 0"),
        ({"train_head": "no"}, "train_head == 'no', must be a bool"),
        ({"keep_iterates": 1}, "keep_iterates == 1, must be a bool"),
        ({"select": [0.0, 1.0, 2.0, 0.0, 1.0]}, "select must be 5 integer token indices .* got dtype float64"),
        ({"select": [0, 1, 2, 0]}, r"select must be 5 integer token indices .* got shape \(4,\)"),
        ({"select": [0, 1, 2, 0, 4]}, r"select holds indices outside \[0, 3\]"),
        ({"optimizer": "md", "p": 3.0, "normalized": 1}, "normalized == 1, must be a bool"),
        ({"X": "no-sequences"}, r"X holds no sequences \(n == 0\)"),
        ({"v": "zero"}, r"every token score y_i v\^T x_it of run\(s\) \[0, 1\] is 0 .* no token is optimal"),
        ({"bregman_p": "x"}, "bregman_p must be a Real"),
        ({"bregman_p": 1.0, "W_ref": "eye"}, "bregman_p == 1.0, must be > 1.0"),
        (
            {"bregman_p": 1.5},
            "bregman_p adds the Bregman divergence to the references' directions, but no W_ref or refs was given",
        ),
        ({"trainable": {"W": "no"}}, r"trainable\['W'\] must be a bool or a boolean mask"),
    ],
)
def test_refuses_what_the_rest_refuses(change, match):
    X, Z, y, v, W0 = _runs(R=2)
    change = dict(change)
    y = {None: y, "zero-one": (y + 1) / 2, "two": 2 * y}[change.pop("y", None)]
    X = {None: X, "one-token": X[:, :, :1], "no-sequences": X[:, :0]}[change.pop("X", None)]
    if change.pop("v", None):
        v = torch.zeros_like(v)
    if change.get("W_ref") == "eye":
        change["W_ref"] = torch.eye(X.shape[-1], dtype=torch.float64)
    optimizer = change.pop("optimizer", "ngd")
    lr = None if optimizer == "polyak" else 0.1
    with pytest.raises(ValidationError, match=match):
        batched.train(X, Z, y, v, W0, optimizer=optimizer, lr=lr, steps=2, **change)


def test_integers_of_any_integral_type_are_accepted():
    import numpy as np

    X, Z, y, v, W0 = _runs(R=2)
    a = batched.train(
        X, Z, y, v, W0, steps=np.int64(3), record_every=np.int32(1), select=torch.zeros(2, 5, dtype=torch.int32)
    )
    b = batched.train(X, Z, y, v, W0, steps=3, record_every=1, select=torch.zeros(2, 5, dtype=torch.int64))
    assert torch.equal(a.W, b.W) and a.frame.equals(b.frame)


def test_inputs_are_copied_not_aliased():
    X, Z, y, v, W0 = (t.double() for t in _runs(R=2))
    run = batched.train(X, Z, y, v, W0, steps=0)
    W0.add_(1.0)  # the caller's array changes after the call: the run's does not
    assert not torch.equal(run.W, W0)


def test_progress_none_shows_a_bar_only_on_a_terminal_and_a_non_bool_is_refused(capsys):
    """progress=None is what an experiment's RunContext passes (a bar only on a terminal): it must run, silently here."""
    X, Z, y, v, W0 = _runs()
    quiet = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=0.1, steps=3, progress=False).W
    auto = batched.train(X, Z, y, v, W0, optimizer="ngd", lr=0.1, steps=3, progress=None).W
    torch.testing.assert_close(auto, quiet, rtol=0, atol=0)
    assert capsys.readouterr().err == ""  # pytest's stderr is not a terminal
    with pytest.raises(ValidationError, match="progress == 'yes', must be a bool"):
        batched.train(X, Z, y, v, W0, optimizer="ngd", lr=0.1, steps=3, progress="yes")


def test_the_callers_initial_values_are_never_trained_in_place():
    X, Z, y, v, W0 = _runs()
    for start in (
        W0.double(),
        W0[0].double(),
    ):  # float64 with a runs axis (the validated copy is the one trained), one W0 for all
        kept = start.clone()
        result = batched.train(X, Z, y, v, W0=start, optimizer="gd", lr=0.5, steps=20)
        assert torch.equal(start, kept)
        assert not torch.equal(result.W[0], kept if start.dim() == 2 else kept[0])  # it did train


def test_polyak_with_a_trained_head_takes_l_star_zero_not_the_initial_heads():
    # the default L* was the initial head's: no lower bound once the head moves, so a run stalled at it or was refused
    # mid-run (ValidationError "optimal_loss ... is above the current loss") when its loss fell below it
    from attnlab.metrics import optimal_loss

    X, Z, y, v, W0 = (t.double() for t in _runs(R=3, d=6, T=3))
    result = batched.train(X, Z, y, v, W0, optimizer="polyak:max_step=2", steps=40, train_head=True, record_every=1)
    initial = optimal_loss(X, y, v)  # the fixed-head L* of the initial head, per run
    lowest = torch.tensor(result.frame.groupby("run").loss.min().to_numpy())
    assert result.status == ["completed"] * 3 and bool((lowest < initial).all())
    explicit = batched.train(
        X, Z, y, v, W0, optimizer="polyak:max_step=2,optimal_loss=0", steps=40, train_head=True, record_every=1
    )
    assert torch.equal(result.W, explicit.W) and torch.equal(result.params["v"], explicit.params["v"])


@pytest.mark.parametrize("length", [1, 3])
def test_a_per_run_optimal_loss_of_another_length_is_refused_by_name(length):
    # it failed inside the first step with a raw RuntimeError (3 values for 2 runs) or broadcast silently (1 value)
    X, Z, y, v, W0 = _runs(R=2)
    spec = parse_optimizer("polyak")
    with pytest.raises(ValidationError, match=f"optimal_loss has {length} values for 2 runs"):
        batched.train(X, Z, y, v, W0, optimizer=spec.with_options(optimal_loss=torch.zeros(length)), steps=3)
    assert batched.train(X, Z, y, v, W0, optimizer=spec.with_options(optimal_loss=torch.zeros(2)), steps=3).ok


def test_a_zero_head_with_a_selection_or_a_trained_head_runs():
    """A head that scores every token 0 selects no optimal token; the selection given, or a head that learns, is fine."""
    X, Z, y, v, W0 = _runs(R=2)
    zero = torch.zeros_like(v)
    given = batched.train(X, Z, y, zero, W0, steps=2, select=torch.zeros(2, 5, dtype=torch.int64))
    learned = batched.train(X, Z, y, zero, W0, steps=2, train_head=True)
    assert given.status == learned.status == ["completed", "completed"]


def test_one_lr_per_run_on_one_data_set_names_the_runs_axis_to_add():
    X, Z, y, v, _ = _runs(R=1)
    with pytest.raises(
        ValidationError, match=r"lr has 3 values, one per run, .* 1 run\(s\); .* W0=torch.zeros\(3, d, d_q\)"
    ):
        batched.train(X[0], Z[0], y[0], v[0], lr=[0.1, 0.2, 0.3], steps=2)
    run = batched.train(X[0], Z[0], y[0], v[0], torch.zeros(3, X.shape[-1], Z.shape[-1]), lr=[0.1, 0.2, 0.3], steps=2)
    assert run.status == ["completed"] * 3


def test_token_sets_where_one_token_per_sequence_is_expected_are_named():
    X, Z, y, v, W0 = _runs(R=1)
    with pytest.raises(ValidationError, match="got lists of different lengths; token sets"):
        batched.train(X[0], Z[0], y[0], v[0], steps=1, select=[[0, 1], [0], [0], [0], [0]])
