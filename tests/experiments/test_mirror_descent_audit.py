"""The 2026-11-29 audit of paper 002's rows: what each row can tell, said in its text; Lemma 21's adversarial samples."""

import numpy as np
import pandas as pd

from attnlab.experiments import get_experiment
from attnlab.experiments.mirror_descent import e1, e1_claims, e2, growth
from attnlab.experiments.mirror_descent.cone import LEM21, REFERENCE_OF_ANOTHER_P, run_cone
from attnlab.verify import RunContext, make_config


def test_lemma_21_fails_around_another_exponents_svm_only_with_the_adversarial_samples(tmp_path):
    """Random samples lower the margin around any max-margin point; samples toward the other SVMs raise it."""
    config = make_config(get_experiment("mirror-descent.cone"), quick=True)
    wrong = REFERENCE_OF_ANOTHER_P  # not registered: it moves the cone the samples are filtered by
    ctx = RunContext(out=tmp_path, progress=False, quick=True)
    true_rows = [c for c in run_cone(config, ctx).checks if c.claim_id.startswith("lem21")]
    with wrong.applied():
        wrong_rows = [c for c in run_cone(config, ctx).checks if c.claim_id.startswith("lem21")]
    assert all(c.passed for c in true_rows) and len(true_rows) == 6  # current and revision 1, per p
    assert not any(c.passed for c in wrong_rows if c.claim_id == LEM21.id)  # the adversarial samples catch it
    assert all(c.passed for c in wrong_rows if c.claim_id == f"{LEM21.id}#rev1")  # the old, random-only reading
    # why it is not a registered falsifier: the cone around another reference keeps other samples
    assert [c.support for c in true_rows] != [c.support for c in wrong_rows]


def test_the_normalised_rows_say_so_and_keep_the_old_text_as_a_revision():
    """E1's and E2's directional-convergence rows run normalised MD: their texts name it (audit defect 4)."""
    for claim in (e1_claims.SELECTIVITY, e2.CLOSEST):
        assert "normalised l_p-AttGD" in claim.claim and claim.result == "002:Ext-DirConv"
        old = claim.revisions[-1]
        assert "normalised" not in old.claim and claim.claim.startswith(old.claim)


def test_properties_and_the_figure_observation_name_no_lemma():
    """The hypothesis, finiteness and fig. 4 rows are not checks of Lemmas 27 and 28 (audit defect 6)."""
    assert e1_claims.HYPOTHESIS.result == e2.HYPOTHESIS.result == "002:Def3"
    assert e1_claims.FINITE.result == "002:§4"
    path = pd.DataFrame({"step": np.repeat([0, 1, 2], 2), "bregman": [0.3, 0.2, 0.2, 0.1, 0.1, 0.05]})
    assert e1._monotone(2.0, path, "2/2 data sets").result == "002:Fig-E1"


def test_the_growth_rows_say_what_they_cannot_tell():
    """Every growth row passes with the mirror exponent off by 0.1 and starts below R_eps: the readings say so."""
    for claim in (growth.LEM24, growth.LEM27, growth.LEM28, growth.LEM29, growth.LEM30):
        assert "not the mirror map's exponent" in claim.reading.subset
        assert "below the radius R_eps = 32 ||W^mm||_p" in claim.reading.subset
        assert claim.revisions[-1].reading.subset.startswith(growth._OLD_EVERY_RUN)
    assert "0f754b7" in growth.LEM27.reading.tolerance and "0f754b7" in growth.LEM28.reading.tolerance
    assert "checks descent only" in growth.LEM24.reading.tolerance
    assert "safe side" in growth.LEM30.reading.tolerance
