"""Every theory check can fail: each experiment's falsifiers, run at the quick size, fail every check that names them.

A falsifier is a small, plausible wrong mechanism (a wrong norm, an unnormalised step, a temperature): the quick run
under it must stay finite and every row naming it must fail, while the unmutated quick run (each paper's own test
module) passes. Every theory claim has at least one falsifier of kind ``mechanism`` (it changes the optimizer, the
data model, the model or the algorithm, not the reference), and that one fails the claim **numerically**: the row's
measured value is a finite number on the wrong side of its tolerance (a finite negative ``margin``), not a censored
"no width in the grid", a "no data set qualifies" or a crash. A falsifier never changes a hypothesis filter: a row
that reports its ``support`` (how many runs or data sets entered the statistic) has the same support under the
falsifier as in the unmutated run. The declarations are checked statically too: every theory claim names a paper
result and registered falsifiers, and every falsifier is named by some claim (``Experiment.__post_init__``).
"""

import math

import pytest

from attnlab.experiments import get_experiment, list_experiments
from attnlab.experiments.catalog import PAPER_IDS
from attnlab.verify import RunContext, make_config


def _cases():
    for experiment in list_experiments():
        for falsifier in experiment.falsifiers:
            marks = [pytest.mark.slow] if falsifier.slow else []
            yield pytest.param(experiment.name, falsifier.name, id=f"{experiment.name}::{falsifier.name}", marks=marks)


def _run(experiment, tmp_path):
    config = make_config(experiment, quick=True)
    return experiment.run(config, RunContext(out=tmp_path, progress=False, quick=True)).checks


_UNMUTATED: dict = {}


def _unmutated(name, tmp_path_factory):
    """The experiment's quick rows without a falsifier, run once per test session."""
    if name not in _UNMUTATED:
        _UNMUTATED[name] = _run(get_experiment(name), tmp_path_factory.mktemp("unmutated"))
    return _UNMUTATED[name]


def test_every_theory_claim_names_a_paper_result_and_a_falsifier():
    for experiment in list_experiments():
        names = {f.name for f in experiment.falsifiers}
        for claim in experiment.claims:
            assert claim.result.split(":")[0] in {*PAPER_IDS.values(), "2308.16898"}, (experiment.name, claim)
            if claim.kind == "theory":
                assert claim.falsifiers and set(claim.falsifiers) <= names, (experiment.name, claim.claim)


@pytest.mark.parametrize("name", sorted(e.name for e in list_experiments()))
def test_every_theory_claim_has_a_mechanism_falsifier(name):
    experiment = get_experiment(name)
    for claim in experiment.claims:
        if claim.kind == "theory":
            kinds = {experiment.falsifier(f).kind for f in claim.falsifiers}
            assert "mechanism" in kinds, f"{name}: {claim.claim!r} has only {kinds} falsifiers; add a mechanism one"


@pytest.mark.parametrize(("name", "falsifier_name"), list(_cases()))
def test_falsifier_fails_every_check_that_names_it(name, falsifier_name, tmp_path, tmp_path_factory):
    experiment = get_experiment(name)
    falsifier = experiment.falsifier(falsifier_name)
    with falsifier.applied():
        rows = _run(experiment, tmp_path)
    named = [c for c in rows if falsifier.name in c.falsifier.split(",") and c.kind == "theory"]
    declared = [c.claim for c in experiment.claims if falsifier.name in c.falsifiers]
    assert named, f"no row of the quick run names {falsifier.name!r}; declared by {declared}"
    for check in named:
        if isinstance(check.measured, float):
            assert math.isfinite(check.measured), f"{check.claim}: a NaN is not a failed check ({falsifier.mechanism})"
        assert not check.passed, (
            f"{check.claim!r} still passes under {falsifier.mechanism!r}: measured {check.measured}, "
            f"predicted {check.predicted}, tolerance {check.tolerance}"
        )
        if falsifier.kind == "mechanism":
            assert check.margin is not None and math.isfinite(check.margin) and check.margin <= 0, (
                f"{check.claim!r} fails under {falsifier.name!r} without a number on the wrong side of its "
                f"tolerance (measured {check.measured}, margin {check.margin}): a censored or non-numeric failure"
            )
    if any(check.support is not None for check in named):
        true_rows = [c for c in _unmutated(name, tmp_path_factory) if c.kind == "theory"]
        for check in named:
            twins = [c for c in true_rows if c.claim_id == check.claim_id and c.support is not None]
            same = [c for c in twins if c.claim == check.claim] or twins[:1]
            if check.support is not None and same:
                assert check.support == same[0].support, (
                    f"{check.claim!r}: {falsifier.name!r} changed the subset the statistic is taken over "
                    f"({same[0].support} -> {check.support}); a falsifier must not move a hypothesis filter"
                )
    findings = [c for c in named if c.investigation]
    if findings:
        _fail_further(findings, _unmutated(name, tmp_path_factory), falsifier)


def _fail_further(findings, true_rows, falsifier):
    """The rows of claims that declare a finding, under a falsifier: their true rows fail as well (the finding), so
    each must fail further, with a margin below its true row's (the k-th row of a claim against the true run's k-th,
    one per width)."""
    for i, check in enumerate(findings):
        twins = [c for c in true_rows if c.kind == "theory" and c.claim_id == check.claim_id]
        k = sum(c.claim_id == check.claim_id for c in findings[:i])  # its rank among the claim's rows
        assert k < len(twins), f"{check.claim!r}: no row of the unmutated run to compare {falsifier.name!r} with"
        true = twins[k]
        assert true.margin is not None and math.isfinite(true.margin), f"{true.claim!r}: the true row has no margin"
        assert check.margin < true.margin, (
            f"{check.claim!r} (a finding: the true row fails at {true.measured}, margin {true.margin}) fails no "
            f"further under {falsifier.name!r} (measured {check.measured}, margin {check.margin}): not seen"
        )
