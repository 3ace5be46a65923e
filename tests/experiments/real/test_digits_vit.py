"""The --quick run of real.digits-vit writes every output, and the config refuses bad settings."""

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, make_config, run_experiment
from attnlab.experiments.real.digits_vit import DigitsViTConfig


def test_quick_digits_vit_writes_tables_checks_and_figures(tmp_path):
    record = run_experiment("real.digits-vit", quick=True, out=tmp_path, progress=False)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    config = make_config(get_experiment("real.digits-vit"), quick=True)
    assert set(frame["optimizer"]) == set(config.optimizers)
    assert len(frame) == len(config.optimizers) * config.seeds * (config.epochs + 1)
    summary = pd.read_parquet(tmp_path / "summary.parquet")
    assert summary["optimizer"].tolist() == list(config.optimizers)
    for name in ("curves", "norms", "qkv_histograms", "attention"):
        assert (tmp_path / f"{name}.png").exists() and (tmp_path / f"{name}.pdf").exists()
    attention = pd.read_parquet(tmp_path / "attention.parquet")
    assert attention.groupby(["optimizer", "sample"])["weight"].sum().round(6).eq(1).all()
    claims = " ".join(record.checks["claim"])
    assert "l_2 mirror descent is SGD" in claims and "SNGD trains slower" in claims
    assert record.passed, record.checks.to_string()  # the pipeline learns; same lr for sgd and md-2: they agree
    assert (record.checks["kind"] == "observation").sum() == len(config.optimizers) + 3


def test_digits_vit_config_needs_one_lr_per_optimizer():
    with pytest.raises(ValidationError, match="optimizers has 2 names and lrs 1"):
        DigitsViTConfig(optimizers=("sgd", "adam"), lrs=(0.1,))


def test_digits_vit_config_refuses_unknown_optimizers():
    with pytest.raises(ValidationError, match="optimizer == 'rmsprop'"):
        DigitsViTConfig(optimizers=("rmsprop",), lrs=(0.1,))
