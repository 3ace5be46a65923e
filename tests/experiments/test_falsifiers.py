"""Every theory check can fail: each experiment's falsifiers, run at the quick size, fail every check that names them.

A falsifier is a small, plausible wrong mechanism (a wrong norm, an unnormalised step, a temperature): the quick run
under it must stay finite and every row naming it must fail, while the unmutated quick run (each paper's own test
module) passes. The declarations themselves are checked statically: every theory claim names a paper result and a
registered falsifier, and every falsifier is named by some claim (``Experiment.__post_init__`` refuses the rest).
"""

import math

import pytest

from attnlab.experiments import list_experiments
from attnlab.experiments.catalog import PAPER_IDS
from attnlab.verify import RunContext, make_config


def _cases():
    for experiment in list_experiments():
        for falsifier in experiment.falsifiers:
            marks = [pytest.mark.slow] if falsifier.slow else []
            yield pytest.param(experiment, falsifier, id=f"{experiment.name}::{falsifier.name}", marks=marks)


def test_every_theory_claim_names_a_paper_result_and_a_falsifier():
    for experiment in list_experiments():
        names = {f.name for f in experiment.falsifiers}
        for claim in experiment.claims:
            assert claim.result.split(":")[0] in {*PAPER_IDS.values(), "2308.16898"}, (experiment.name, claim)
            if claim.kind == "theory":
                assert claim.falsifier in names, (experiment.name, claim.claim)


@pytest.mark.parametrize(("experiment", "falsifier"), list(_cases()))
def test_falsifier_fails_every_check_that_names_it(experiment, falsifier, tmp_path):
    config = make_config(experiment, quick=True)
    with falsifier.applied():
        result = experiment.run(config, RunContext(out=tmp_path, progress=False, quick=True))
    named = [c for c in result.checks if c.falsifier == falsifier.name]
    declared = [c.claim for c in experiment.claims if c.falsifier == falsifier.name]
    assert named, f"no row of the quick run names {falsifier.name!r}; declared by {declared}"
    for check in named:
        if isinstance(check.measured, float):
            assert math.isfinite(check.measured), f"{check.claim}: a NaN is not a failed check ({falsifier.mechanism})"
        assert not check.passed, (
            f"{check.claim!r} still passes under {falsifier.mechanism!r}: measured {check.measured}, "
            f"predicted {check.predicted}, tolerance {check.tolerance}"
        )
