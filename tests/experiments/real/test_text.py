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
    last = frame[frame["epoch"] == frame["epoch"].max()]
    assert last["keyword_attention"].max() > 0.3  # two blocks: attention can select (one block's stayed at 0.2001)
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


@pytest.mark.parametrize("budget", [(("md:7", 60),), (("md:1.1,normalized=false", 0),)])
def test_text_config_refuses_a_budget_for_an_unknown_optimizer_or_below_one(budget):
    with pytest.raises(ValidationError, match="epochs_by_optimizer"):
        TextConfig(epochs_by_optimizer=budget)


def test_text_config_gives_l11_md_its_own_budget_and_the_rest_none():
    assert TextConfig().optimizer_epochs() == {"md:1.1,normalized=false": 60}
    assert TextConfig(epochs_by_optimizer=()).optimizer_epochs() == {}
