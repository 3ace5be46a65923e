"""The --quick runs of real.text on the keyword task and on a generated aclImdb corpus."""

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import run_experiment
from attnlab.experiments.real.text import TextConfig


def test_quick_text_on_keywords_records_keyword_attention(tmp_path):
    record = run_experiment("real.text", quick=True, out=tmp_path, progress=False)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert frame["keyword_attention"].between(0, 1).all()
    assert record.passed, record.checks.to_string()  # the theory checks: the pipeline learns, l_2-MD is SGD
    attention = record.checks[record.checks["claim"].str.contains("attends to the deciding keyword")]
    assert len(attention) == 7 and (attention["kind"] == "observation").all()
    for name in ("curves", "norms", "qkv_histograms", "attention"):
        assert (tmp_path / f"{name}.png").exists()


def test_quick_text_on_an_aclimdb_folder(tmp_path, aclimdb_root):
    overrides = {"dataset": "aclimdb", "imdb_root": str(aclimdb_root), "optimizers": ("sgd", "md-1.1"),
                 "lrs": (0.1, 0.05), "seeds": 1, "max_len": 12, "batch_size": 2}
    run_experiment("real.text", overrides, quick=True, out=tmp_path / "run", progress=False)
    frame = pd.read_parquet(tmp_path / "run" / "trajectory.parquet")
    assert set(frame["optimizer"]) == {"sgd", "md-1.1"} and "keyword_attention" not in frame
    attention = pd.read_parquet(tmp_path / "run" / "attention.parquet")
    assert attention["token"].max() == 11  # max_len tokens, [CLS] included


def test_text_config_needs_a_folder_for_aclimdb():
    with pytest.raises(ValidationError, match="imdb_root"):
        TextConfig(dataset="aclimdb")
