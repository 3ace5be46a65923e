"""The experiment contract: typed --set overrides, registry errors, and the files a run writes."""

import json
from dataclasses import dataclass

import pandas as pd
import pytest

from attnlab._overrides import parse_overrides
from attnlab._validation import ValidationError
from attnlab.experiments import registry
from attnlab.experiments.registry import run_experiment
from attnlab.verify import Check, Claim, Experiment, ExperimentResult


@dataclass(frozen=True)
class _Config:
    n: int = 3
    lr: float = 0.1
    name: str = "x"
    flag: bool = False
    sizes: tuple[int, ...] = (1, 2)
    cap: float | None = None
    OURS = ("lr",)


def test_overrides_are_typed_by_annotation():
    got = parse_overrides(_Config, ["n=1e3", "lr=0.5", "flag=true", "sizes=4,8", "cap=none", "name=abc"])
    assert got == {"n": 1000, "lr": 0.5, "flag": True, "sizes": (4, 8), "cap": None, "name": "abc"}
    assert parse_overrides(_Config, ["cap=2.5"]) == {"cap": 2.5}


def test_unknown_key_lists_the_keys():
    with pytest.raises(ValidationError, match="unknown key 'm'.*keys: n, lr, name, flag, sizes, cap"):
        parse_overrides(_Config, ["m=1"])
    with pytest.raises(ValidationError, match="expected int"):
        parse_overrides(_Config, ["n=2.5"])
    with pytest.raises(ValidationError, match="key=value"):
        parse_overrides(_Config, ["n"])


def test_unknown_experiment_lists_known_ones():
    with pytest.raises(ValidationError, match="unknown experiment 'nope'.*flagship"):
        registry.get_experiment("nope")


def test_run_writes_every_output(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    def run(config, ctx):
        fig = plt.figure()
        frame = pd.DataFrame({"run": [0, 0], "step": [0, 1], "loss": [1.0, 0.5]})
        return ExperimentResult(
            frame,
            [LOSS_FALLS.holds("< 1", 0.5, "bound", True)],
            {"fig": fig},
            {"extra": frame},
            ["a note"],
        )

    exp = Experiment(
        name="test.tmp",
        paper="none",
        summary="a test experiment",
        config_type=_Config,
        run=run,
        quick={"n": 1},
        claims=(LOSS_FALLS,),
    )
    monkeypatch.setitem(registry.REGISTRY.experiments, "test.tmp", exp)
    record = run_experiment("test.tmp", ["lr=0.2"], quick=True, out=tmp_path, progress=False)
    assert record.passed
    names = {p.name for p in tmp_path.iterdir()}
    assert {"trajectory.parquet", "checks.csv", "record.json", "fig.png", "extra.parquet"} <= names
    assert "fig.pdf" not in names  # a quick run writes the PNG only
    left = [n for n in names if n.endswith(".tmp") or n.startswith(".")]
    assert left == [".attnlab-run.json"]  # no temp files left behind; the marker of whose folder it is stays
    rec = json.loads((tmp_path / "record.json").read_text())
    assert rec["config"]["n"] == 1 and rec["config"]["lr"] == 0.2 and rec["defaults_ours"] == {"lr": 0.2}
    assert (
        rec["checks"]
        == {
            "passed": 0,
            "total": 0,
            "agree": 0,
            "observations": 0,
            "properties_passed": 1,
            "properties": 1,
            "findings": 0,
            "revisions": 0,
            "ours_agree": 0,
            "ours": 0,
        }
        and "torch" in rec["versions"]
    )
    assert pd.read_csv(tmp_path / "checks.csv")["passed"].tolist() == [True]
    full = run_experiment("test.tmp", quick=False, out=tmp_path / "full", progress=False)
    assert {p.name for p in full.out.glob("fig.*")} == {"fig.png", "fig.pdf"}  # a full-size run adds the PDF
    assert json.loads((full.out / "record.json").read_text())["figures"] == ["fig.png", "fig.pdf"]


def test_a_disagreeing_observation_is_recorded_but_does_not_fail_the_run(tmp_path, monkeypatch):
    def run(config, ctx):
        checks = [
            LOSS_FALLS.holds("< 1", 0.5, "bound", True),
            Check("faster than SGD", "< 1", 1.3, "bound", False, "paper fig. 1", kind="observation"),
        ]
        return ExperimentResult(pd.DataFrame({"step": [0]}), checks)

    monkeypatch.setitem(
        registry.REGISTRY.experiments,
        "test.obs",
        Experiment(name="test.obs", paper="none", summary="obs", config_type=_Config, run=run, claims=(LOSS_FALLS,)),
    )
    record = run_experiment("test.obs", out=tmp_path, progress=False)
    assert record.passed and record.counts.describe() == (
        "1/1 properties of our code hold; 0/1 observations agree with the paper"
    )
    assert pd.read_csv(tmp_path / "checks.csv")["kind"].tolist() == ["property", "observation"]


def test_a_theory_row_that_no_claim_declares_is_refused(tmp_path, monkeypatch):
    def run(config, ctx):
        return ExperimentResult(pd.DataFrame({"step": [0]}), [Check("loss falls", "< 1", 0.5, "bound", True, "§0")])

    stray = Experiment(name="test.stray", paper="none", summary="stray", config_type=_Config, run=run)
    monkeypatch.setitem(registry.REGISTRY.experiments, "test.stray", stray)
    with pytest.raises(ValidationError, match="no declared Claim stands for.*loss falls"):
        run_experiment("test.stray", out=tmp_path, progress=False)


LOSS_FALLS = Claim("loss falls", "000:Toy", "spec §0", kind="property")


def test_check_kind_is_validated():
    with pytest.raises(ValidationError, match="Check.kind must be one of"):
        Check("c", 1, 1, 0, True, kind="opinion")


def test_flagship_quick_passes(tmp_path):
    record = run_experiment("flagship", quick=True, out=tmp_path, progress=False)
    assert record.passed, record.checks.to_string()
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    assert set(frame["method"]) == {"gd", "ngd"} and (tmp_path / "trajectory.csv").exists()
