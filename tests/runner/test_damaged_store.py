"""A damaged store is seen, reported and repaired: the manifest of each finished run lists its files' sizes and
digests, so a truncated table, a deleted array or a garbage record is never served as a result."""

import json
import threading
import time
from pathlib import Path

import pytest
from sweep_fixtures import ToyTrain

from attnlab.runner import IncompleteSweepWarning, SweepSpec, read_index, read_sweep, register_task, run_sweep
from attnlab.runner.claim import claim
from attnlab.runner.manifest import damage, read_manifest
from attnlab.runner.spec import expand

register_task(ToyTrain())
SPEC = SweepSpec(task="toy-train", base={"d": 3, "steps": 5, "lr": 0.1}, grid={"seed": [0, 1, 2]})


def _run_dirs(root):
    return [root / "runs" / f"toy-train-{job.key}" for job in expand(SPEC)]


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage_of_the_same_size(path):
    path.write_bytes(b"x" * path.stat().st_size)


@pytest.mark.parametrize(
    ("damage", "file", "says"),
    [
        (_truncate, "trajectory.parquet", "trajectory.parquet has"),
        (lambda p: p.unlink(), "W.npy", "W.npy is missing"),
        (_garbage_of_the_same_size, "record.json", "record.json changed after the run (its SHA-256 differs)"),
        (lambda p: p.write_text("garbage"), "record.json", "record.json has 7 bytes"),
    ],
    ids=["truncated-table", "deleted-array", "same-size-garbage", "garbage-record"],
)
def test_a_damaged_run_is_recomputed_and_reported(tmp_path, damage, file, says):
    run_sweep(SPEC, tmp_path, progress=False)
    target = _run_dirs(tmp_path)[1]
    intact = (target / file).read_bytes() if (target / file).is_file() else None
    damage(target / file)
    again = run_sweep(SPEC, tmp_path, progress=False)
    assert again.ran == 1
    (reason,) = again.recomputed.values()
    assert reason.startswith("the stored run was damaged: ") and says in reason
    assert (target / file).read_bytes() == intact  # recomputed: the same deterministic file again
    assert read_manifest(target)["reason"] == reason  # the run says why it was computed
    assert list(read_index(tmp_path)["status"]) == ["done"] * 3


def test_read_sweep_lists_damaged_and_missing_runs_instead_of_dropping_them(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    first, second, third = _run_dirs(tmp_path)
    (second / "W.npy").unlink()
    _garbage_of_the_same_size(third / "trajectory.parquet")  # only the digest shows it
    with pytest.warns(IncompleteSweepWarning, match=r"read 1 of 3 runs .* leaving out 2 damaged: ") as caught:
        frame = read_sweep(tmp_path)
    message = str(caught[0].message)
    assert f"{second.name} (damaged: W.npy is missing)" in message
    assert f"{third.name} (damaged: trajectory.parquet changed after the run" in message
    assert set(frame["run_key"]) == {first.name.rsplit("-", 1)[1]}
    assert sorted(row["run_dir"] for row in frame.attrs["left_out"]) == sorted(
        f"runs/{d.name}" for d in (second, third)
    )


def test_a_corrupt_job_json_of_a_finished_run_breaks_no_later_sweep(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    target = _run_dirs(tmp_path)[0]
    (target / "job.json").write_text("{not json")
    row = read_index(tmp_path).set_index("run_dir").loc[f"runs/{target.name}"]
    assert row["status"] == "damaged" and "job.json is missing or unreadable" in row["error"]  # listed, not dropped
    again = run_sweep(SPEC, tmp_path, progress=False)  # was: KeyError
    assert again.ran == 0 and list(again.index["status"]) == ["done"] * 3  # the run's outputs were intact: reused
    assert json.loads((target / "job.json").read_text())["key"] == target.name.rsplit("-", 1)[1]


def _fresh(run_dir):
    manifest = read_manifest(run_dir)
    return manifest is not None and manifest["reason"].startswith("--fresh")


def test_fresh_never_wipes_a_run_another_process_holds(tmp_path):
    run_sweep(SPEC, tmp_path, progress=False)
    held = _run_dirs(tmp_path)[0]
    before = (held / "manifest.json").read_text()
    done = threading.Event()
    with claim(held) as mine:  # as another sweep computing it (flock: a second claim in this process is refused)
        assert mine
        sweep = threading.Thread(target=lambda: (run_sweep(SPEC, tmp_path, progress=False, fresh=True), done.set()))
        sweep.start()
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and sum(
                (d / "manifest.json").is_file() and (d / "manifest.json").read_text() != m
                for d, m in zip(_run_dirs(tmp_path)[1:], ["", ""])
            )
            < 2
        ):
            time.sleep(0.05)
        assert not done.is_set()  # the fresh sweep waits for the held run
        assert (held / "manifest.json").read_text() == before  # untouched while held
        assert (held / "trajectory.parquet").is_file()
    sweep.join(60)
    assert done.is_set()
    assert read_manifest(held)["reason"].startswith("--fresh: the run of ")  # computed again once released


@pytest.mark.parametrize("deep", [True, False], ids=["digests", "sizes"])
def test_a_file_deleted_while_it_is_checked_is_missing_not_an_error(tmp_path, monkeypatch, deep):
    # a rerun of the run by another sweep empties its directory while this process checks it: the first look at
    # W.npy finds it, every later one does not (was: FileNotFoundError out of damage and of every index scan)
    run_sweep(SPEC, tmp_path, progress=False)
    target = _run_dirs(tmp_path)[0]
    victim, real_stat, seen = target / "W.npy", Path.stat, []

    def stat_then_delete(path, *args, **kwargs):
        result = real_stat(path, *args, **kwargs)
        if path == victim and not seen:
            seen.append(path)
            path.unlink()
        return result

    manifest = read_manifest(target)
    monkeypatch.setattr(Path, "stat", stat_then_delete)
    found = damage(target, manifest, deep=deep)
    assert found == ("W.npy is missing" if deep else None) and seen  # sizes only: it was there when looked at
    assert damage(target, manifest, deep=deep) == "W.npy is missing"
