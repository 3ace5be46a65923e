"""The CLI audit's `--set` findings: nested lists and quoted optimizer strings, pairs, gd_lr's bound, the data
generators' size limit, settings-free generators, e2's arrows, underscores in optimizer numbers, overflow-free fits."""

import math

import pytest
from click.testing import CliRunner

from attnlab._overrides import OverrideError, parse_overrides
from attnlab._validation import ValidationError
from attnlab.cli import main
from attnlab.experiments.real.digits_vit import DigitsViTConfig
from attnlab.experiments.real.text import TextConfig


def run(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lr_grids=((0.1,0.2),(0.1,0.2))", {"lr_grids": ((0.1, 0.2), (0.1, 0.2))}),
        ("lr_grids=(0.1, 0.2), (0.3,), ()", {"lr_grids": ((0.1, 0.2), (0.3,), ())}),
        ("optimizers=sgd,'md:1.1,normalized=false'", {"optimizers": ("sgd", "md:1.1,normalized=false")}),
        ('optimizers=(sgd, "md:2,normalized=false")', {"optimizers": ("sgd", "md:2,normalized=false")}),
        ("optimizers=sgd,ngd:lr=0.1", {"optimizers": ("sgd", "ngd:lr=0.1")}),
        ("tied_lrs=(('md:2,normalized=false', sgd),)", {"tied_lrs": (("md:2,normalized=false", "sgd"),)}),
        ("epochs_by_optimizer=((sgd, 5),)", {"epochs_by_optimizer": (("sgd", 5),)}),
    ],
)
def test_nested_lists_and_quoted_optimizer_strings_parse(text, expected):
    assert parse_overrides(TextConfig, [text]) == expected


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("lr_grids=0.1,0.2", "((0.1, 0.5), (0.2,))"),  # was read as ((0.1,), (0.2,))
        ("lr_grids=(0.1,0.2)", "((0.1, 0.5), (0.2,))"),
        ("optimizers=md:1.1,normalized=false", "sgd,'md:2,normalized=false'"),  # was ('md:1.1', 'normalized=false')
        ("tied_lrs=(sgd,foo)", "(('md:2,normalized=false', sgd),)"),  # was a raw dict-update ValueError
        ("epochs_by_optimizer=(sgd,5)", "(('md:2,normalized=false', 60),)"),  # was a raw unpacking ValueError
        ("tied_lrs=((sgd,foo,bar),)", "(('md:2,normalized=false', sgd),)"),
    ],
)
def test_a_flat_or_cut_value_is_refused_with_a_form_that_parses(text, shown):
    with pytest.raises(OverrideError, match="written") as info:
        parse_overrides(TextConfig, [text])
    assert shown in str(info.value) and info.value.key == text.split("=")[0]
    key = text.split("=")[0]
    assert parse_overrides(TextConfig, [f"{key}={shown}"])  # the example in the message parses


@pytest.mark.parametrize(
    ("config", "kwargs", "field"),
    [
        (DigitsViTConfig, {"tied_lrs": (("sgd",),), "tune_epochs": 1}, "tied_lrs"),
        (TextConfig, {"tied_lrs": ("sgd", "foo")}, "tied_lrs"),
        (TextConfig, {"epochs_by_optimizer": ("sgd", 5)}, "epochs_by_optimizer"),
    ],
)
def test_the_configs_refuse_entries_that_are_not_pairs(config, kwargs, field):
    with pytest.raises(ValidationError, match=rf"^{field} == .*each entry must be a pair"):
        config(**kwargs)


def test_flagship_refuses_a_gd_step_above_its_bound_before_writing_anything(tmp_path):
    out = tmp_path / "run"
    result = run("run", "flagship", "--quick", "--set", "gd_lr=1e200", "--out", str(out))
    assert result.exit_code == 2 and "gd_lr == 1e+200 must be <= 10" in result.output, result.output
    assert not out.exists() or not any(out.iterdir())


def test_fits_do_not_overflow_on_finite_data():
    from attnlab.verify import fit_slope, fit_weighted_slope

    slope, r2 = fit_slope([1, 2, 3], [1e200, 2e200, 3.5e200], logx=False, logy=False)
    assert slope == pytest.approx(1.25e200) and r2 == pytest.approx(0.986842105263158)
    slope, se = fit_weighted_slope([1, 2, 3], [1, 2, 3.5], [1e-100] * 3, logx=False, logy=False)
    assert slope == pytest.approx(1.25) and se == pytest.approx(1e-100 / math.sqrt(2))
    assert all(math.isnan(v) for v in fit_weighted_slope([1, 2], [1e200, 2e200], [1e-200] * 2, logx=False))


@pytest.mark.parametrize("generator", ["example1", "dm", "unit_gaussian", "scores_equal"])
def test_data_make_refuses_data_beyond_2_to_the_26_entries(generator, tmp_path):
    result = run("data", "make", generator, "--out", str(tmp_path / "a.npz"), "--set", "n=100000000")
    assert result.exit_code == 2, result.output
    assert "n == 100000000" in result.output and "must be <= 2^26 = 67108864" in result.output


def test_a_generator_without_settings_says_so(tmp_path):
    result = run("data", "make", "joint_toy", "--out", str(tmp_path / "a.npz"), "--set", "n=1")
    assert result.exit_code == 2 and "'joint_toy' takes no settings" in result.output, result.output


@pytest.mark.parametrize(
    "arrows", ["(-5,-50,-1000,0,20,40,60,80,50,100,200,300)", "(5,5,5,5,20,40,60,80,50,100,200,300)"]
)
def test_e2_refuses_negative_or_repeated_arrows(arrows):
    from attnlab.experiments import get_experiment
    from attnlab.verify import make_config

    with pytest.raises(ValidationError, match=r"p = 1\.75, .* must be >= 0 and distinct"):
        make_config(get_experiment("mirror-descent.e2"), [f"arrows={arrows}"], quick=True)


def test_an_optimizer_number_with_an_underscore_is_refused():
    from attnlab.optim import parse_optimizer

    with pytest.raises(ValidationError, match="lr must be a Real, got '1_0'"):
        parse_optimizer("ngd:lr=1_0")
