"""multi-token.equivalence runs in its --quick form, passes its theory checks and writes its tables."""

import pandas as pd

from attnlab.experiments import run_experiment


def test_quick_run_passes_its_checks_and_counts_every_draw(tmp_path):
    record = run_experiment("multi-token.equivalence", quick=True, out=tmp_path, progress=False)
    failed = record.checks[~record.checks["passed"] & (record.checks["kind"] == "theory")]
    assert failed.empty, failed[["claim", "predicted", "measured", "tolerance"]].to_string()
    acceptance = pd.read_parquet(tmp_path / "acceptance.parquet")
    rejected = acceptance.filter(like="rejected").sum(axis=1)
    assert (acceptance["kept"] + rejected == acceptance["draws"]).all()  # every draw kept or rejected once
    assert (acceptance["kept"] == 10).all()
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert {"alignment_eq", "alignment_mm", "alignment_one"} <= set(frame.columns)
    runs = pd.read_parquet(tmp_path / "runs.parquet")
    # singleton sets: the equivalence direction is the one-token SVM, so their gaps agree
    single = runs[~runs["multi_token"]]
    assert ((single["gap_eq"] - single["gap_one"]).abs() <= 1e-6).all()
    assert list(tmp_path.glob("*.png"))
