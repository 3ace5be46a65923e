"""`attnlab sweep`: runs a YAML sweep, says how to install Ray, and a killed sweep restarted finishes cleanly."""

import builtins
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from attnlab.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "runner"  # sweep_fixtures.py: stand-in tasks


def test_sweep_runs_a_yaml_grid_and_skips_it_the_second_time(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "task: batched-train\nbase: {n: 4, T: 3, d: 6, steps: 5}\ngrid:\n  lr: [0.1, 0.2]\n  data_seed: [0, 1]\n"
    )
    out = tmp_path / "out"
    first = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(out), "--no-progress"])
    assert first.exit_code == 0, first.output
    assert "4 runs: 4 done (0 were already), 0 failed" in first.output
    again = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(out), "--no-progress"])
    assert "4 runs: 4 done (4 were already)" in again.output


def test_bad_sweep_is_a_one_line_error(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\nbase: {lr: -1.0}\n")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "error: lr == -1.0, must be > 0" in result.output


def test_executor_ray_without_ray_says_how_to_install(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\n")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--executor", "ray", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "pip install -e '.[ray]' in your attnlab clone" in result.output


def start_sweep(sweep: Path, out: Path) -> subprocess.Popen:
    path = os.pathsep.join(filter(None, [str(FIXTURES), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    code = "import sys; from attnlab.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "sweep", str(sweep), "--out", str(out), "--no-progress"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_killed_sweep_restarted_completes_without_recomputing_or_corrupt_files(tmp_path):
    log = tmp_path / "starts.log"
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "task: sweep_fixtures:SlowTrain\n"
        f"base: {{n: 4, T: 3, d: 6, steps: 5, sleep: 0.4, log: '{log}'}}\n"
        "grid:\n  data_seed: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"
    )
    out = tmp_path / "out"
    proc = start_sweep(sweep, out)
    deadline = time.monotonic() + 120  # generous: interpreter start-up on a loaded 2-core machine
    while len(list(out.glob("runs/*/manifest.json"))) < 3:
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "sweep made no progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # a crash: no cleanup code runs
    proc.wait()
    finished = {p.parent.name for p in out.glob("runs/*/manifest.json")}
    assert 3 <= len(finished) < 10

    proc = start_sweep(sweep, out)
    output = proc.communicate(timeout=300)[0].decode()
    assert proc.returncode == 0, output
    assert f"10 runs: 10 done ({len(finished)} were already)" in output

    starts = log.read_text().split()
    for name in finished:
        assert starts.count(name) == 1, f"{name} finished before the kill but ran again"
    index = pd.read_parquet(out / "index.parquet")
    assert list(index["status"]) == ["done"] * 10 and index["key"].is_unique
    for run_dir in out.glob("runs/*"):
        names = sorted(p.name for p in run_dir.iterdir())
        # no temp files: the run's outputs and the runner's bookkeeping (claim, job, outcome, manifest)
        assert names == [
            ".lock",
            "W.npy",
            "job.json",
            "manifest.json",
            "outcome.json",
            "record.json",
            "trajectory.parquet",
        ]
        json.loads((run_dir / "record.json").read_text())
        assert len(pd.read_parquet(run_dir / "trajectory.parquet")) == 2


def test_an_impossible_out_is_one_line(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\nbase: {n: 4, T: 3, d: 6, steps: 5}\n")
    (tmp_path / "blocker").write_text("")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "blocker" / "o"), "--no-progress"])
    assert result.exit_code == 1 and "Traceback" not in result.output  # the file system refused: status 1
    assert "a file is in the way" in result.output


def test_the_summary_counts_diverged_runs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))
    sweep = tmp_path / "s.yaml"
    sweep.write_text(
        "task: sweep_fixtures:Diverges\nbase: {d: 3, steps: 5, lr: 0.1, seed: 0}\ngrid:\n  diverge: [true, false]\n"
    )
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 runs: 1 done (0 were already), 0 failed, 1 diverged" in result.output


def test_a_seed_with_repeats_that_is_not_a_whole_number_is_a_one_line_error(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\nbase: {steps: 5, seed: 2.9, alignment: []}\nrepeats: 2\n")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "error: seed must be a int, got 2.9 of type float; with repeats" in result.output
    assert not (tmp_path / "o").exists()  # refused before the store is touched


def test_an_unreadable_head_file_is_a_one_line_error(tmp_path):
    # numpy.load's ValueError escaped as a traceback with exit status 1
    import numpy as np

    from attnlab.data import example1

    data = example1(n=4, T=3, d=6, seed=0)
    np.savez(tmp_path / "mine.npz", X=data.X.numpy(), y=data.y.numpy())
    (tmp_path / "head.npy").write_text("not an array")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"task: batched-train\nbase: {{data: {tmp_path / 'mine.npz'}, v: {tmp_path / 'head.npy'}}}\n")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"error: v '{tmp_path / 'head.npy'}' is not a .npy array" in result.output


def test_an_option_of_another_executor_is_refused(tmp_path):
    # --workers and --address did nothing with the inprocess executor, --batch-size nothing with pool or ray
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\nbase: {n: 4, T: 3, d: 6, steps: 5}\n")
    for args, says in (
        (["--workers", "7"], "workers == 7 (--workers) applies to the 'pool' executor only"),
        (["--address", "1.2.3.4:10001"], "address == '1.2.3.4:10001' (--address) applies to the 'ray' executor"),
        (["--executor", "pool", "--batch-size", "8"], "batch_size == 8 (--batch-size) applies to the 'inprocess'"),
    ):
        result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o"), *args])
        assert result.exit_code == 2 and f"error: {says}" in result.output, (args, result.output)
    assert not (tmp_path / "o").exists()  # refused before anything ran


def test_reproduce_refuses_an_option_of_another_executor(tmp_path):
    result = CliRunner().invoke(main, ["reproduce", "--paper", "ntk", "--workers", "3", "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "error: workers == 3 (--workers) applies to the 'pool' executor" in result.output
    assert not (tmp_path / "r").exists()
