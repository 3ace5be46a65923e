"""The --quick run of real.digits-vit writes every output, and the config refuses bad settings."""

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.experiments.real.digits_vit import DigitsViTConfig
from attnlab.verify import make_config


def test_quick_digits_vit_writes_tables_checks_and_figures(tmp_path):
    record = run_experiment("real.digits-vit", quick=True, out=tmp_path, progress=False)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    config = make_config(get_experiment("real.digits-vit"), quick=True)
    assert set(frame["optimizer"]) == set(config.optimizers)
    assert len(frame) == len(config.optimizers) * config.seeds * (config.epochs + 1)
    summary = pd.read_parquet(tmp_path / "summary.parquet")
    assert summary["optimizer"].tolist() == list(config.optimizers)
    for name in ("curves", "norms", "qkv_histograms", "attention"):
        assert (tmp_path / f"{name}.png").exists() and not (tmp_path / f"{name}.pdf").exists()  # quick: PNG only
    attention = pd.read_parquet(tmp_path / "attention.parquet")
    assert attention.groupby(["optimizer", "sample"])["weight"].sum().round(6).eq(1).all()
    checks = record.checks
    assert record.passed, checks.to_string()  # every optimizer learns, no run diverges, l_2-MD is SGD
    properties = checks[checks["kind"] == "property"]  # no theorem speaks of a ViT: our code's properties
    assert len(properties) == 2 * len(config.optimizers) + 2  # learns (mean, every seed) per optimizer; 2 more
    tuning = pd.read_parquet(tmp_path / "tuning.parquet")  # every rate searched on its declared grid
    chosen = tuning[tuning["chosen"]].set_index("optimizer")["lr"]
    assert summary.set_index("optimizer")["lr"].to_dict() == chosen.to_dict()
    for name, grid in zip(config.optimizers, config.lr_grids):
        assert sorted(tuning.loc[tuning["optimizer"] == name, "lr"]) == sorted(grid or [chosen["sgd"]])
    revisions = checks[checks["kind"] == "revision"]  # the untuned and one-block readings, as they were recorded
    assert len(revisions) == 3 + 4 and revisions["measured"].str.startswith("quick: pass").all()
    assert "l_2 mirror descent is SGD" in " ".join(properties["claim"]) and "theory" not in set(checks["kind"])
    assert (summary["test_accuracy_mean"] >= 0.4).all(), summary  # a clear margin over the majority rate (~0.12)
    observations = checks[checks["kind"] == "observation"]
    assert len(observations) == 3 and observations["claim"].str.startswith("paper: ").all()
    assert "SNGD trains slower than SGD on a ViT" in " ".join(observations["claim"])


def test_digits_vit_config_needs_one_lr_per_optimizer():
    with pytest.raises(ValidationError, match="optimizers has 2 names and lrs 1"):
        DigitsViTConfig(optimizers=("sgd", "adam"), lrs=(0.1,))


def test_digits_vit_config_refuses_unknown_optimizers():
    with pytest.raises(ValidationError, match="optimizer 'rmsprop': unknown name 'rmsprop'"):
        DigitsViTConfig(optimizers=("rmsprop",), lrs=(0.1,))
