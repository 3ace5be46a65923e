"""run_sweep: results store layout, index, failures recorded without stopping the sweep, resume skips finished runs."""

import json
import signal
import sys
import types
from pathlib import Path

import pandas as pd
import pytest
from sweep_fixtures import (
    Diverges,
    Explodes,
    FailsWhenTold,
    KillAlways,
    ToyTrain,
    log_lines,
    sweep_process,
    wait_until,
)

from attnlab._validation import ValidationError
from attnlab.runner import Task, register_task, write_json
from attnlab.runner.executors import InProcessExecutor, PoolExecutor
from attnlab.runner.fingerprint import source_hash
from attnlab.runner.results import INDEX_COLUMNS, read_index
from attnlab.runner.spec import Job, SweepSpec, expand
from attnlab.runner.sweep import run_sweep
from attnlab.runner.task import execute

register_task(ToyTrain())
register_task(Explodes())
register_task(Diverges())
register_task(FailsWhenTold())
register_task(KillAlways())
SPEC = SweepSpec(task="toy-train", base={"d": 3, "steps": 5}, grid={"lr": [0.1, 0.2], "seed": [0, 1, 2]})


def test_sweep_writes_one_directory_per_config_and_an_index(tmp_path):
    result = run_sweep(SPEC, tmp_path, progress=False)
    index = pd.read_parquet(tmp_path / "index.parquet")
    assert list(index.columns) == INDEX_COLUMNS
    assert list(index["status"]) == ["done"] * 6
    jobs = expand(SPEC)
    assert list(index["key"]) == [j.key for j in jobs]
    for job, run_dir in zip(jobs, index["run_dir"]):
        assert run_dir == f"runs/toy-train-{job.key}"
        assert json.loads((tmp_path / run_dir / "record.json").read_text())["params"] == job.params
    assert result.ran == 6 and result.failed.empty


def test_restart_skips_finished_runs_and_reruns_the_rest(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    jobs = expand(SPEC)
    unfinished = tmp_path / "runs" / f"toy-train-{jobs[2].key}" / "record.json"
    unfinished.unlink()  # as if the sweep had died before this run finished
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").glob("*/record.json")}
    result = run_sweep(SPEC, tmp_path, progress=False)
    assert result.ran == 1 and unfinished.exists()
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())  # finished runs untouched


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path):
    spec = SweepSpec(task="explodes", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0}, grid={"explode": [False, True]})
    result = run_sweep(spec, tmp_path, progress=False)
    assert list(result.index["status"]) == ["done", "failed"]
    assert "RuntimeError: boom" in result.failed["error"].iloc[0]
    assert list(read_index(tmp_path)["status"]) == ["done", "failed"]


def test_a_finished_run_computed_again_is_listed_as_it_ended_now(tmp_path, monkeypatch):
    # The sweep's first scan reads the stored runs while they are finished; recomputed (--fresh, or new code) and
    # failing, they must be listed failed, not as the finished runs read before they ran.
    spec = SweepSpec(task="fails-when-told", base={"d": 3, "steps": 5, "lr": 0.1}, grid={"seed": [0, 1]})
    assert list(run_sweep(spec, tmp_path, progress=False).index["status"]) == ["done", "done"]
    monkeypatch.setattr(FailsWhenTold, "fail", True)
    result = run_sweep(spec, tmp_path, progress=False, fresh=True)
    assert result.ran == 2
    assert list(result.index["status"]) == ["failed", "failed"]
    assert list(pd.read_parquet(tmp_path / "index.parquet")["status"]) == ["failed", "failed"]
    assert (result.index["reason"] == "").all()  # no manifest: nothing of the runs read before they ran


def test_a_run_whose_worker_always_dies_is_listed_failed_with_why(tmp_path):
    spec = SweepSpec(task="kill-always", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0}, grid={"kill": [False, True]})
    result = run_sweep(spec, tmp_path, PoolExecutor(workers=1, retries=0), progress=False)
    assert list(result.index["status"]) == ["done", "failed"]
    assert "a worker of the pool died before this job finished (retries=0" in result.failed["error"].iloc[0]
    assert list(read_index(tmp_path)["status"]) == ["done", "failed"]


def test_jobs_that_kill_their_workers_do_not_fail_the_others(tmp_path):
    # the killers start first and break the shared pool every time; retried each in a pool of its own, the
    # healthy jobs finish and only the killers fail (before: every job failed, "died 2 times", none ever ran)
    spec = SweepSpec(
        task="kill-always", base={"d": 3, "steps": 5, "lr": 0.1}, grid={"kill": [True, False], "seed": [0, 1, 2]}
    )
    result = run_sweep(spec, tmp_path, PoolExecutor(workers=2, retries=1), progress=False)
    assert list(result.index["status"]) == ["failed"] * 3 + ["done"] * 3
    assert result.failed["error"].str.contains("died in each of 1 tries in a pool of its own").all()


def test_read_index_trusts_the_run_directories_over_a_stale_index(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    first, second = sorted((tmp_path / "runs").iterdir())[:2]
    (first / "manifest.json").unlink()  # as if killed before the runner finished the run
    (second / "record.json").unlink()  # a finished run damaged afterwards
    index = read_index(tmp_path).set_index("run_dir")
    assert sorted(index["status"]) == ["damaged"] + ["done"] * 4 + ["pending"]
    assert index.loc[f"runs/{second.name}", "error"] == "record.json is missing"


def test_bad_parameters_are_refused_before_anything_runs(tmp_path):
    spec = SweepSpec(task="toy-train", base={"d": 3, "steps": 5, "seed": 0}, grid={"lr": [0.1, -1.0]})
    with pytest.raises(ValidationError, match="lr == -1.0, must be > 0"):
        run_sweep(spec, tmp_path, progress=False)
    assert not (tmp_path / "runs").exists()


def test_read_index_needs_a_sweep_folder(tmp_path):
    with pytest.raises(ValidationError, match="holds no index.parquet"):
        read_index(tmp_path)


def test_two_sweeps_on_one_store_both_listed_in_the_index(tmp_path):
    other = SweepSpec(task="toy-train", base={"d": 3, "steps": 5}, grid={"lr": [0.3], "seed": [7, 8]})
    run_sweep(SPEC, tmp_path, progress=False)
    run_sweep(other, tmp_path, progress=False)
    index = pd.read_parquet(tmp_path / "index.parquet")
    keys = {j.key for j in expand(SPEC)} | {j.key for j in expand(other)}
    assert set(index["key"]) == keys and len(index) == 8  # the second sweep did not drop the first one's rows
    assert list(index["status"]) == ["done"] * 8
    assert read_index(tmp_path).equals(index)


class FinishesNext(ToyTrain):
    """Running seed 0 also runs seed 1 to the end, as a second sweep on the same store would meanwhile."""

    name = "finishes-next"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        with open(params["log"], "a") as log:
            log.write(f"start {params['seed']}\n")
        if params["seed"] == 0:
            other = {**params, "seed": 1}
            key = Job(self.name, other).key
            execute(self, key, other, run_dir.parent / f"{self.name}-{key}")
        return super().run(params, run_dir)


def test_what_is_left_to_do_is_decided_when_a_run_is_claimed_not_at_start(tmp_path):
    register_task(FinishesNext())
    log = tmp_path / "log"
    spec = SweepSpec(task="finishes-next", base={"d": 3, "steps": 5, "lr": 0.1, "log": str(log)}, grid={"seed": [0, 1]})
    result = run_sweep(spec, tmp_path / "out", progress=False)
    assert log.read_text().split() == ["start", "0", "start", "1"]  # seed 1 ran once, inside seed 0's run
    assert list(result.index["status"]) == ["done", "done"] and result.ran == 1


@pytest.mark.parametrize("executor", [InProcessExecutor(), PoolExecutor(workers=2)], ids=["inprocess", "pool"])
def test_a_diverged_run_is_finished_recorded_and_not_rerun(executor, tmp_path):
    spec = SweepSpec(task="diverges", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0}, grid={"diverge": [True, False]})
    result = run_sweep(spec, tmp_path, executor, progress=False)
    assert list(result.index["status"]) == ["diverged", "done"] and result.failed.empty
    assert list(pd.read_parquet(tmp_path / "index.parquet")["status"]) == ["diverged", "done"]
    again = run_sweep(spec, tmp_path, executor, progress=False)
    assert again.ran == 0 and list(read_index(tmp_path)["status"]) == ["diverged", "done"]


def test_two_concurrent_sweeps_and_a_kill_lose_nothing_and_compute_no_finished_run_twice(tmp_path):
    log, out = tmp_path / "log", tmp_path / "out"
    spec = {
        "task": "sweep_fixtures:Recorded",
        "base": {"d": 3, "steps": 5, "lr": 0.1, "sleep": 0.3, "log": str(log)},
        "grid": {"seed": list(range(10))},
    }
    first, second = sweep_process(out, **spec), sweep_process(out, **spec)
    # 60 s: two interpreters importing torch on a loaded 2-core machine
    wait_until(lambda: len(log_lines(log, "end")) >= 3, 60, "three finished runs", first)
    first.send_signal(signal.SIGKILL)  # a crash in the middle: no cleanup code runs, its claim dies with it
    first.wait()
    assert second.wait(timeout=60) == 0, second.stdout.read().decode()
    ends = log_lines(log, "end")
    # every run finished, and none twice, except the one the kill may have caught between the task's "end" and its
    # manifest, which the runner writes last: that run was not finished (no manifest), so it is computed again
    assert len(set(ends)) == 10 and len(ends) - len(set(ends)) <= 1, ends
    assert list(read_index(out)["status"]) == ["done"] * 10
    assert list(pd.read_parquet(out / "index.parquet")["status"]) == ["done"] * 10  # the last index is true
    again = run_sweep(SweepSpec(**spec), out, progress=False)
    assert again.ran == 0 and log_lines(log, "end") == ends


class ScriptToy(ToyTrain):
    """ToyTrain as if defined in the script that runs the sweep."""

    name = "script-toy"


ScriptToy.__module__ = "__main__"
register_task(ScriptToy())
SCRIPT_SPEC = SweepSpec(task="script-toy", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0})


@pytest.fixture
def fake_main(monkeypatch):
    """Replace ``__main__`` by a bare module (give it a ``__file__`` to make it a script); source hashes reset."""
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    source_hash.cache_clear()
    yield main
    source_hash.cache_clear()


def test_a_task_defined_in_the_running_script_is_recomputed_after_the_script_changes(tmp_path, fake_main):
    script = tmp_path / "sweep_script.py"
    script.write_text("FACTOR = 20\n")
    fake_main.__file__ = str(script)
    assert run_sweep(SCRIPT_SPEC, tmp_path / "out", progress=False).ran == 1
    assert run_sweep(SCRIPT_SPEC, tmp_path / "out", progress=False).ran == 0  # the script did not change
    script.write_text("FACTOR = 30\n")
    source_hash.cache_clear()  # a new process hashes the edited script
    again = run_sweep(SCRIPT_SPEC, tmp_path / "out", progress=False)
    assert again.ran == 1 and "the source of __main__" in next(iter(again.recomputed.values()))


def test_a_task_without_a_source_file_is_never_reused(tmp_path, fake_main):
    # an interactive session or a notebook: no file to hash, so no stored run can be known to match the code
    assert not hasattr(fake_main, "__file__")
    assert run_sweep(SCRIPT_SPEC, tmp_path, progress=False).ran == 1
    again = run_sweep(SCRIPT_SPEC, tmp_path, progress=False)
    assert again.ran == 1
    assert "the source of __main__ cannot be read" in next(iter(again.recomputed.values()))


NAMESPACE_TASK = """
from attnlab.runner import Task, write_json

from nsfake import helpers


class Scale(Task):
    name = "ns-scale"

    def run(self, params, run_dir):
        write_json(run_dir / "record.json", {"value": params["x"] * helpers.FACTOR})
        return {}
"""


@pytest.fixture
def nsfake_helper(tmp_path, monkeypatch):
    """The namespace package nsfake (no __init__.py), in two portions: one holds the task, the other its helper;
    yields the helper's path (FACTOR = 2). Source hashes reset, and nsfake is forgotten after the test."""
    first, second = tmp_path / "one", tmp_path / "two"
    (first / "nsfake").mkdir(parents=True)
    (second / "nsfake").mkdir(parents=True)
    (first / "nsfake" / "tasks.py").write_text(NAMESPACE_TASK)
    helper = second / "nsfake" / "helpers.py"
    helper.write_text("FACTOR = 2\n")
    monkeypatch.syspath_prepend(str(first))
    monkeypatch.syspath_prepend(str(second))
    source_hash.cache_clear()
    yield helper
    for name in [m for m in sys.modules if m == "nsfake" or m.startswith("nsfake.")]:
        del sys.modules[name]
    source_hash.cache_clear()


NS_SPEC = SweepSpec(task="nsfake.tasks:Scale", base={"x": 1})


def test_a_task_of_a_namespace_package_is_recomputed_after_any_of_its_files_changes(tmp_path, nsfake_helper):
    assert run_sweep(NS_SPEC, tmp_path / "out", progress=False).ran == 1
    assert run_sweep(NS_SPEC, tmp_path / "out", progress=False).ran == 0
    nsfake_helper.write_text("FACTOR = 3\n")
    source_hash.cache_clear()  # a new process hashes the edited source
    again = run_sweep(NS_SPEC, tmp_path / "out", progress=False)
    assert again.ran == 1 and "the source of nsfake" in next(iter(again.recomputed.values()))


def test_runs_computed_after_a_task_package_was_edited_in_process_are_never_reused(tmp_path, nsfake_helper):
    # a notebook sweeps, edits its task's package and sweeps again in the same process: the hash taken before the
    # edit must not key runs that a worker computes with the edited code (a later process served them as current)
    assert run_sweep(NS_SPEC, tmp_path / "out", progress=False).ran == 1
    nsfake_helper.write_text("FACTOR = 30\n")  # edited, the process keeps going
    with pytest.warns(RuntimeWarning, match="nsfake's source changed since this process hashed it"):
        assert run_sweep(NS_SPEC, tmp_path / "out", progress=False).ran == 1  # not reused
    nsfake_helper.write_text("FACTOR = 2\n")
    source_hash.cache_clear()  # a new process, the code as it was at the first sweep
    again = run_sweep(NS_SPEC, tmp_path / "out", progress=False)
    assert again.ran == 1  # the run of the edit (keyed by no hash) is not served as this code's


class ReadsFile(Task):
    """Copies the text file its parameter ``path`` names into record.json, and names that file as its input."""

    name = "reads-file"

    def inputs(self, params):
        return [Path(params["path"])]

    def run(self, params, run_dir):
        write_json(run_dir / "record.json", {"text": Path(params["path"]).read_text()})
        return {}


register_task(ReadsFile())


def test_a_run_whose_input_file_changed_is_recomputed_and_one_whose_input_is_missing_fails(tmp_path):
    source, out = tmp_path / "input.txt", tmp_path / "out"
    source.write_text("old")
    spec = SweepSpec(task="reads-file", base={"path": str(source)})
    assert run_sweep(spec, out, progress=False).ran == 1
    assert run_sweep(spec, out, progress=False).ran == 0  # same contents: reused
    source.write_text("new")  # same path and size, other contents
    again = run_sweep(spec, out, progress=False)
    assert again.ran == 1
    assert next(iter(again.recomputed.values())).endswith(f"the contents of {source}")
    assert json.loads(next(out.glob("runs/*/record.json")).read_text())["text"] == "new"
    source.unlink()  # not reusable: computed again, and the task says what is missing
    assert run_sweep(spec, out, progress=False).ran == 1
    # read from disk: the index run_sweep returns keeps a row cached as "done" when the run was finished at the start
    assert "FileNotFoundError" in read_index(out)["error"].iloc[0]


def test_a_run_executed_without_the_sweeps_fingerprints_digests_its_input_files_itself(tmp_path):
    # the worker fallback (Reuse.code): a run handed over without a fingerprint takes it where it executes
    source = tmp_path / "input.txt"
    source.write_text("old")
    job = Job(task="reads-file", params={"path": str(source)})
    run_dir = tmp_path / "run"
    assert execute(ReadsFile(), job.key, job.params, run_dir).ran
    assert not execute(ReadsFile(), job.key, job.params, run_dir).ran
    source.write_text("new")
    outcome = execute(ReadsFile(), job.key, job.params, run_dir)
    assert outcome.ran and outcome.reason.endswith(f"the contents of {source}")


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"spec": "sweep.yaml"}, r"^spec == 'sweep.yaml' is a path; .*pass load_sweep\('sweep.yaml'\)"),
        ({"spec": [SPEC]}, r"^spec must be a SweepSpec or a list of Job, got list"),
        ({"spec": {"task": "toy-train"}}, r"^spec must be a SweepSpec or a list of Job, got dict"),
        ({"executor": "pool"}, r"^executor == 'pool' is a name; pass an executor: make_executor\('pool'\)"),
        ({"executor": 2}, r"^executor must be an InProcessExecutor, PoolExecutor or RayExecutor, got int"),
        ({"out": None}, r"^out must be the path of the output folder"),
    ],
    ids=["spec-path", "spec-list-of-specs", "spec-mapping", "executor-name", "executor-int", "out-none"],
)
def test_arguments_of_the_wrong_type_are_refused_before_the_store_is_touched(tmp_path, arguments, match):
    # were AttributeErrors and TypeErrors, the executor's after job.json and index.parquet were written
    arguments = {"spec": SPEC, "out": tmp_path / "out", **arguments}
    with pytest.raises(ValidationError, match=match):
        run_sweep(arguments.pop("spec"), arguments.pop("out"), progress=False, **arguments)
    assert not (tmp_path / "out").exists()
