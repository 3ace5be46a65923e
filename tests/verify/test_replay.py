"""Replaying a record.json: the same experiment, config and seed give the same table; records name their origin."""

import json
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from attnlab._validation import ValidationError
from attnlab.cli import main
from attnlab.experiments import registry
from attnlab.experiments.registry import run_experiment
from attnlab.runner.provenance import git_state
from attnlab.verify import Claim, Experiment, ExperimentResult
from attnlab.verify.replay import load_record, rerun


@dataclass(frozen=True)
class _Config:
    seed: int = 0
    steps: int = 5
    sizes: tuple[int, ...] = (1, 2)


def _run(config, ctx):
    """Random numbers from the seed, so a replay with another seed or config would read differently."""
    draws = np.random.default_rng(config.seed).normal(size=config.steps) * sum(config.sizes)
    frame = pd.DataFrame({"run": 0, "step": range(config.steps), "loss": draws, "quick": ctx.quick})
    return ExperimentResult(frame, [RUNS.holds("-", 1.0, "-", True)])


RUNS = Claim("runs", "000:Toy", "test", kind="property")


@pytest.fixture(autouse=True)
def _toy(monkeypatch):
    exp = Experiment(
        name="test.replay",
        paper="none",
        summary="a seeded toy",
        config_type=_Config,
        run=_run,
        quick={"steps": 3},
        claims=(RUNS,),
    )
    monkeypatch.setitem(registry.REGISTRY.experiments, "test.replay", exp)


def _table(folder):
    return pd.read_parquet(folder / "trajectory.parquet")


def test_the_record_holds_the_command_line_and_the_git_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["attnlab", "run", "test.replay", "--set", "seed=4"])
    run_experiment("test.replay", ["seed=4"], out=tmp_path, progress=False)
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["command"] == ["attnlab", "run", "test.replay", "--set", "seed=4"]
    if "git" in record:  # absent only when the tests run outside a git checkout
        assert len(record["git"]["commit"]) == 40 and isinstance(record["git"]["dirty"], bool)


def test_a_replay_repeats_the_run_exactly(tmp_path):
    first = run_experiment("test.replay", ["seed=7", "sizes=3,4"], quick=True, out=tmp_path / "a", progress=False)
    again = rerun(tmp_path / "a" / "record.json", registry=registry.REGISTRY, out=tmp_path / "b", progress=False)
    pd.testing.assert_frame_equal(_table(first.out), _table(again.out))
    old, new = (json.loads((tmp_path / d / "record.json").read_text()) for d in ("a", "b"))
    assert (new["config"], new["config_hash"], new["seed"], new["quick"]) == (
        old["config"],
        old["config_hash"],
        7,
        True,
    )
    # the replay is not vacuous: another seed draws another table
    other = run_experiment("test.replay", ["seed=8", "sizes=3,4"], quick=True, out=tmp_path / "c", progress=False)
    assert not np.allclose(_table(other.out)["loss"], _table(first.out)["loss"])


def test_overrides_apply_on_top_of_the_record(tmp_path):
    run_experiment("test.replay", ["seed=7"], out=tmp_path / "a", progress=False)
    again = rerun(tmp_path / "a", ["steps=2"], registry=registry.REGISTRY, out=tmp_path / "b", progress=False)
    assert json.loads((again.out / "record.json").read_text())["config"] == {"seed": 7, "steps": 2, "sizes": [1, 2]}


def test_a_changed_config_class_or_commit_warns(tmp_path):
    run_experiment("test.replay", out=tmp_path, progress=False)
    record = json.loads((tmp_path / "record.json").read_text())
    del record["config"]["sizes"]  # as if the field were added to the config after the run
    record["config_hash"] = "0" * 12
    record["git"] = {"commit": "f" * 40, "dirty": False}
    (tmp_path / "record.json").write_text(json.dumps(record))
    with pytest.warns(UserWarning) as caught:
        rerun(tmp_path, registry=registry.REGISTRY, out=tmp_path / "b", progress=False)
    messages = " ".join(str(w.message) for w in caught)
    assert "no longer rebuilds to its hash 000000000000" in messages
    if git_state() is not None:  # the commit is compared only where the code runs from a checkout
        assert "recorded at commit ffffffffffff" in messages


def test_a_bad_record_is_refused_by_name(tmp_path):
    with pytest.raises(ValidationError, match="no such record; pass a run's record.json or its run directory"):
        load_record(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValidationError, match="not JSON"):
        load_record(tmp_path / "bad.json")
    (tmp_path / "partial.json").write_text('{"experiment": "x"}')
    with pytest.raises(ValidationError, match="needs keys experiment, config, quick; missing config, quick"):
        load_record(tmp_path / "partial.json")


def test_the_cli_replays_with_run_config(tmp_path):
    cli = CliRunner()
    first = cli.invoke(
        main, ["run", "test.replay", "--set", "seed=3", "--quick", "--out", str(tmp_path / "a"), "--no-progress"]
    )
    assert first.exit_code == 0, first.output
    again = cli.invoke(
        main, ["run", "--config", str(tmp_path / "a" / "record.json"), "--out", str(tmp_path / "b"), "--no-progress"]
    )
    assert again.exit_code == 0, again.output
    assert "test.replay: 1/1 properties of our code hold" in again.output
    pd.testing.assert_frame_equal(_table(tmp_path / "a"), _table(tmp_path / "b"))


def test_a_replay_into_another_runs_folder_is_refused_unless_overwrite(tmp_path):
    # rerun called run_experiment without overwrite (None: no check), so the replay's files joined the other run's
    run_experiment("test.replay", ["seed=1"], out=tmp_path / "other", progress=False)
    (tmp_path / "other" / "stale.png").write_text("the other run's figure")
    run_experiment("test.replay", ["seed=2"], out=tmp_path / "a", progress=False)
    with pytest.raises(ValidationError, match="already holds another run \\(test.replay, config .*pass --overwrite"):
        rerun(tmp_path / "a", registry=registry.REGISTRY, out=tmp_path / "other", progress=False)
    assert json.loads((tmp_path / "other" / "record.json").read_text())["config"]["seed"] == 1  # untouched
    again = rerun(tmp_path / "a", registry=registry.REGISTRY, out=tmp_path / "other", progress=False, overwrite=True)
    assert json.loads((again.out / "record.json").read_text())["config"]["seed"] == 2
    assert not (tmp_path / "other" / "stale.png").exists()
    # the recorded run's own folder holds this very run: reused without --overwrite
    rerun(tmp_path / "a", registry=registry.REGISTRY, out=tmp_path / "a", progress=False)


def test_the_cli_replay_honours_overwrite(tmp_path):
    cli = CliRunner()
    for seed, folder in ((1, "other"), (2, "a")):
        made = cli.invoke(main, ["run", "test.replay", "--set", f"seed={seed}", "--out", str(tmp_path / folder)])
        assert made.exit_code == 0, made.output
    replay = ["run", "--config", str(tmp_path / "a"), "--out", str(tmp_path / "other"), "--no-progress"]
    refused = cli.invoke(main, replay)
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert f"--out '{tmp_path / 'other'}' already holds another run (test.replay" in refused.output
    assert json.loads((tmp_path / "other" / "record.json").read_text())["config"]["seed"] == 1
    replaced = cli.invoke(main, [*replay, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert json.loads((tmp_path / "other" / "record.json").read_text())["config"]["seed"] == 2


def test_the_cli_refuses_a_mismatched_name_quick_or_nothing(tmp_path):
    cli = CliRunner()
    cli.invoke(main, ["run", "test.replay", "--out", str(tmp_path / "a"), "--no-progress"])
    record = str(tmp_path / "a" / "record.json")
    wrong = cli.invoke(main, ["run", "flagship", "--config", record])
    assert wrong.exit_code == 2 and "records experiment 'test.replay', not 'flagship'; drop NAME" in wrong.output
    quick = cli.invoke(main, ["run", "--config", record, "--quick"])
    assert quick.exit_code == 2 and "--quick does not apply with --config" in quick.output
    bare = cli.invoke(main, ["run"])
    assert bare.exit_code == 2 and "needs an experiment NAME (see attnlab list) or --config RECORD" in bare.output


def test_a_hand_edited_quick_that_is_not_a_boolean_is_refused(tmp_path):
    (tmp_path / "record.json").write_text('{"experiment": "x", "config": {}, "quick": "no"}')
    with pytest.raises(ValidationError, match="quick == 'no', must be true or false"):
        load_record(tmp_path)


def test_attnlab_tasks_registers_the_experiment_task_without_attnlab_report():
    import subprocess

    code = (
        "import sys; import attnlab.tasks; from attnlab.runner.task import get_task\n"
        "print(type(get_task('experiment')).__name__, 'attnlab.report' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "ExperimentTask False"


def test_the_runner_alone_knows_no_task_and_says_where_they_are():
    import subprocess

    code = "from attnlab.runner.task import get_task\nget_task('experiment')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1 and "import attnlab.tasks registers attnlab's own" in done.stderr


def test_a_binary_file_as_config_is_refused_by_name(tmp_path):
    (tmp_path / "sol.npz").write_bytes(b"PK\x03\x04\xfe\xff binary")
    with pytest.raises(ValidationError, match=r"--config .*sol.npz: not JSON"):
        load_record(tmp_path / "sol.npz")


def test_a_record_whose_seed_disagrees_with_its_config_is_refused(tmp_path):
    # the record's top-level seed is a copy of config.seed; an edit of it alone was replayed at the config's seed
    run_experiment("test.replay", ["seed=7"], out=tmp_path / "a", progress=False)
    record = json.loads((tmp_path / "a" / "record.json").read_text())
    record["seed"] = 5
    (tmp_path / "a" / "record.json").write_text(json.dumps(record))
    with pytest.raises(ValidationError, match=r"its seed \(5\) is not its config's seed \(7\).*edit config.seed"):
        rerun(tmp_path / "a", registry=registry.REGISTRY, out=tmp_path / "b", progress=False)


def test_the_command_line_shows_a_warning_as_one_line(tmp_path):
    run_experiment("test.replay", out=tmp_path / "a", progress=False)
    record = json.loads((tmp_path / "a" / "record.json").read_text())
    record["git"] = {"commit": "f" * 40, "dirty": False}
    (tmp_path / "a" / "record.json").write_text(json.dumps(record))
    result = CliRunner().invoke(main, ["run", "--config", str(tmp_path / "a"), "--out", str(tmp_path / "b")])
    lines = [line for line in result.output.splitlines() if "was recorded at commit" in line]
    assert lines and all(line.startswith("warning: ") for line in lines), result.output
    assert "UserWarning" not in result.output
