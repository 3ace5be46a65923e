"""A run is judged by the declared claim: its reading, its tolerances, its template; bad declarations are refused."""

import dataclasses
import math
from dataclasses import dataclass

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.verify import (
    Check,
    Claim,
    Experiment,
    ExperimentResult,
    Falsifier,
    Finding,
    Reading,
    Revision,
    check_declared,
    make_config,
    run_experiment,
    with_revisions,
)

READING = Reading("|ratio - 1|", "the last step", "all seeds", "rel 0.001 (ours)", {"rtol": 0.001}, sizes=("steps",))
CLAIM = Claim("ratio -> 1 at T={steps}", "001:Thm1", "docs/theory/x.md §1", "halved", id="ratio", reading=READING)
HALVED = Falsifier("halved", "the gradient halved", "math:sqrt", lambda f: f, "mechanism")
FINDING = Finding("the ratio stays 1.1% off", "docs/findings.md#lag", ("seeds 0-4: 0.989-0.991",))


@dataclass(frozen=True)
class Config:
    steps: int = 100


def _experiment(run, claim=CLAIM, falsifiers=(HALVED,)):
    return Experiment(name="toy.declared", config_type=Config, run=run, claims=(claim,), falsifiers=falsifiers)


def _run(tmp_path, experiment, **kw):
    return run_experiment(experiment, quick=True, out=tmp_path / "run", progress=False, overwrite=True, **kw)


def test_a_row_judged_by_another_reading_under_the_declared_id_is_refused(tmp_path):
    """s7: a copy of the declared claim with a looser reading (rtol 0.5 for 0.001) passed under the same id."""
    wide = dataclasses.replace(CLAIM, reading=dataclasses.replace(READING, params={"rtol": 0.5}))

    def run(config, ctx):
        return ExperimentResult(pd.DataFrame(), [wide.format(steps=config.steps).close(1.0, 0.99)])

    with pytest.raises(ValidationError, match="reading, text, finding or revisions differ from the declared one"):
        _run(tmp_path, _experiment(run))

    def declared(config, ctx):
        return ExperimentResult(pd.DataFrame(), [CLAIM.format(steps=config.steps).close(1.0, 0.99)])

    assert _run(tmp_path, _experiment(declared)).checks.verdict.tolist() == ["fail"]


@pytest.mark.parametrize(
    "row",
    [
        dataclasses.replace(CLAIM, finding=FINDING).close(1.0, 0.99),  # a finding the declaration does not make
        dataclasses.replace(CLAIM, claim="ratio -> 1 somewhere").close(1.0, 0.99),  # another text
        dataclasses.replace(CLAIM.close(1.0, 0.99), claim="ratio -> 1 elsewhere"),  # the row's text edited
        Check(
            "ratio -> 1 at T=3",
            1.0,
            0.99,
            "rel 0.5",
            True,
            CLAIM.source,
            result=CLAIM.result,
            falsifier="halved",
            claim_id="ratio",
        ),  # fmt: skip
        "a row",
    ],
)
def test_check_declared_refuses_rows_not_built_by_the_declared_claim(row):
    with pytest.raises(ValidationError, match="no declared Claim stands for"):
        check_declared([row], [CLAIM], "toy")
    check_declared([CLAIM.format(steps=3).close(1.0, 0.99), CLAIM.close(1.0, 0.99)], [CLAIM], "toy")


def _claim(**params):
    reading = Reading("x", "the last step", "all", "declared", params)
    return Claim("c", "001:Thm1", "docs/theory/x.md §1", "halved", id="c", reading=reading)


def test_a_declared_bound_is_the_bound_of_less_and_greater():
    """s5: a reading declaring bound 0.9 let greater(0.6, 0.5) pass."""
    claim = _claim(bound=0.9)
    with pytest.raises(ValidationError, match="bound=0.5 but its reading declares 0.9"):
        claim.greater(0.6, 0.5)
    assert claim.greater(0.6).verdict == "fail" and claim.greater(0.95, 0.9).passed
    assert claim.less(0.6).passed and claim.less(0.9, strict=True).verdict == "fail"  # strict only tightens
    strict = _claim(bound=0.9, strict=True)
    with pytest.raises(ValidationError, match="strict=False but its reading declares True"):
        strict.less(0.9, strict=False)
    with pytest.raises(ValidationError, match="needs bound="):
        _claim().less(0.5)


def test_a_declared_tol_is_two_sided_unless_the_reading_declares_the_side():
    """s5: side='at_most' turned the fail of a declared tol into a pass."""
    claim, x = _claim(tol=0.05), [1.0, 10.0, 100.0]
    assert claim.slope(x, x, 2.0).verdict == "fail"
    with pytest.raises(ValidationError, match="adds side='at_most'"):
        claim.slope(x, x, 2.0, side="at_most")
    assert claim.slope(x, x, 1.0, side="both").passed
    assert _claim(tol=0.05, side="at_most").slope(x, x, 2.0).passed
    assert _claim().slope(x, x, 2.0, 0.05, side="at_most").passed  # a tolerance the row states itself


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"rtol": "0.05"}, "must be a Real"),
        ({"rtol": -0.05}, "must be >= 0"),
        ({"tol": math.nan}, "finite"),
        ({"bound": None}, "must be a Real"),
        ({"strict": "yes"}, "must be a bool"),
        ({"side": "below"}, "must be one of"),
    ],
)
def test_a_readings_tolerance_keywords_are_checked(params, message):
    with pytest.raises(ValidationError, match=message):
        Reading("x", "w", "all", "t", params)


def test_a_finding_is_the_verdict_of_a_numeric_failure_only():
    """s10: a NaN measurement or a non-numeric holds(False) of a claim with a finding read 'finding'."""
    claim = dataclasses.replace(CLAIM, finding=FINDING)
    assert claim.close(1.0, 0.989).verdict == "finding"
    assert [claim.close(1.0, v).verdict for v in (math.nan, math.inf)] == ["fail", "fail"]
    assert claim.holds("finite", "diverged at step 3", "stays finite", False).verdict == "fail"
    assert claim.holds(0, 1, "rule", False, margin=-1.0).verdict == "finding"


def test_a_theory_claim_needs_a_mechanism_falsifier():
    """s6: a theory claim whose only falsifier was a reference one was accepted (nor may a hypothesis one do)."""
    for kind in ("reference", "gross", "hypothesis"):
        with pytest.raises(ValidationError, match="no falsifier of kind 'mechanism'"):
            _experiment(lambda c, x: None, falsifiers=(dataclasses.replace(HALVED, kind=kind),))


def test_quick_must_be_a_bool(tmp_path):
    """s14: quick='no' ran the quick config and recorded 'no'."""
    experiment = _experiment(lambda c, x: ExperimentResult(pd.DataFrame()))
    with pytest.raises(ValidationError, match="quick == 'no', must be a bool"):
        make_config(experiment, quick="no")
    with pytest.raises(ValidationError, match="quick == 'no', must be a bool"):
        run_experiment(experiment, quick="no", out=tmp_path / "q", progress=False)
    assert not (tmp_path / "q").exists()


def test_only_a_template_field_is_shown_as_each():
    """A recorded revision row rewrote 'm^{-1/2}', braces that hold no field name, to 'm^<each -1/2>'; a field name
    is shown as <each name> whether or not this run filled it (a row written only at some sizes)."""
    revision = Revision(READING, "2026-11-30", "tightened", "pass: 0.989", "not run")
    literal = Claim("error ~ m^{-1/2}", "001:Thm1", "s", "halved", id="n", reading=READING, revisions=(revision,))
    rows = with_revisions([literal.close(1.0, 1.0)], [literal])
    assert [row.claim for row in rows] == ["error ~ m^{-1/2}", "error ~ m^{-1/2}"]
    templated = dataclasses.replace(CLAIM, revisions=(revision,))
    rows = with_revisions([templated.format(steps=3).close(1.0, 1.0)], [templated])
    assert [row.claim for row in rows] == ["ratio -> 1 at T=3", "ratio -> 1 at T=<each steps>"]
    assert [row.claim for row in with_revisions([], [templated])] == ["ratio -> 1 at T=<each steps>"]
    with pytest.raises(ValidationError, match=r"not given the field\(s\) \['F'\]"):
        Claim("||W||_{F} at T={T}", "001:Thm1", "s", "halved").format(T=3)
    with pytest.raises(ValidationError, match=r"\['steps'\]"):
        CLAIM.format()


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Finding("s", "docs/f.md#a", "seeds 0-4"), "ruled_out must be a tuple of str"),
        (lambda: Finding(None, "docs/f.md#a", ("x",)), "Finding.summary must be a str"),
        (lambda: Reading("s", "w", "a", "t", sizes="steps"), "sizes must be a tuple"),
        (lambda: Reading(None, "w", "a", "t"), "Reading.statistic"),
        (lambda: Revision(READING, "yesterday", "w", "q", "f"), "YYYY-MM-DD"),
        (lambda: CLAIM.holds(1, 2, "rule", "False"), "passed == 'False', must be a bool"),
        (lambda: CLAIM.close(1.0, 0.99, support=2.7), "support must be a int"),
        (lambda: CLAIM.close(1.0, 0.99, support=-1), "support == -1"),
        (lambda: CLAIM.close(1.0, "0.99"), "measured must be a Real"),
        (lambda: CLAIM.close(1.0, 0.99, kind="property"), "takes no keyword \\['kind'\\]"),
        (lambda: CLAIM.revised("1"), "not a number '1'"),
        (lambda: dataclasses.replace(CLAIM, falsifier=HALVED), "falsifier='halved' \\(its name\\)"),
        (lambda: dataclasses.replace(CLAIM, result=None), "Claim.result must be a str"),
        (lambda: dataclasses.replace(CLAIM, revisions=Revision(READING, "2026-01-01", "w", "q", "f")), "tuple"),
        (lambda: dataclasses.replace(CLAIM, finding="docs/findings.md#x"), "Claim.finding must be a Finding"),
        (lambda: dataclasses.replace(CLAIM, reading={"statistic": "s"}), "Claim.reading must be a Reading"),
        (lambda: Falsifier("x", "m", "math:sqrt", 5, "mechanism"), "wrap must be a function"),
        (lambda: Falsifier("", "m", "math:sqrt", lambda f: f, "mechanism"), "name must be a non-empty str"),
        (lambda: Falsifier("x", "m", None, lambda f: f, "mechanism"), "target must be a non-empty str"),
        (lambda: _experiment(None), "run of 'toy.declared' must be a function"),
        (lambda: dataclasses.replace(_experiment(print), config_type=Config()), "a dataclass class"),
        (lambda: dataclasses.replace(_experiment(print), claims=("ratio",)), "claims of .* must be a tuple of Claim"),
        (
            lambda: _experiment(print, dataclasses.replace(CLAIM, reading=dataclasses.replace(READING, sizes=("n",)))),
            "sizes name \\['n'\\]",
        ),  # fmt: skip
        (lambda: make_config("toy.declared"), "takes an Experiment"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(make, message):
    with pytest.raises(ValidationError, match=message):
        make()


@pytest.mark.parametrize("target", ["no_such_module_xyz:f", "math:no_such_name", "math:pi.real.nope"])
def test_a_falsifier_whose_target_is_missing_names_it(target):
    with pytest.raises(ValidationError, match=f"target '{target}'"):
        with dataclasses.replace(HALVED, target=target).applied():
            pass


def test_a_run_that_returns_no_experiment_result_is_refused(tmp_path):
    with pytest.raises(ValidationError, match="returned a dict, not an ExperimentResult"):
        _run(tmp_path, _experiment(lambda config, ctx: {"frame": None}))
