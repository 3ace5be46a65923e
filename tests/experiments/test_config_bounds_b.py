"""Config bounds of the multi-token, NTK, diffusion, regression and real experiments: a value that would crash a run,
leave a reading's fit too few points or make a check meaningless is refused when the config is built, naming the
field, its value and the fix; the least values that suffice are accepted, and the default and quick configs build."""

import dataclasses

import pytest
from click.testing import CliRunner

from attnlab._validation import SEED_MAX
from attnlab.cli import main
from attnlab.cli.settings import settings
from attnlab.experiments import get_experiment
from attnlab.verify import make_config

from .config_refusal import refused

NAMES = (
    "multi-token.equivalence",
    "ntk.lazy",
    "ntk.table1",
    "diffusion.gmm",
    "regression.fig1",
    "regression.fig2",
    "regression.scaling",
    "regression.theory",
    "regression.context",
    "real.text",
    "real.digits-vit",
)


@pytest.mark.parametrize("name", NAMES)
def test_the_default_and_quick_configs_still_build(name):
    experiment = get_experiment(name)
    assert make_config(experiment) == experiment.config_type()
    make_config(experiment, quick=True)


@pytest.mark.parametrize(
    ("name", "override", "words"),
    [
        # tracebacks once
        ("multi-token.equivalence", "ds=()", ("ds is empty",)),
        ("multi-token.equivalence", "chunk=0", ("chunk == 0", ">= 1")),
        ("ntk.table1", "activations=()", ("activations is empty",)),
        ("ntk.table1", "ns=8", ("ns == (8,)", "at least 2", "slopes in n")),
        ("regression.fig1", "methods=()", ("methods is empty",)),
        ("regression.fig2", "methods=()", ("methods is empty",)),
        ("regression.theory", "spectral_ns=()", ("spectral_ns == ()", "at least 2")),
        ("regression.theory", "radii=()", ("radii is empty",)),
        ("regression.theory", "lem4_directions=0", ("lem4_directions == 0", ">= 1")),
        ("ntk.lazy", "kernel_seeds=18446744073709551616", ("kernel_seeds == 18446744073709551616", "<= 1000", "ours")),
        ("ntk.lazy", "kernel_seeds=1000000000", ("kernel_seeds == 1000000000", "<= 1000", "ours")),
        # passes that meant nothing
        ("ntk.lazy", "widths=250", ("widths == (250,)", "at least 2", "slopes in m")),
        ("regression.fig1", "steps=1", ("steps == 1", "lr == 0.01", ">= 1 / 0.01 = 100", "ours")),
        # impossible values once reported as theory failures
        ("regression.scaling", "steps=0", ("steps == 0", ">= 2")),
        ("regression.theory", "steps=0", ("steps == 0", ">= 25")),
        ("regression.theory", "mc_steps=0", ("mc_steps == 0", ">= 2")),
        ("ntk.lazy", "kernel_widths=4000", ("kernel_widths == (4000,)", "at least 2", "P6")),
        ("diffusion.gmm", "ns=256", ("ns == (256,)", "at least 2", "Thm 6.6")),
        ("multi-token.equivalence", "steps=0", ("steps == 0", ">= 2")),
        ("multi-token.equivalence", "runs=0", ("runs == 0", ">= 2")),
        ("multi-token.equivalence", "max_draws=0", ("max_draws == 0",)),
        # refused once only when the run started, some under another name
        ("multi-token.equivalence", "n=0", ("n == 0", ">= 1")),
        ("multi-token.equivalence", "T=0", ("T == 0", ">= 2")),
        ("multi-token.equivalence", "T=1", ("T == 1", ">= 2")),
        ("multi-token.equivalence", "lr=0", ("lr == 0", "> 0")),
        ("multi-token.equivalence", "record_every=0", ("record_every == 0", ">= 1")),
        ("multi-token.equivalence", "ds=0", ("ds entry == 0", ">= 1")),
        ("regression.scaling", "mu=-1", ("mu == -1.0", ">= 0")),
        ("real.text", "vocab_size=0", ("vocab_size == 0",)),
        # the constraint between std and radius, under std's name
        ("diffusion.gmm", "std=0.06", ("radius + 10 std == 0.5 + 10 x 0.06", "std == 0.06, must be <= 0.05")),
        ("diffusion.gmm", "std=1e308", ("radius + 10 std", "std == 1e+308, must be <= 0.05")),
        # shown but ignored
        ("regression.context", "lr=-1", ("unknown key 'lr'",)),
        ("real.text", "imdb_root=bogus", ("imdb_root == 'bogus'", "dataset == 'aclimdb'")),
    ],
)
def test_the_values_the_qa_session_found_are_refused_with_the_field_and_the_fix(name, override, words):
    refused(name, [override], *words)


@pytest.mark.parametrize(
    ("name", "overrides", "words"),
    [
        ("multi-token.equivalence", ["runs=1"], ("runs == 1", ">= 2")),
        ("multi-token.equivalence", ["runs=2000"], ("runs == 2000 with max_draws == 1000", ">= 2000")),
        ("multi-token.equivalence", ["max_draws=1000000000"], ("max_draws == 1000000000", "<= 1000000", "ours")),
        ("multi-token.equivalence", ["ds=8,8"], ("repeats",)),
        ("multi-token.equivalence", ["low=0.01"], ("high == 0.001", "low == 0.01")),
        ("multi-token.equivalence", ["steps=150"], ("record_every == 100 with steps == 150", "<= steps // 2 = 75")),
        ("multi-token.equivalence", [f"seed={SEED_MAX}"], (f"seed == {SEED_MAX} with max_draws == 1000",)),
        ("ntk.lazy", ["widths=251,1000"], ("widths entry == 251", "even")),
        ("ntk.lazy", ["widths=250,250"], ("repeats [250]",)),
        ("ntk.lazy", ["kernel_seeds=1"], ("kernel_seeds == 1", ">= 2")),
        ("ntk.lazy", ["radii=0.1,0.1"], ("radii == (0.1, 0.1) repeats [0.1]", "distinct")),
        ("ntk.lazy", ["radii=0.1"], ("at least two radii, distinct",)),
        ("ntk.lazy", [f"seed={SEED_MAX}"], (f"seed == {SEED_MAX} with kernel_seeds == 4", "kernel_seeds")),
        ("ntk.table1", ["seeds=1"], ("seeds == 1", ">= 2")),
        ("ntk.table1", ["seeds=1000"], ("seeds == 1000", "<= 100", "ours")),
        ("ntk.table1", ["widths=128,64"], ("must be increasing", "widths=64,128")),
        ("ntk.table1", ["activations=relu,relu"], ("repeats",)),
        ("diffusion.gmm", ["widths=128"], ("widths == (128,)", "at least 2", "P8")),
        ("diffusion.gmm", ["widths=127,512"], ("widths entry == 127", "even")),
        ("diffusion.gmm", ["T0=3"], ("T == 2.0", "T0 == 3.0")),
        ("diffusion.gmm", ["radius=0.6"], ("radius + 10 std", "radius == 0.6, must be <= 0.5")),
        ("regression.fig1", ["methods=sgd,sgd"], ("repeats",)),
        ("regression.fig1", ["seeds=1000"], ("seeds == 1000", "<= 100", "ours")),
        ("regression.fig2", ["steps=499"], ("steps == 499", "lr_grid == 0.002", "= 500")),
        ("regression.fig2", ["grid_seeds=1000"], ("grid_seeds == 1000", "<= 100")),
        ("regression.scaling", ["batches=3"], ("batches == 3", "even")),
        ("regression.scaling", ["ns=50,50"], ("repeats [50]",)),
        ("regression.scaling", ["lr=0"], ("lr == 0.0", "> 0")),
        ("regression.scaling", ["start_distance=0"], ("start_distance == 0.0", "> 0")),
        ("regression.scaling", ["start_distance=1.5"], ("start_distance == 1.5", "<= 1")),
        ("regression.theory", ["radii=0.3"], ("radii entry == 0.3", "<= 0.25")),
        ("regression.theory", ["radii=inf"], ("radii entry == inf", "finite")),
        ("regression.theory", ["spectral_ns=2"], ("spectral_ns entry == 2", ">= 3", "invertible")),
        ("regression.theory", ["spectral_ns=100,1000,10000,1000000"], ("last decade", "L5")),
        ("regression.theory", ["spectral_seeds=18446744073709551616"], ("<= 100", "ours")),
        ("regression.theory", ["mc_batches=9"], ("mc_batches == 9", "even")),
        ("regression.theory", ["lem4_train=2"], ("lem4_train == 2", ">= d == 3")),
        ("regression.theory", ["bias_distance=-1"], ("bias_distance == -1.0",)),
        ("regression.theory", ["bias_distance=4.2"], ("bias_distance == 4.2", "<= 1")),
        ("regression.context", ["point_distance=2"], ("point_distance == 2.0", "<= 1")),
        ("regression.context", ["mu=1"], ("unknown key 'mu'",)),
        ("regression.context", ["start_distance=1"], ("unknown key 'start_distance'",)),
        ("real.text", ["vocab_size=4"], ("vocab_size == 4 with keywords == 1", ">= 5")),
        ("real.text", ["seeds=1000"], ("seeds == 1000", "<= 100", "ours")),
        ("real.text", [f"seed={SEED_MAX}"], (f"seed == {SEED_MAX}", f"<= {SEED_MAX - 1}")),
        ("real.digits-vit", ["tune_seeds=18446744073709551616"], ("tune_seeds == 18446744073709551616", "<= 100")),
    ],
)
def test_the_other_bounds_of_these_configs(name, overrides, words):
    refused(name, overrides, *words)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("multi-token.equivalence", ["runs=2", "max_draws=2", "steps=2", "record_every=1"]),
        ("multi-token.equivalence", [f"seed={SEED_MAX - 999}"]),
        ("ntk.lazy", ["widths=2,4", "kernel_widths=2,4", "kernel_seeds=2", "radii=0.1,0.2"]),
        ("ntk.lazy", ["kernel_seeds=1000", f"seed={SEED_MAX - 1000}"]),
        ("ntk.table1", ["ns=2,3", "seeds=2", "activations=relu"]),
        ("ntk.table1", ["seeds=100"]),
        ("diffusion.gmm", ["ns=2,3", "widths=2,4"]),
        ("diffusion.gmm", ["std=0.1", "radius=0.0"]),
        ("regression.fig1", ["steps=100"]),
        ("regression.fig1", ["steps=1", "methods=sgd"]),  # no remark is read: any length
        ("regression.fig2", ["steps=500"]),
        ("regression.fig2", ["steps=100", "lr_grid=()"]),
        ("regression.scaling", ["steps=2", "ns=1,2", "seeds=100", "batches=2"]),
        ("regression.theory", ["steps=25", "mc_steps=2", "spectral_ns=3,4", "radii=0.25", "lem4_train=3"]),
        ("regression.context", ["point_distance=0"]),
        ("regression.theory", ["bias_distance=1", "start_distance=1"]),
        ("real.text", ["vocab_size=5", "seeds=100", "tune_seeds=100"]),
        ("real.text", ["dataset=aclimdb", "imdb_root=/data/aclImdb"]),
        ("real.digits-vit", ["seeds=100"]),
    ],
)
def test_the_least_values_that_suffice_are_accepted(name, overrides):
    make_config(get_experiment(name), overrides, quick=True)


def test_regression_context_has_no_fields_it_does_not_read():
    fields = {f.name for f in dataclasses.fields(get_experiment("regression.context").config_type)}
    assert not fields & {"mu", "lr", "start_distance"}
    for name in ("regression.theory", "regression.scaling"):  # the experiments that train keep them
        assert {"mu", "lr", "start_distance"} <= {f.name for f in dataclasses.fields(get_experiment(name).config_type)}


@pytest.mark.parametrize(
    ("name", "field", "words"),
    [
        ("ntk.lazy", "kernel_seeds", ("1000", "ours")),
        ("ntk.lazy", "widths", ("at least two",)),
        ("ntk.table1", "seeds", ("100", "ours")),
        ("diffusion.gmm", "std", ("radius + 10 std <= 1",)),
        ("multi-token.equivalence", "max_draws", ("1000000", "ours")),
        ("regression.fig1", "steps", ("1 / lr", "ours")),
        ("regression.theory", "radii", ("(0, rho]",)),
        ("real.text", "seeds", ("100", "ours")),
    ],
)
def test_attnlab_show_states_the_bounds(name, field, words):
    experiment = get_experiment(name)
    meaning = {row.name: row.meaning for row in settings(experiment.config_type, experiment.quick)}[field]
    assert all(word in meaning for word in words), meaning


@pytest.mark.parametrize(
    ("name", "override", "error"),
    [
        ("ntk.lazy", "widths=250", "error: widths == (250,)"),
        ("multi-token.equivalence", "ds=()", "error: ds is empty"),
        ("regression.context", "lr=-1", "unknown key 'lr'"),
    ],
)
def test_the_cli_exits_2_with_the_settings_table(name, override, error):
    result = CliRunner().invoke(main, ["run", name, "--quick", "--set", override])
    assert result.exit_code == 2 and error in result.output, result.output
    assert "Traceback" not in result.output and "field" in result.output
