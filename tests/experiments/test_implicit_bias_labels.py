"""Paper 001's rows carry the right labels: the figures' remarks are observations of the figure (never theorem rows),
a property of our set-up names the figure and not a theorem, Theorem 4's row reads the rule the theorem is stated
for (A6) while fig. 3's other rules are an extension, and every run notes where its data stand against Assumption 1.
"""

import math

import pandas as pd
import pytest

from attnlab.data import example1, near_orthogonal
from attnlab.experiments import get_experiment
from attnlab.experiments.implicit_bias.common import NORMED_MOM
from attnlab.experiments.implicit_bias.falsifiers import head_preconditioned
from attnlab.experiments.implicit_bias.fixed_decoder import assumption1_note
from attnlab.experiments.implicit_bias.remarks import TIE_FACTOR, cap_grid_remark, much_faster_than_gd
from attnlab.verify import RunContext, make_config

FIGURES = {"implicit-bias.fig2": "001:Fig2", "implicit-bias.fig5": "001:Fig5", "implicit-bias.fig3": "001:Fig3"}


def _quick(name, tmp_path):
    experiment = get_experiment(name)
    return experiment.run(make_config(experiment, quick=True), RunContext(out=tmp_path, progress=False, quick=True))


def _run(step, alignment):
    return pd.DataFrame({"step": step, "alignment": alignment})


def test_much_faster_reads_the_steps_to_the_level_and_the_last_gap_when_neither_gets_there():
    steps = [0, 10, 20, 100, 200]
    fast, slow = _run(steps, [0, 0.5, 0.995, 0.999, 0.9999]), _run(steps, [0, 0.1, 0.5, 0.9, 0.995])
    row = much_faster_than_gd(fast, slow, "fig. 2", "src", 10, "001:Fig2")
    assert row.kind == "observation" and row.result == "001:Fig2" and row.passed  # 20 x 10 <= 200
    assert not much_faster_than_gd(slow, fast, "fig. 2", "src", 10, "001:Fig2").passed
    close = _run(steps, [0, 0.1, 0.5, 0.9, 0.996])  # reaches the level at 200 against 20: 10x exactly
    assert much_faster_than_gd(fast, close, "fig. 2", "src", 10, "001:Fig2").passed
    assert not much_faster_than_gd(fast, _run(steps, [0, 0.1, 0.5, 0.995, 0.999]), "fig. 2", "src", 10, "").passed
    never_a, never_b = _run(steps, [0, 0.1, 0.5, 0.9, 0.989]), _run(steps, [0, 0.1, 0.5, 0.8, 0.85])
    assert much_faster_than_gd(never_a, never_b, "fig. 2", "src", 10, "").passed  # neither: gaps 0.011 vs 0.15
    deep = _run(steps, [0, 0.1, 0.5, 0.9, 0.9899])
    assert not much_faster_than_gd(deep, never_a, "fig. 2", "src", 10, "").passed  # neither: gaps 0.0101 vs 0.011
    assert "ours" in row.tolerance


def test_assumption1_note_reports_kappa_n_t_of_the_data():
    data = example1(4, 4, 16, 1.0, 2.0, seed=0)
    note = assumption1_note(data)
    assert f"kappa n T = {near_orthogonal(data).measured:.3g}" in note and "outside A1" in note
    antipodal = example1(4, 4, 16, 1.0, 2.0, "first", True, seed=0)
    assert "kappa' n T" in assumption1_note(antipodal, antipodal=True)


@pytest.mark.parametrize("name", ["implicit-bias.fig2", "implicit-bias.fig5", "flagship"])
def test_no_theorem_row_is_an_ordering_of_ngd_against_gd_and_the_remark_is_the_figures(name, tmp_path):
    result = _quick(name, tmp_path)
    theory = [c for c in result.checks if c.kind == "theory"]
    assert not [c for c in theory if c.result == "001:Thm6" and "NGD" in c.claim and "GD" in c.claim]
    remark = [c for c in result.checks if "much faster than GD" in c.claim]
    assert len(remark) == 1 and remark[0].kind == "observation"
    assert remark[0].result == FIGURES.get(name, "001:Fig2")
    assert any("Assumption 1" in note and "kappa n T" in note for note in result.notes)


@pytest.mark.parametrize("name", ["implicit-bias.fig2", "implicit-bias.fig5"])
def test_observations_name_their_figure_and_the_same_start_property_no_theorem(name, tmp_path):
    result = _quick(name, tmp_path)
    observations = [c for c in result.checks if c.kind == "observation"]
    assert observations and all(c.result == FIGURES[name] for c in observations)
    assert all("ours" in c.tolerance for c in observations if "0.99" in c.tolerance or "1e-06" in c.tolerance)
    (same,) = [c for c in result.checks if c.claim_id == "methods-same-start"]
    assert same.kind == "property" and same.result == FIGURES[name]
    experiment = get_experiment(name)
    assert not [c for c in experiment.claims if c.kind == "property" and ":Thm" in c.result]


def test_theorem4_row_reads_a6_and_the_other_rules_are_an_extension(tmp_path):
    """A preconditioner on the head of the normalised rules moves the extension row and leaves Theorem 4's row (A6,
    which the falsifier does not touch) exactly as it was."""
    experiment = get_experiment("implicit-bias.fig3")
    claims = {c.id: c for c in experiment.claims}
    assert claims["head-aligns"].result == "001:Thm4" and ":Ext-" in claims["head-aligns-rules"].result
    plain = {c.claim_id: c for c in _quick("implicit-bias.fig3", tmp_path).checks if c.kind == "theory"}
    with head_preconditioned("attnlab.experiments.implicit_bias.joint").applied():
        moved = {c.claim_id: c for c in _quick("implicit-bias.fig3", tmp_path).checks if c.kind == "theory"}
    assert moved["head-aligns"].measured == plain["head-aligns"].measured and plain["head-aligns"].passed
    assert plain["head-aligns-rules"].passed and not moved["head-aligns-rules"].passed
    assert math.isfinite(moved["head-aligns-rules"].measured)
    result = _quick("implicit-bias.fig3", tmp_path)
    assert all(c.result == "001:Fig3" for c in result.checks if c.kind == "observation")
    assert any("kappa n T" in note and "Condition 1" in note for note in result.notes)


def _grid_config(ngd_caps, polyak_caps):
    from types import SimpleNamespace

    return SimpleNamespace(
        antipodal=False, ngd_caps=ngd_caps, polyak_caps=polyak_caps, ngd_cap=10.0, polyak_cap=10.0, record_every=10
    )


def _loss_run(alignment, loss):
    steps = [0, 10, 20, 100, 200]
    return pd.DataFrame({"step": steps, "alignment": alignment, "loss": loss})


def test_the_cap_grid_decides_a_tie_by_a_factor_2_of_the_last_values_and_keeps_the_old_reading():
    never = [0, 0.1, 0.5, 0.9, 0.98]  # never at corr 0.99
    ngd = _loss_run(never, [1.0, 0.8, 0.6, 0.5, 0.4])  # L_* = 0: never at the loss level either
    near = _loss_run([0, 0.1, 0.5, 0.9, 0.981], [1.0, 0.8, 0.6, 0.5, 0.39])  # ties within the factor
    far = _loss_run([0, 0.1, 0.5, 0.9, 0.995], [1.0, 0.8, 0.6, 0.5, 0.1])  # first at corr 0.99, 4x below in loss
    runs = {("NGD", 10.0): ngd, ("Polyak", 10.0): near}
    row, table = cap_grid_remark(_grid_config((10.0,), (10.0,)), runs, 0.0)
    assert not row.passed and row.inconclusive  # no pair holds, one ties
    assert bool(table["held_before"].iloc[0]) and "holds at 1 pairs, agrees" in row.measured  # any margin before
    runs[("Polyak", 100.0)] = far
    row, table = cap_grid_remark(_grid_config((10.0,), (10.0, 100.0)), runs, 0.0)
    assert row.passed and not row.inconclusive and table["holds"].tolist() == [False, True]
    assert f"factor {TIE_FACTOR:g}" in row.tolerance


@pytest.mark.parametrize("name", ["implicit-bias.fig2", "implicit-bias.fig5"])
def test_ngd_mom_s_remark_is_read_in_both_forms_by_one_reading(name, tmp_path):
    result = _quick(name, tmp_path)
    boosts = [c for c in result.checks if "gives a boost over NGD" in c.claim]
    assert len(boosts) == 2 and all(c.kind == "observation" for c in boosts)
    assert boosts[0].tolerance == boosts[1].tolerance and "alternative form" in boosts[1].claim
    assert set(result.frame["method"]) >= {"NGD-mom", NORMED_MOM}
