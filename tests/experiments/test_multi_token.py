"""multi-token.equivalence runs in its --quick form, passes its theory checks and writes its tables."""

import pandas as pd
import pytest

from attnlab.experiments import run_experiment
from attnlab.verify import share_lower_bound


def test_quick_run_passes_its_checks_and_counts_every_draw(tmp_path):
    record = run_experiment("multi-token.equivalence", quick=True, out=tmp_path, progress=False)
    checks = record.checks
    failed = checks[~checks["passed"] & checks["kind"].isin(["theory", "property"]) & (checks["verdict"] != "finding")]
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    acceptance = pd.read_parquet(tmp_path / "acceptance.parquet")
    assert list(acceptance.filter(like="rejected").columns) == [
        f"rejected: {reason}"
        for reason in (
            "labels all +1",
            "probability in (low, high]",
            "nothing at or below low",
            "a set is its whole sequence",
            "SVM infeasible",
        )
    ]
    rejected = acceptance.filter(like="rejected").sum(axis=1)
    assert (acceptance["kept"] + rejected == acceptance["draws"]).all()  # every draw kept or rejected once
    assert (acceptance["kept"] == 40).all() and (acceptance["acceptance_rule"] == "source").all()
    # the source's rule keeps at least what ours keeps; here some kept runs have a whole-sequence set
    assert (acceptance["acceptance_source"] >= acceptance["acceptance_ours"]).all()
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert {"alignment_eq", "alignment_mm", "alignment_one"} <= set(frame.columns)
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert runs["whole_sequence_set"].any() and (acceptance["kept"] == len(runs)).all()
    # every replay reaches T under plain NGD: no ended-early row
    assert (runs["status"] == "completed").all() and "ended-early" not in set(checks["claim_id"])
    # singleton sets: the equivalence direction is the one-token SVM, so their gaps agree
    single = runs[~runs["multi_token"]]
    assert ((single["gap_eq"] - single["gap_one"]).abs() <= 1e-6).all()
    # the theory rows, the fitted property and the old reading (a revision row right below its claim)
    kinds = record.checks.set_index("claim_id")["kind"].to_dict()
    assert kinds["direction-closer"] == "theory" and kinds["fitted-closer"] == "property"
    assert kinds["direction-closer#rev1"] == "revision" and kinds["finite-bounded"] == "theory"
    # the current reading is the confidence bound of the share of pushed runs whose 1 - corr(W_t, W_dir) falls faster
    # than ||W_t||^-1; the closer share's bound (revision 3) and the raw share (revision 2) are computed beside it
    rows = record.checks.set_index("claim_id")
    multi = runs[runs["multi_token"]]
    pushed = multi[~multi["unpushed_set"]]
    falls = int((pushed["direction_exponent"] < -1).sum())
    assert 2 <= len(pushed) < len(multi) and int(rows.loc["direction-closer", "support"]) == len(pushed)
    assert float(rows.loc["direction-closer", "measured"]) == pytest.approx(share_lower_bound(falls, len(pushed))[0])
    # direction-all, the same reading on every multi-token run, fails: the runs parked at f = 0 do not fall (a finding,
    # the only row allowed to fail, and only with its investigation)
    every = int((multi["direction_exponent"] < -1).sum())
    assert float(rows.loc["direction-all", "measured"]) == pytest.approx(share_lower_bound(every, len(multi))[0])
    assert rows.loc["direction-all", "verdict"] == "finding" and int(rows.loc["direction-all", "support"]) == len(multi)
    assert (checks["verdict"] == "finding").sum() == 1
    closer = int((multi["gap_mm"] < multi["gap_one"]).sum())
    assert float(rows.loc["direction-closer#rev3", "measured"]) == pytest.approx(
        share_lower_bound(closer, len(multi))[0]
    )
    assert float(rows.loc["direction-closer#rev2", "measured"]) == pytest.approx(closer / len(multi))
    assert list(tmp_path.glob("*.png"))


def test_the_exponents_and_the_subset_are_recomputed_from_the_library(tmp_path):
    """Independent of the experiment's table: the finite part and W_dir at the kept run's W_T/2 and W_T, and whether
    a set is not pushed, from the library."""
    import numpy as np
    import torch

    from attnlab.batched import train
    from attnlab.data import multi_token
    from attnlab.models import ReluHead
    from attnlab.svm import finite_part, set_direction_svm

    run_experiment("multi-token.equivalence", quick=True, out=tmp_path, progress=False)
    row = pd.read_parquet(tmp_path / "runs.parquet").query("multi_token").iloc[0]
    d = int(row["d"])
    draw = multi_token(3, 4, d, seed=int(row["seed"]))
    g = torch.Generator().manual_seed(10**6 + int(row["seed"]))
    W0 = (2 * torch.rand(d, d, generator=g, dtype=torch.float64) - 1) / d**0.5  # U(-1/sqrt d, 1/sqrt d)
    data, head = draw.data, ReluHead(draw.V, draw.v)
    kwargs = {"optimizer": "ngd", "lr": 0.1, "loss": "logistic"}
    W_half = train(data.X, data.Z, data.y, head, W0, steps=int(row["half_step"]), **kwargs).W[0]
    W_last = train(data.X, data.Z, data.y, head, W0, steps=2000, **kwargs).W[0]
    sets = torch.softmax(data.X @ W_last @ data.Z.unsqueeze(-1), dim=1).squeeze(-1) > 1e-3
    logits = [torch.einsum("ntd,de,ne->nt", data.X, W, data.Z) for W in (W_half, W_last)]
    fin = [float(finite_part(data, sets, lg).W.norm()) for lg in logits]
    growth = np.log(float(W_last.norm()) / float(W_half.norm()))
    assert row["finite_exponent"] == pytest.approx(np.log(fin[1] / fin[0]) / growth, rel=1e-6, abs=1e-9)
    # the direction's decay exponent: 1 - cos(W_t, W_dir) at T/2 and T, W_dir the direction program of the sets
    W_dir = set_direction_svm(data, sets).W
    gaps = [1 - float((W * W_dir).sum() / (W.norm() * W_dir.norm())) for W in (W_half, W_last)]
    assert row["direction_exponent"] == pytest.approx(np.log(gaps[1] / gaps[0]) / growth, rel=1e-5, abs=1e-6)
    # unpushed: a label -1 sequence, or one whose ReLU head outputs 0, with a set that is not its whole sequence
    u = torch.einsum("nt,ntd->nd", torch.softmax(torch.einsum("ntd,de,ne->nt", data.X, W_last, data.Z), -1), data.X)
    output = torch.relu(u @ draw.V.T) @ draw.v
    assert row["unpushed_set"] == bool((((data.y < 0) | (output <= 0)) & ~sets.all(dim=1)).any())


def test_our_acceptance_rule_is_an_option_and_refuses_whole_sequence_sets(tmp_path):
    record = run_experiment(
        "multi-token.equivalence", quick=True, out=tmp_path, progress=False, overrides={"acceptance": "ours"}
    )
    acceptance = pd.read_parquet(tmp_path / "acceptance.parquet")
    assert (acceptance["acceptance_rule"] == "ours").all() and (
        acceptance["rejected: a set is its whole sequence"] > 0
    ).all()
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    assert not runs["whole_sequence_set"].any()
    # finite-bounded and direction-all read the runs our rule keeps (whether they pass there is the run's finding, not
    # a property); direction-closer's subset is empty under our rule: every run has a label -1 sequence, whose set is
    # then not its whole sequence, so the row says there are not enough pushed runs
    multi = int(runs["multi_token"].sum())
    theory = record.checks.query("kind == 'theory'")
    assert set(theory["claim_id"]) == {"finite-bounded", "direction-all"} and (theory["support"] == multi).all()
    assert runs["unpushed_set"].all()
    enough = record.checks.set_index("claim_id").loc["enough-pushed"]
    assert enough["kind"] == "property" and int(enough["support"]) == 0 and not enough["passed"]


def test_runs_that_diverge_in_the_replay_are_kept_listed_and_left_out_of_the_statistics(tmp_path):
    """Heavy-ball NGD with momentum steps lr ||m|| / ||g||, which explodes when the gradient collapses: half of these
    runs diverge, end at their last finite iterate (the loop's policy) and have no row at T. The run once crashed
    building its table; now each run has its status, and the rows read the completed runs only."""
    sizes = {"ds": (8,), "runs": 8, "chunk": 100, "max_draws": 300, "steps": 300, "record_every": 50}
    overrides = {"optimizer": "ngd:momentum=0.5", **sizes}
    record = run_experiment("multi-token.equivalence", quick=True, out=tmp_path, progress=False, overrides=overrides)
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    ended = runs[runs["status"] != "completed"]
    assert len(runs) == 8 and (ended["status"] == "diverged").all() and 0 < len(ended) < len(runs)
    assert (ended["last_step"] < 300).all() and (runs.loc[runs["status"] == "completed", "last_step"] == 300).all()
    # no W at T for an ended run: its replay columns are NaN, the completed runs' are not
    replayed = ["gap_eq", "gap_mm", "gap_one", "norm_last", "finite_norm_last", "direction_exponent"]
    assert ended[replayed].isna().all().all() and runs.loc[runs["status"] == "completed", replayed].notna().all().all()
    rows = record.checks.set_index("claim_id")
    row = rows.loc["ended-early"]
    assert row["kind"] == "property" and not row["passed"] and int(row["support"]) == len(runs)
    assert str(row["measured"]).startswith(f"{len(ended)} of {len(runs)} ({len(ended)} diverged;")
    multi = int(runs.loc[runs["status"] == "completed", "multi_token"].sum())
    assert int(rows.loc["enough", "support"]) == multi  # the completed multi-token runs only


def test_the_width_trend_is_the_figures_mean_judged_within_three_standard_errors():
    """multi-token §6: the mean over runs (the source's statistic, not the median), d_min against d_max."""
    from attnlab.experiments.multi_token import _width_trend

    falling = _width_trend({4: [0.10, 0.12, 0.08, 0.10], 10: [0.010, 0.012, 0.008, 0.010]})
    assert falling.verdict == "agrees" and falling.measured == pytest.approx(0.09)
    rising = _width_trend({4: [0.010, 0.012, 0.008, 0.010], 6: [0.5, 0.5], 10: [0.10, 0.12, 0.08, 0.10]})
    assert rising.verdict == "disagrees"  # only the ends count: d=6 in between does not
    # the median falls (0.01 < 0.02) but one run at d=10 lifts the mean above d=4's: the figure's mean decides
    skewed = _width_trend({4: [0.02, 0.02, 0.02, 0.02, 0.02], 10: [0.01, 0.01, 0.01, 0.01, 0.9]})
    assert skewed.measured < 0 and skewed.verdict == "inconclusive"  # one outlier: a wide spread, nothing resolved
    close = _width_trend({4: [0.10, 0.20, 0.15], 10: [0.12, 0.18, 0.14]})
    assert close.verdict == "inconclusive" and not close.passed
