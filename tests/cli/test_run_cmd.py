"""`attnlab run --out`: another run's folder is refused unless --overwrite, and every --out problem is one line."""

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from attnlab._io import OutputError
from attnlab.cli import main
from attnlab.experiments import registry
from attnlab.runner.store import check_out, prepare_out
from attnlab.verify import Claim, Experiment, ExperimentResult
from attnlab.verify import experiment as verify_experiment


@dataclasses.dataclass(frozen=True)
class TinyConfig:
    steps: int = 3


def tiny_run(config, ctx):
    frame = pd.DataFrame({"step": range(config.steps), "loss": [1.0] * config.steps})
    return ExperimentResult(frame=frame, checks=[RUNS.holds("yes", "yes", "exact", True)])


RUNS = Claim("runs", "000:Toy", "spec §0", kind="property")


@pytest.fixture(autouse=True)
def tiny(monkeypatch):
    """An experiment 'tiny.run' that writes trajectory.parquet, checks.csv and record.json in no time."""
    registry.REGISTRY.load_all()
    exp = Experiment(
        name="tiny.run", paper="tiny", summary="tiny", config_type=TinyConfig, run=tiny_run, claims=(RUNS,)
    )
    monkeypatch.setitem(registry.REGISTRY.experiments, "tiny.run", exp)


def run(*args):
    return CliRunner().invoke(main, ["run", "tiny.run", "--no-progress", *args])


def test_the_same_run_again_reuses_its_folder(tmp_path):
    assert run("--out", str(tmp_path / "o")).exit_code == 0
    again = run("--out", str(tmp_path / "o"))
    assert again.exit_code == 0, again.output


def test_a_rerun_stopped_before_its_record_leaves_the_folder_unfinished(tmp_path, monkeypatch):
    out = tmp_path / "o"
    assert run("--out", str(out)).exit_code == 0
    (out / "keep.txt").write_text("the user's")
    write_json = verify_experiment.write_json

    def interrupted(path, payload):  # Ctrl-C after the tables, before record.json
        if Path(path).name == "record.json":
            raise KeyboardInterrupt
        return write_json(path, payload)

    monkeypatch.setattr(verify_experiment, "write_json", interrupted)
    with pytest.raises(KeyboardInterrupt):
        verify_experiment.run_experiment(registry.get_experiment("tiny.run"), out=out, overwrite=False, progress=False)
    assert not (out / "record.json").exists()  # the old record never vouches for the new checks.csv
    assert (out / "checks.csv").is_file() and (out / "keep.txt").read_text() == "the user's"  # nothing else removed


def test_ctrl_c_exits_130_with_one_line(tmp_path, monkeypatch):
    """Interrupted is not failed: status 130 (the shell's for SIGINT), not click's ``Aborted!`` and 1 (a failed check)."""

    def interrupted(path, payload):
        raise KeyboardInterrupt

    monkeypatch.setattr(verify_experiment, "write_json", interrupted)
    result = run("--out", str(tmp_path / "o"))
    assert result.exit_code == 130, result.output
    assert "interrupted: what finished is kept" in result.output and "Aborted" not in result.output


def test_prepare_out_removes_the_record_of_the_same_run_only(tmp_path):
    owner = {"experiment": "tiny.run", "config_hash": "abc"}
    (tmp_path / "record.json").write_text(json.dumps(owner))
    (tmp_path / "checks.csv").write_text("claim,passed\n")
    assert prepare_out(tmp_path, owner) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == [".attnlab-run.json", "checks.csv"]
    (tmp_path / "record.json").write_text(json.dumps({**owner, "config_hash": "other"}))
    with pytest.raises(OutputError, match="already holds another run"):
        prepare_out(tmp_path, owner)
    assert (tmp_path / "record.json").is_file()  # another run's record is left as it was


def test_another_run_in_out_is_refused_without_overwrite_and_replaced_with_it(tmp_path):
    out = tmp_path / "o"
    assert run("--out", str(out), "--set", "steps=3").exit_code == 0
    (out / "stale_figure.png").write_text("from the old run")
    refused = run("--out", str(out), "--set", "steps=4")
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert f"error: --out '{out}' already holds another run (tiny.run, config " in refused.output
    assert "pass --overwrite to replace it" in refused.output
    assert json.loads((out / "record.json").read_text())["config"]["steps"] == 3  # untouched
    replaced = run("--out", str(out), "--set", "steps=4", "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert not (out / "stale_figure.png").exists()  # no old file beside the new ones
    assert json.loads((out / "record.json").read_text())["config"]["steps"] == 4


def test_overwrite_never_empties_a_folder_that_holds_no_run(tmp_path):
    (tmp_path / "thesis.tex").write_text("precious")
    result = run("--out", str(tmp_path), "--overwrite")
    assert result.exit_code == 2
    expected = "holds files that are not an attnlab run (thesis.tex); attnlab writes a run only into an empty folder"
    assert expected in result.output
    assert (tmp_path / "thesis.tex").read_text() == "precious"
    without = run("--out", str(tmp_path))  # the advice never says --overwrite, which would be refused
    assert without.exit_code == 2 and expected in without.output and "pass --overwrite" not in without.output


@pytest.mark.parametrize("stop", [ValueError("the new run failed"), KeyboardInterrupt()])
def test_overwrite_keeps_the_other_run_until_the_new_one_is_complete(tmp_path, monkeypatch, stop):
    """--overwrite once emptied the other run's folder before computing: a failure or Ctrl-C then lost both."""
    out = tmp_path / "o"
    assert run("--out", str(out), "--set", "steps=3").exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def failing(config, ctx):
        (ctx.out / "checkpoint.pt").write_text("half of the new run")  # what a real experiment keeps to resume
        raise stop

    experiment = dataclasses.replace(registry.get_experiment("tiny.run"), run=failing)
    with pytest.raises(type(stop)):
        verify_experiment.run_experiment(experiment, ["steps=4"], out=out, overwrite=True, progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # the other run, whole
    staged = [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    assert [p.name for p in staged[0].iterdir()] == ["checkpoint.pt"]  # kept for the next try
    assert run("--out", str(out), "--set", "steps=4", "--overwrite").exit_code == 0
    assert json.loads((out / "record.json").read_text())["config"]["steps"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]  # the staging folder moved in, and is gone


def out_is_a_file(tmp):
    (tmp / "f").write_text("")
    return tmp / "f"


def parent_is_a_file(tmp):
    (tmp / "x").write_text("")
    return tmp / "x" / "o"


def name_too_long(tmp):
    return tmp / ("n" * 300)


@pytest.mark.parametrize(
    ("make", "message", "status"),
    [(out_is_a_file, "is a file.", 2), (parent_is_a_file, "a file is in the way", 1), (name_too_long, "too long", 1)],
)
def test_every_out_problem_is_one_line(make, message, status, tmp_path):
    """A path refused as bad input exits 2; one the file system refuses to write exits 1 (docs/cli/index.md)."""
    out = make(tmp_path)
    result = run("--out", str(out))
    assert result.exit_code == status, result.output
    last = result.output.strip().splitlines()[-1]  # click's usage errors put "Usage:" lines before theirs
    assert "Traceback" not in result.output and str(out) in last and message in last


def test_check_out_refuses_as_prepare_out_does_and_touches_nothing(tmp_path):
    owner = {"experiment": "tiny.run", "config_hash": "abc"}
    assert check_out(tmp_path / "new", owner) == "empty" and not (tmp_path / "new").exists()
    (tmp_path / "record.json").write_text(json.dumps(owner))
    assert check_out(tmp_path, owner) == "same" and (tmp_path / "record.json").is_file()  # the record is kept
    (tmp_path / "record.json").write_text(json.dumps({**owner, "config_hash": "other"}))
    with pytest.raises(OutputError, match="already holds another run \\(tiny.run, config other\\)"):
        check_out(tmp_path, owner)
    assert check_out(tmp_path, owner, overwrite=True) == "other" and (tmp_path / "record.json").is_file()


def test_a_run_stopped_before_its_first_output_is_let_in_again(tmp_path):
    """A real experiment stopped mid-run leaves only its checkpoints; the same command was then refused ("holds files
    that are not an attnlab run (checkpoints)"), so the checkpoints could not be resumed from."""
    out = tmp_path / "o"
    verify_experiment.run_experiment(registry.get_experiment("tiny.run"), out=out, overwrite=False, progress=False)
    for name in ("record.json", "checks.csv", "trajectory.parquet"):
        (out / name).unlink()
    (out / "checkpoints").mkdir()  # what a stopped run leaves
    assert run("--out", str(out)).exit_code == 0
    assert (out / "checkpoints").is_dir() and (out / "record.json").is_file()
    other = run("--out", str(out), "--set", "steps=5")
    assert other.exit_code == 2 and "already holds another run (tiny.run" in other.output
