"""The --quick runs of real.text on the keyword task and on a generated aclImdb corpus."""

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import run_experiment
from attnlab.experiments.real.text import TextConfig


def test_quick_text_on_keywords_passes_every_theory_check(tmp_path):
    record = run_experiment("real.text", quick=True, out=tmp_path, progress=False)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert frame["keyword_attention"].between(0, 1).all()
    checks = record.checks
    assert record.passed, checks.to_string()  # every optimizer learns, no run diverges, l_2-MD is SGD
    theory = checks[checks["kind"] == "property"]  # no theorem speaks of the text encoder: our code's properties
    assert theory["claim"].str.contains("learns: mean final test accuracy exceeds the majority-class rate").sum() == 7
    summary = pd.read_parquet(tmp_path / "summary.parquet")
    assert (summary["test_accuracy_mean"] >= 0.9).all(), summary  # a clear margin over the majority rate (~0.5)
    observations = checks[checks["kind"] == "observation"]
    assert observations["claim"].str.startswith("paper: ").all()
    assert observations["claim"].str.contains("attends to the deciding keyword").sum() == 7
    for claim in (
        "SNGD trains faster than SGD on text",
        "sparser key/query/value",
        "norm grows under SGD",
        "l_1.1-MD generalises",
    ):
        assert observations["claim"].str.contains(claim, regex=False).sum() == 1, claim
    for name in ("curves", "norms", "qkv_histograms", "attention"):
        assert (tmp_path / f"{name}.png").exists()


def test_quick_text_on_an_aclimdb_folder(tmp_path, aclimdb_root):
    overrides = {
        "dataset": "aclimdb",
        "imdb_root": str(aclimdb_root),
        "optimizers": ("sgd", "md:1.1,normalized=false"),
        "lrs": (0.1, 0.05),
        "tune_epochs": 0,  # the rates as given: the tuning has its own tests
        "seeds": 1,
        "max_len": 12,
        "batch_size": 2,
    }
    run_experiment("real.text", overrides, quick=True, out=tmp_path / "run", progress=False)
    frame = pd.read_parquet(tmp_path / "run" / "trajectory.parquet")
    assert set(frame["optimizer"]) == {"sgd", "md:1.1,normalized=false"} and "keyword_attention" not in frame
    attention = pd.read_parquet(tmp_path / "run" / "attention.parquet")
    assert attention["token"].max() == 11  # max_len tokens, [CLS] included


def test_text_config_needs_a_folder_for_aclimdb():
    with pytest.raises(ValidationError, match="imdb_root"):
        TextConfig(dataset="aclimdb")
