"""Config bounds of the implicit-bias, kq-nuclear, mirror-descent and flagship experiments: a value that would crash
a run or leave a reading's fit too few points is refused when the config is built, naming the field and the fix;
the least values that suffice are accepted, and the default and quick configs are unchanged."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from attnlab._validation import ValidationError
from attnlab.cli import main
from attnlab.data import example1
from attnlab.experiments import get_experiment
from attnlab.experiments.implicit_bias.common import recorded_steps
from attnlab.experiments.kq_nuclear.common import late_distances
from attnlab.models import Combined
from attnlab.training import train
from attnlab.verify import make_config

from .config_refusal import refused

WITH_T = (
    "implicit-bias.assumptions",
    "implicit-bias.fig2",
    "implicit-bias.fig5",
    "implicit-bias.rates",
    "kq-nuclear.x1",
    "kq-nuclear.x2",
    "kq-nuclear.x3",
    "kq-nuclear.x5",
    "mirror-descent.bounds",
    "mirror-descent.cone",
    "mirror-descent.e1",
    "mirror-descent.e2",
    "mirror-descent.growth",
    "mirror-descent.regpath",
    "flagship",
)


@pytest.mark.parametrize("name", WITH_T)
def test_one_token_per_sequence_is_refused_when_the_config_is_built(name):
    refused(name, ["T=1"], "T == 1", ">= 2")
    make_config(get_experiment(name), ["T=2"], quick=True)


@pytest.mark.parametrize(
    "name", ("flagship", "implicit-bias.fig2", "kq-nuclear.x1", "kq-nuclear.x2", "kq-nuclear.x4", "kq-nuclear.x5")
)
def test_a_width_the_data_generator_refuses_is_refused_by_the_config(name):
    refused(name, ["d=1"], "d == 1", ">= 2")


@pytest.mark.parametrize(
    ("name", "overrides", "words"),
    [
        ("flagship", ["steps=1"], ("steps == 1", "record_every == 10", "ngd-aligns")),
        ("flagship", ["steps=10"], ("steps == 10", "> record_every")),
        ("implicit-bias.fig2", ["steps=1"], ("steps == 1", "saturation-slope", "steps == 21")),
        ("implicit-bias.fig5", ["steps=20"], ("steps == 20", "it holds 3", "steps == 21")),
        ("implicit-bias.fig2", ["steps=15", "record_every=1"], ("ngd-decade", "t0 = 1", "steps == 16")),
        ("implicit-bias.fig3", ["steps=1"], ("steps == 1", "head-aligns", "steps == 11")),
        ("implicit-bias.fig3", ["steps=10"], ("steps == 10", "head-aligns")),
        ("implicit-bias.rates", ["steps=1"], ("steps == 1", ">= 7", "lemma1-slope")),
        ("implicit-bias.rates", ["record_every=1"], ("record_every == 1", "polyak-global")),
        ("implicit-bias.rates", ["steps=50"], ("steps == 50", "ngd-global", "steps == 51")),
        ("implicit-bias.rates", ["joint_steps=1"], ("joint_steps == 1", "w-log-norm", ">= 100 x")),
        ("implicit-bias.rates", ["joint_steps=999"], ("joint_steps == 999", "joint_record_every = 1000")),
        # joint_steps >= 100 x joint_record_every, yet the record nearest 3200 // 100 = 32 is 40: 1.9 decades
        ("implicit-bias.rates", ["joint_steps=3200", "joint_record_every=20"], ("joint_steps / t0 = 80",)),
        ("kq-nuclear.x2", ["steps=1"], ("steps == 1", "> 2 x record_every == 80", "mu > 1")),
        ("kq-nuclear.x2", ["steps=80"], ("steps == 80",)),
        ("kq-nuclear.x5", ["steps=1"], ("steps == 1", "> 2 x record_every == 80")),
        ("mirror-descent.regpath", ["ps=1.75"], ("ps == (1.75,)", ">= 2 distinct", "closest")),
        ("mirror-descent.regpath", ["ps=2.0,2.0"], ("ps == (2.0, 2.0)", "repeats [2.0]")),
    ],
)
def test_a_run_too_short_for_its_fits_is_refused_naming_the_field_and_the_fix(name, overrides, words):
    refused(name, overrides, *words)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        ("flagship", ["steps=11"]),
        ("implicit-bias.fig2", ["steps=21"]),
        ("implicit-bias.fig2", ["steps=16", "record_every=1"]),
        ("implicit-bias.fig3", ["steps=11"]),
        ("implicit-bias.rates", ["steps=51"]),
        ("implicit-bias.rates", ["steps=11", "record_every=2"]),
        ("implicit-bias.rates", ["joint_steps=1000"]),
        ("implicit-bias.rates", ["joint_steps=4000", "joint_record_every=20"]),
        ("kq-nuclear.x2", ["steps=81"]),
        ("kq-nuclear.x5", ["steps=81"]),
        ("mirror-descent.regpath", ["ps=2.0,3.0"]),
    ],
)
def test_the_least_values_that_suffice_are_accepted(name, overrides):
    make_config(get_experiment(name), overrides, quick=True)


@pytest.mark.parametrize("alpha", ["0", "0.1", "0.6", "1", "1.5"])
def test_rates_refuses_an_alpha_outside_theorem_2s_hypothesis(alpha):
    refused("implicit-bias.rates", [f"alpha={alpha}"], "alpha ==", "[2/3, 1)", "Theorem 2")


@pytest.mark.parametrize("alpha", ["0.6666666666666666", "0.75", "0.99"])
def test_rates_accepts_an_alpha_in_theorem_2s_hypothesis(alpha):
    assert make_config(get_experiment("implicit-bias.rates"), [f"alpha={alpha}"]).alpha == float(alpha)


def test_flagship_refuses_data_that_would_not_fit_in_memory():
    refused("flagship", ["d=1000000000"], "d == 1000000000", "2^26", "d <= 8168")
    refused("flagship", ["n=100000000"], "n == 100000000", "lower n or T")
    make_config(get_experiment("flagship"), ["d=8168"])


def test_the_cli_exits_2_with_the_settings_table_on_a_refused_bound():
    result = CliRunner().invoke(main, ["run", "implicit-bias.fig3", "--quick", "--set", "steps=1"])
    assert result.exit_code == 2 and "error: steps == 1 with record_every == 10" in result.output
    assert "Traceback" not in result.output and "field" in result.output


@pytest.mark.parametrize(("steps", "every"), [(1, 1), (7, 2), (20, 5), (21, 5), (25, 10), (40, 10)])
def test_the_bounds_read_the_steps_the_training_loop_records(steps, every):
    data = example1(n=2, T=2, d=2, seed=0)
    frame = train(Combined(2), "gd", data, steps=steps, record_every=every, progress=False).frame
    assert np.array_equal(np.sort(frame["step"].unique()), recorded_steps(steps, every))


def test_a_run_whose_margin_passes_one_too_late_for_the_limit_fit_is_refused_by_name():
    # steps=3, record_every=1 passes the config's bound, but mu > 1 at no record: np.polyfit raised on an empty vector
    rows = pd.DataFrame({"step": [0, 1, 2, 3], "mu": [0.0, 0.4, 0.9, 0.95], "dist_l1": [1.0, 0.9, 0.8, 0.7]})
    with pytest.raises(ValidationError, match=r"has 0 such records; run longer \(raise steps"):
        late_distances(rows)
    log_mu, dist = late_distances(rows.assign(mu=[0.0, 1.5, 2.0, 3.0]))
    assert len(log_mu) == len(dist) == 2
