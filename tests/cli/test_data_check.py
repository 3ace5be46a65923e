"""`attnlab data check`: what each generator is meant to satisfy holds for its data; --strict sets the exit code."""

import pytest
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.cli.data_cmd import _PAPER_OF, INTENTS
from attnlab.data import ASSUMPTIONS, GENERATORS, TokenSelectionData, check_assumptions, dm, example1, scores_equal


def run(*args):
    return CliRunner().invoke(main, list(args))


def _data(name, **kwargs):
    made = GENERATORS[name](**kwargs)
    return getattr(made, "data", made)


def test_the_tables_cover_every_generator_and_assumption():
    assert set(INTENTS) == set(GENERATORS)
    assert set(_PAPER_OF) == set(ASSUMPTIONS)
    for intent in INTENTS.values():
        assert set(intent.built) | set(intent.conditional) <= set(ASSUMPTIONS)


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_what_a_generator_is_built_to_satisfy_holds_for_its_data(name, seed):
    kwargs = {} if name == "joint_toy" else {"seed": seed}  # the toy set is fixed
    built = INTENTS[name].built
    if built:
        reports = check_assumptions(_data(name, **kwargs), which=list(built))
        assert all(r.holds for r in reports), [str(r) for r in reports if not r.holds]


@pytest.mark.parametrize(
    ("name", "assumption", "fails", "holds"),
    [
        # the conditional claims fail and hold where their text says; A1: d >> (n T)^2 and rho^2 << sigma^2
        ("example1", "A1", {}, {"n": 2, "T": 2, "d": 20000, "rho": 0.5}),
        ("dm", "A1", {}, {"n": 2, "d": 20000}),
        ("scores_equal", "A3", {"n": 8}, {}),  # a gap of about L log n: gap 3 covers n = 2, not n = 8
        ("aligned_pairs", "A3", {}, {"score": 10.0}),  # raise score until it holds
    ],
)
def test_a_conditional_assumption_fails_and_holds_as_its_text_says(name, assumption, fails, holds):
    assert assumption in INTENTS[name].conditional
    (bad,) = check_assumptions(_data(name, **fails), which=[assumption])
    (good,) = check_assumptions(_data(name, **holds), which=[assumption])
    assert not bad.holds and good.holds


def test_the_cli_default_is_check_assumptions_default(tmp_path):
    for data in (example1(n=4, T=3, d=16), dm(n=4, d=16)):
        path = data.save(tmp_path / "d.npz")
        out = run("data", "check", str(path)).output
        expected = [str(r) for r in check_assumptions(TokenSelectionData.load(path))]
        assert [line for line in out.splitlines() if line.startswith("[")] == expected


def test_readme_example1_fails_a1_a3_a4_and_says_why(tmp_path):
    path = example1(d=64).save(tmp_path / "ex1.npz")
    plain = run("data", "check", str(path))
    assert plain.exit_code == 0 and "2/5 assumptions hold" in plain.output
    assert "sufficient conditions for its theorems, not necessary ones" in plain.output
    assert "--strict exits 1 when one fails" in plain.output
    mine = run("data", "check", str(path), "--generator", "example1")
    assert "example1 satisfies it by construction" in mine.output
    assert "example1 needs d >> (n T)^2 log(n T)" in mine.output and "2/3 assumptions of example1 hold" in mine.output
    assert "A3" not in mine.output and "A4" not in mine.output  # the K,Q paper's assumptions are not example1's
    assert run("data", "check", str(path), "--generator", "example1", "--strict").exit_code == 1  # A1 fails


def test_strict_exits_0_when_every_assumption_of_the_generator_holds(tmp_path):
    good = scores_equal().save(tmp_path / "good.npz")
    result = run("data", "check", str(good), "--generator", "scores_equal", "--strict")
    assert result.exit_code == 0 and "3/3 assumptions of scores_equal hold" in result.output
    bad = scores_equal(n=8).save(tmp_path / "bad.npz")
    result = run("data", "check", str(bad), "--generator", "scores_equal", "--strict")
    assert result.exit_code == 1 and "raise gap until it holds" in result.output


def test_a_generator_whose_paper_assumes_nothing_never_fails_strict(tmp_path):
    path = _data("unit_gaussian").save(tmp_path / "u.npz")
    result = run("data", "check", str(path), "--generator", "unit_gaussian", "--strict")
    assert result.exit_code == 0, result.output
    assert "not an assumption of unit_gaussian's paper (mirror-descent-lp §6)" in result.output
    assert "states no assumption that these checks cover" in result.output


def test_an_unknown_generator_is_refused_with_the_choices(tmp_path):
    result = run("data", "check", str(tmp_path / "x.npz"), "--generator", "nope")
    assert result.exit_code == 2 and "'nope' is not one of" in result.output and "aligned_pairs" in result.output
