"""The optimizer registry: a made-up optimizer (one transform, one entry) runs through every front door with no other
edit; every entry is listed by the docstrings that list optimizers; unknown options are refused by name.

The made-up rule is sign descent on each tensor's larger entries (``|g| >= max |g| / 2``); its reference is a plain
loop on autograd gradients of the attention loss (spec implicit-bias-ngd §3).
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

import attnlab as al
import attnlab.tasks  # noqa: F401  (registers the batched-train sweep task, as a user's script must)
from attnlab import batched
from attnlab._validation import ValidationError
from attnlab.cli import main
from attnlab.data import example1
from attnlab.explain import explain
from attnlab.models.functional import attention_loss
from attnlab.optim import parse_optimizer, registry
from attnlab.optim.transforms import Rule, Step, Transform, scale_by_lr
from attnlab.runner import load_sweep, run_sweep

N, T, D, STEPS, LR = 4, 3, 16, 20, 0.05


def half_sign() -> Transform:
    """The one transform: the sign of the entries at least half the largest of their tensor, a unit step."""

    def update(step, state, ctx):
        out = []
        for m in step.direction:  # mantissas ([R,] ...): their signs and ratios are the gradient's
            top = m.abs() >= m.abs().amax(dim=tuple(range(ctx.run_dims, m.dim())), keepdim=True) / 2
            out.append(torch.sign(m) * top)
        coefs = [c - step.log_scale for c in step.log_coef]  # drop the gradient's size: a unit step
        return Step(out, step.log_scale, coefs, step.factor), state

    return Transform("half_sign", lambda params: None, update, coefficient_only=False, scale_invariant=True)


ENTRY = registry.OptimizerEntry(  # the one entry
    name="half-sign",
    summary="sign descent on each tensor's entries of at least half its largest gradient",
    spec="steepest-descent §1 (a test's own rule)",
    options=(registry.Option("lr", registry.positive, 0.1, "step per moved entry"),),
    chain=lambda h: Rule((half_sign(), scale_by_lr(h["lr"]))),
)
TEXT = f"half-sign:lr={LR}"


@pytest.fixture
def made_up():
    with registry.registered(ENTRY):
        yield ENTRY


@pytest.fixture(scope="module")
def data():
    return example1(N, T, D, seed=0)


@pytest.fixture(scope="module")
def W0():
    # explain's start (init_scale 0.01, seed 0) and the sweep's (init_scale / sqrt(d) = 0.04 / 4, seed 0)
    return 0.01 * torch.randn(D, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def reference(data, W0, steps=STEPS):
    """W <- W - lr sign(g) [|g| >= max |g| / 2], g by autograd."""
    W = W0.clone()
    for _ in range(steps):
        W.requires_grad_(True)
        (g,) = torch.autograd.grad(attention_loss(data.X, data.Z, data.y, data.v, W), W)
        W = (W - LR * torch.sign(g) * (g.abs() >= g.abs().max() / 2)).detach()
    return W


def test_a_made_up_optimizer_runs_through_batched_train_and_al_train(made_up, data, W0):
    expected = reference(data, W0)
    assert float((expected - W0).abs().max()) == pytest.approx(LR * STEPS, rel=0.5)  # it moved
    run = batched.train(data.X, data.Z, data.y, data.v, W0, optimizer=TEXT, steps=STEPS)
    # before saturation autograd's gradient is accurate: the same signs, the same steps to round-off
    torch.testing.assert_close(run.W[0], expected, rtol=0, atol=1e-12)
    model = al.models.Combined(D, W0=W0)
    al.train(model, TEXT, data, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(model.W.detach(), expected, rtol=0, atol=1e-12)
    model = al.models.Combined(D, W0=W0)
    optimizer = made_up.optimizer_class()(model.parameters(), lr=LR)  # the torch class, generated from the chain
    assert type(optimizer).__name__ == "HalfSign" and "Parameters" in type(optimizer).__doc__
    al.train(model, optimizer, data, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(model.W.detach(), expected, rtol=0, atol=1e-12)


def test_a_made_up_optimizer_runs_in_a_sweep(made_up, tmp_path, data, W0):
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"task: batched-train\nbase: {{n: {N}, T: {T}, d: {D}, init_scale: 0.04, seed: 0, steps: {STEPS}}}\n"
        f"list:\n  - {{optimizer: '{TEXT}'}}\n"
    )
    root = run_sweep(load_sweep(sweep), tmp_path / "runs", progress=False).root
    index = pd.read_parquet(root / "index.parquet")
    assert list(index["status"]) == ["done"]
    np.testing.assert_allclose(np.load(root / index["run_dir"][0] / "W.npy"), reference(data, W0).numpy(), atol=1e-12)


def test_a_made_up_optimizer_runs_through_explain_and_the_command_line(made_up, tmp_path, data, W0):
    result = explain(data, "W", TEXT, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(result.W, reference(data, W0), rtol=0, atol=1e-12)
    src, out = tmp_path / "d.npz", tmp_path / "out"
    data.save(src)
    ran = CliRunner().invoke(main, ["explain", str(src), "--optimizer", TEXT, "--steps", str(STEPS), "--out", str(out)])
    assert ran.exit_code == (0 if result.converged else 1), ran.output
    table = pd.read_parquet(out / "explain.parquet").set_index("candidate")
    for candidate, row in result.table.set_index("candidate").iterrows():
        assert math.isclose(table.at[candidate, "one_minus_cos"], row["one_minus_cos"], rel_tol=1e-9, abs_tol=1e-12)
    listed = CliRunner().invoke(main, ["optimizers"])
    assert listed.exit_code == 0 and "half-sign" in listed.output and "step per moved entry" in listed.output


def test_a_made_up_optimizer_is_refused_once_unregistered(data):
    with registry.registered(ENTRY):
        parse_optimizer(TEXT)
    with pytest.raises(ValidationError, match="unknown name 'half-sign'"):
        parse_optimizer(TEXT)
    with pytest.raises(ValidationError, match="registered already"):
        registry.register(registry.get("ngd"))


# --- the docstrings that list optimizers list every entry of the registry -----------------------------------------


@pytest.mark.parametrize(
    "function", [batched.train, al.train, explain, al.optim.spec], ids=["batched.train", "al.train", "explain", "spec"]
)
def test_the_docstrings_list_every_registered_optimizer(function, made_up):
    doc = function.__doc__
    assert ".. optimizers::" not in doc  # filled at import from the registry
    for entry in registry.entries():
        if entry is not made_up:  # registered after the import: the marker is filled once, at import
            assert f"``{entry.name}``" in doc, entry.name
            assert all(f"``{alias}``" in doc for alias in entry.aliases)
    assert "half-sign" in registry.document(".. optimizers::")  # what a docs build now would list


def test_the_site_build_fills_the_same_list(load_script):
    text = load_script("tools/docs/griffe_rst.py").rst_to_markdown(
        "optimizer : str\n    The names:\n\n    .. optimizers::\n"
    )
    assert all(f"``{name}``" in text for name in registry.names())


# --- unknown options: refused by name, with the known ones ---------------------------------------------------------


@pytest.mark.parametrize("name", registry.names())
def test_an_unknown_option_of_any_optimizer_is_refused_by_name_with_the_known_ones(name):
    known = ", ".join(registry.get(name).all_options)
    with pytest.raises(ValidationError, match=f"unknown option 'bogus' for {name}; {name} takes {known}"):
        parse_optimizer(f"{name}:bogus=1")
    params = [torch.nn.Parameter(torch.zeros(2, 2, dtype=torch.float64))]
    with pytest.raises(ValidationError, match=r"parameter group 0 sets \['bogus'\], which .* does not take"):
        parse_optimizer(name).build([{"params": params, "bogus": 1}])  # the entry's class, its defaults filled in


def test_a_generated_class_refuses_an_unknown_keyword(made_up):
    with pytest.raises(ValidationError, match=r"HalfSign takes no argument \['momentum'\]; its hyperparameters"):
        made_up.optimizer_class()([torch.nn.Parameter(torch.zeros(2))], momentum=0.9)


def test_batched_train_refuses_an_unknown_keyword_and_warns_on_the_retired_one(data):
    with pytest.raises(ValidationError, match=r"unknown option\(s\) \['momentun'\]"):
        batched.train(data.X, data.Z, data.y, data.v, optimizer="ngd", steps=1, momentun=0.9)
    with pytest.warns(DeprecationWarning, match=r"write the options in the optimizer string \('ngd:momentum=0.5'\)"):
        old = batched.train(data.X, data.Z, data.y, data.v, optimizer="ngd", steps=5, momentum=0.5).W
    new = batched.train(data.X, data.Z, data.y, data.v, optimizer="ngd:momentum=0.5", steps=5).W
    torch.testing.assert_close(old, new, rtol=0, atol=0)  # one rule, two spellings


def test_an_alias_refuses_the_option_it_fixes():
    with pytest.raises(ValidationError, match=r"'sign' fixes p = inf \(sign descent, sd:inf\); write 'sd:p=\.\.\.'"):
        parse_optimizer("sign:p=2")
    assert parse_optimizer("sps:c=0.3").get("c") == 0.3  # an implied option that does not define the alias


# --- schedules: one transform for every rule -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,canonical",
    [("inv_sqrt", "inv_sqrt"), ("POLY:0.50", "poly:0.5"), ("constant", "constant"), ("poly:2", "poly:2")],
)
def test_schedules_parse_to_one_spelling(text, canonical):
    assert parse_optimizer(f"ngd:schedule={text}").get("schedule") == canonical


@pytest.mark.parametrize("text", ["poly:0", "poly:-1", "poly:x", "cosine", "inv"])
def test_a_bad_schedule_is_refused_with_the_accepted_ones(text):
    with pytest.raises(ValidationError, match=r"schedule == .* must be 'constant', 'inv_sqrt' or 'poly:<a>'"):
        parse_optimizer(f"sign:schedule={text}")


@pytest.mark.parametrize("name", registry.names())
def test_every_optimizer_takes_a_schedule_that_multiplies_its_step(name):
    """The rule's step at t = 0, 1, 2 with schedule poly:1 is the constant rule's step times 1 / (t + 1)."""
    g = torch.randn(3, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    extra = {"optimal_loss": 0.0} if name == "polyak" else {}
    sizes = []
    for schedule in ("constant", "poly:1"):
        rule = parse_optimizer(name).with_options(schedule=schedule, **extra).rule(["W"])
        state, W, log_risk = rule.init([g]), torch.eye(3, dtype=torch.float64), torch.zeros(())
        steps = []
        for t in range(3):
            ctx = al.optim.transforms.Context([W], 0, log_risk=log_risk, step=t)
            step, state = rule.step([g], torch.zeros(()), state, ctx)
            steps.append(rule.apply([W], step)[0] - W)
        sizes.append(torch.stack(steps))
    factors = torch.tensor([1.0, 1 / 2, 1 / 3], dtype=torch.float64)
    assert float(sizes[0].abs().min(dim=0).values.max()) > 0  # the rule moves W
    # the rule's own state (buffers, step counts) sees the same gradients in both runs: only the schedule differs
    torch.testing.assert_close(sizes[1], sizes[0] * factors[:, None, None], rtol=1e-12, atol=1e-15)
