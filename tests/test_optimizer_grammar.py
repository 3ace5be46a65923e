"""One optimizer string, every front door: batched.train, al.train (string, built optimizer), a sweep, the real
harness's make_optimizer, explain and the ``explain`` command all run the same update for the same string.

The reference is :func:`attnlab.training.batched.train`; every other front door must reach the same final ``W`` (the same
float64 program, so only summation order may differ) from the same start.
"""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

import attnlab as al
import attnlab.tasks  # noqa: F401  (registers the batched-train sweep task)
from attnlab.cli import main
from attnlab.data import example1
from attnlab.explain import explain
from attnlab.nets.optimizers import make_optimizer
from attnlab.optim import OptimizerSpec, parse_optimizer
from attnlab.runner import load_sweep, run_sweep
from attnlab.training.spaces import optimal_loss

STRINGS = [
    "gd",
    "ngd",
    "ngd:momentum=0.9,momentum_variant=normalized_buffer",
    "ngd:max_step=5,momentum=0.5",
    "polyak:max_step=5",
    "md:1.5",
    "sngd",
]
N, T, D, STEPS = 4, 3, 16, 20
# same float64 program on each path; kernel or parameter space and summation order differ in the last bits
CLOSE = dict(rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def data():
    return example1(N, T, D, seed=0)


@pytest.fixture(scope="module")
def W0():
    # explain's start (init_scale 0.01, seed 0) and the sweep's (init_scale / sqrt(d) = 0.04 / 4, seed 0)
    return 0.01 * torch.randn(D, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def reference(data, W0, text, **options):
    spec = parse_optimizer(text).replace(**options)
    run = al.batched.train(data.X, data.Z, data.y, data.v, W0, optimizer=spec, steps=STEPS)
    assert run.status == ["completed"]
    return run.W[0]


@pytest.mark.parametrize("text", STRINGS)
def test_al_train_takes_the_string_and_its_built_optimizer(data, W0, text):
    W = reference(data, W0, text)
    model = al.models.Combined(D, W0=W0)
    al.train(model, text, data, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(model.W.detach(), W, **CLOSE)
    model = al.models.Combined(D, W0=W0)
    l_star = float(optimal_loss(data.X[None], data.y[None], data.v[None], loss="exp")[0])
    built = parse_optimizer(text).build(model.parameters(), optimal_loss=l_star)
    al.train(model, built, data, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(model.W.detach(), W, **CLOSE)


@pytest.mark.parametrize("text", STRINGS)
def test_the_real_harness_builds_the_same_optimizer(data, W0, text):
    # the harness's Polyak target is 0 (cross-entropy), so the reference is told L* = 0 too
    W = reference(data, W0, text, **({"optimal_loss": 0.0} if text.startswith("polyak") else {}))
    model = al.models.Combined(D, W0=W0)
    lr = 0.1 if parse_optimizer(text).entry.takes_lr else None  # lr is the step size; Polyak has none
    al.train(model, make_optimizer(text, model.parameters(), lr=lr), data, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(model.W.detach(), W, **CLOSE)


@pytest.mark.parametrize("text", STRINGS)
def test_a_sweep_runs_the_string(tmp_path, data, W0, text):
    sweep = tmp_path / "sweep.yaml"  # the string as a sweep file carries it, quoted where YAML needs it
    sweep.write_text(
        f"task: batched-train\nbase: {{n: {N}, T: {T}, d: {D}, init_scale: 0.04, seed: 0, steps: {STEPS}}}\n"
        f"list:\n  - {{optimizer: '{text}'}}\n"
    )
    spec = load_sweep(sweep)
    root = run_sweep(spec, tmp_path / "runs", progress=False).root
    index = pd.read_parquet(root / "index.parquet")
    assert list(index["status"]) == ["done"]
    W = np.load(root / index["run_dir"][0] / "W.npy")
    np.testing.assert_allclose(W, reference(data, W0, text).numpy(), **CLOSE)


@pytest.mark.parametrize("text", STRINGS)
def test_explain_and_its_command_run_the_string(tmp_path, data, W0, text):
    result = explain(data, "W", text, steps=STEPS, record_every=STEPS)
    torch.testing.assert_close(result.W, reference(data, W0, text), **CLOSE)
    src, out = tmp_path / "d.npz", tmp_path / "out"
    data.save(src)
    ran = CliRunner().invoke(main, ["explain", str(src), "--optimizer", text, "--steps", str(STEPS), "--out", str(out)])
    assert ran.exit_code == (0 if result.converged else 1), ran.output  # 1: "not converged in direction"
    table = pd.read_parquet(out / "explain.parquet").set_index("candidate")
    for candidate, row in result.table.set_index("candidate").iterrows():
        assert math.isclose(table.at[candidate, "one_minus_cos"], row["one_minus_cos"], rel_tol=1e-9, abs_tol=1e-12)


def test_an_experiment_that_trains_with_one_optimizer_takes_the_string_by_set():
    from attnlab._validation import ValidationError
    from attnlab.experiments import get_experiment
    from attnlab.verify import make_config

    experiment = get_experiment("multi-token.equivalence")
    assert make_config(experiment, ["optimizer=ngd:momentum=0.5"]).optimizer == "ngd:momentum=0.5"
    with pytest.raises(ValidationError, match="momentun"):
        make_config(experiment, ["optimizer=ngd:momentun=0.5"])


def test_a_spec_knows_the_options_its_string_writes_from_those_its_alias_implies():
    sps = OptimizerSpec.parse("sps")
    assert sps == OptimizerSpec.parse("polyak:c=0.5,optimal_loss=0.0")  # the same optimizer ...
    assert sps.written == frozenset() and set(sps.implied) == {"c", "optimal_loss"}  # ... written differently
    assert OptimizerSpec.parse("sps:c=0.3").written == {"c"}
    assert sps.replace(c=0.7).written == {"c"} and sps.with_options(max_step=2.0).written == {"max_step"}
