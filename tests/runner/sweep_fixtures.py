"""Stand-in sweep tasks for the runner tests: small, deterministic, batched over a runs axis.

``ToyTrain`` runs R independent gradient-descent problems as one tensor program (the shape of a real batched
training task), so the tests can compare a batch of R runs with R runs of one. ``SlowToy`` logs each start
and sleeps, for the kill-and-restart test; ``KillOnce`` kills its own worker the first time it runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from attnlab._validation import check_scalar
from attnlab.data import example1
from attnlab.runner import SweepSpec, Task, run_sweep, write_json, write_parquet
from attnlab.tasks import BatchedTrain
from attnlab.training.batched import train


def toy_problem(seed: int, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random SPD matrix A (d, d) with eigenvalues in [0.5, 1.5] and a target B (d, d), from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    eig = 0.5 + torch.rand(d, generator=gen, dtype=torch.float64)
    return Q @ torch.diag(eig) @ Q.T, torch.randn(d, d, generator=gen, dtype=torch.float64)


class ToyTrain(Task):
    """Gradient descent on 0.5 <W, A W> - <B, W>, R runs at once; params d, steps, lr, seed."""

    name = "toy-train"

    def check(self, params):
        check_scalar("lr", params["lr"], low=0, low_inclusive=False)

    def batch_key(self, params):
        return (params["d"], params["steps"])

    def run(self, params, run_dir):
        return self.run_batch([params], [run_dir])[0]

    def run_batch(self, params, run_dirs):
        d, steps = params[0]["d"], params[0]["steps"]
        problems = [toy_problem(p["seed"], d) for p in params]
        A = torch.stack([a for a, _ in problems])  # (R, d, d)
        B = torch.stack([b for _, b in problems])  # (R, d, d)
        lr = torch.tensor([p["lr"] for p in params], dtype=torch.float64)[:, None, None]  # (R, 1, 1)
        W = torch.zeros_like(B)
        losses = []
        for _ in range(steps):
            W = W - lr * (A @ W - B)
            losses.append(0.5 * (W * (A @ W)).sum((1, 2)) - (B * W).sum((1, 2)))  # (R,)
        losses = torch.stack(losses, 1)  # (R, steps)
        out = []
        for r, (p, run_dir) in enumerate(zip(params, run_dirs)):
            frame = pd.DataFrame({"step": np.arange(1, steps + 1), "loss": losses[r].numpy()})
            write_parquet(run_dir / "trajectory.parquet", frame)
            np.save(run_dir / "W.npy", W[r].numpy())
            write_json(run_dir / "record.json", {"params": p, "final_loss": float(losses[r, -1])})
            out.append({"final_loss": float(losses[r, -1])})
        return out


class ThreadCounts(ToyTrain):
    """ToyTrain one run at a time that also writes the thread counts its process runs with (``threads.json``):
    torch's and every BLAS/OpenMP pool's that threadpoolctl sees (numpy's and scipy's OpenBLAS among them)."""

    name = "thread-counts"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        from threadpoolctl import threadpool_info

        pools = {f"{p['internal_api']} {p['filepath']}": p["num_threads"] for p in threadpool_info()}
        write_json(run_dir / "threads.json", {"torch": torch.get_num_threads(), "pools": pools})
        return super().run_batch([params], [run_dir])[0]


class Warning1(UserWarning):
    """A warning class the caller can import by name (so a relay keeps it)."""


class Warns(ToyTrain):
    """ToyTrain one run at a time that warns twice: with :class:`Warning1`, and with a class made inside ``run``
    (which no other process can unpickle)."""

    name = "warns"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        import warnings

        warnings.warn(f"importable category, seed {params['seed']}", Warning1, stacklevel=1)
        warnings.warn(f"local category, seed {params['seed']}", type("Local", (UserWarning,), {}), stacklevel=1)
        return super().run_batch([params], [run_dir])[0]


class SlowToy(ToyTrain):
    """ToyTrain one run at a time, logging each start to ``<log>`` and sleeping ``sleep`` seconds first."""

    name = "slow-toy"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        with open(params["log"], "a") as log:
            log.write(f"{run_dir.name}\n")
        time.sleep(params["sleep"])
        return super().run_batch([params], [run_dir])[0]


class KillOnce(ToyTrain):
    """ToyTrain one run at a time; the run with ``kill: true`` SIGKILLs its worker the first time it runs."""

    name = "kill-once"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        marker = Path(params["marker"])
        if params.get("kill") and not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run_batch([params], [run_dir])[0]


class Explodes(ToyTrain):
    """ToyTrain that raises for params with ``explode: true``."""

    name = "explodes"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        if params.get("explode"):
            raise RuntimeError("boom")
        return super().run_batch([params], [run_dir])[0]


class SlowTrain(BatchedTrain):
    """The real batched-train task one run at a time, logging each start to ``log`` and sleeping ``sleep`` s first."""

    name = "slow-train"

    def check(self, params):
        super().check({k: v for k, v in params.items() if k not in ("log", "sleep")})

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        with open(params["log"], "a") as log:
            log.write(f"{run_dir.name}\n")
        time.sleep(params["sleep"])
        return super().run({k: v for k, v in params.items() if k not in ("log", "sleep")}, run_dir)


class Recorded(ToyTrain):
    """ToyTrain one run at a time, appending ``start <run> <pid>`` and ``end <run> <pid>`` to ``log`` around a
    ``sleep``-second pause: the log tells which runs started, which finished, and in which processes."""

    name = "recorded"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        with open(params["log"], "a") as log:
            log.write(f"start {run_dir.name} {os.getpid()}\n")
        time.sleep(params["sleep"])
        summary = super().run_batch([params], [run_dir])[0]
        with open(params["log"], "a") as log:
            log.write(f"end {run_dir.name} {os.getpid()}\n")
        return summary


def log_lines(log: Path, kind: str) -> list[str]:
    """Run names of the ``kind`` ("start" or "end") lines of a :class:`Recorded` log."""
    if not log.exists():
        return []
    return [line.split()[1] for line in log.read_text().splitlines() if line.startswith(kind + " ")]


def log_pids(log: Path) -> set[int]:
    """Process ids that ran a job of a :class:`Recorded` log."""
    return {int(line.split()[2]) for line in log.read_text().splitlines()} if log.exists() else set()


class Diverges(ToyTrain):
    """ToyTrain whose runs with ``diverge: true`` return ``status: "diverged"`` in their summary, as the
    batched-train task does for a run that stopped alone (its files written, its last finite state kept)."""

    name = "diverges"

    def run_batch(self, params, run_dirs):
        summaries = super().run_batch(params, run_dirs)
        return [{**s, "status": "diverged"} if p.get("diverge") else s for p, s in zip(params, summaries)]


class NoRecord(ToyTrain):
    """A broken task: returns a summary without writing ``record.json``."""

    name = "no-record"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        return {"final_loss": 0.0}


def sweep_process(out: Path, executor: str = "inprocess", **spec) -> subprocess.Popen:
    """``run_sweep(SweepSpec(**spec), out)`` in a child process of its own session (so a test can signal its
    whole process group, as Ctrl-C in a terminal does); stdout and stderr go to the pipe ``stdout``."""
    code = (
        "import json, sys; from attnlab.runner import SweepSpec, make_executor, run_sweep; "
        "name = sys.argv[3]; executor = make_executor(name, workers=2) if name == 'pool' else make_executor(name); "
        "run_sweep(SweepSpec(**json.loads(sys.argv[1])), sys.argv[2], executor, progress=False)"
    )
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(spec), str(out), executor],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def wait_until(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None) -> None:
    """Poll ``predicate`` every 20 ms; fail naming ``what`` after ``timeout`` s (or if ``proc`` exits first)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process exited before {what}: {proc.stdout.read().decode()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan's zombie may wait for a lazy init)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def assert_one_diverging_run_stops_alone(tmp_path: Path, executor) -> None:
    """A batched-train sweep whose middle run diverges at its first step: that run is finished and marked
    ``diverged`` with a finite last iterate, and the other runs of its batch end as if trained alone."""
    # lr = 1.7e308 overflows W at the first step; in one batch with two healthy runs it must not take them down
    spec = SweepSpec(
        task="batched-train",
        base={"n": 4, "T": 3, "d": 8, "steps": 20, "optimizer": "gd"},
        grid={"lr": [0.1, 1.7e308, 0.2]},
    )
    result = run_sweep(spec, tmp_path, executor, progress=False)
    assert list(result.index["status"]) == ["done", "diverged", "done"]  # a diverged run is finished, marked
    records = {}
    for run_dir in result.index["run_dir"]:
        record = json.loads((tmp_path / run_dir / "record.json").read_text())
        records[record["resolved"]["lr"]] = (record["final"], np.load(tmp_path / run_dir / "W.npy"))
    assert sorted(records) == [0.1, 0.2, 1.7e308]
    (diverged, W_bad), (healthy, W_ok) = records[1.7e308], records[0.1]
    assert diverged["status"] == "diverged" and diverged["last_step"] == 0 and np.isfinite(W_bad).all()
    assert healthy["status"] == records[0.2][0]["status"] == "completed"
    data = example1(n=4, T=3, d=8, seed=0)
    alone = train(data.X, data.Z, data.y, data.v, torch.zeros(8, 8), optimizer="gd", lr=0.1, steps=20).W[0]
    np.testing.assert_allclose(W_ok, alone.numpy(), rtol=0, atol=1e-12)  # the healthy run is untouched by it


class KillAlways(ToyTrain):
    """ToyTrain one run at a time; the run with ``kill: true`` SIGKILLs its worker every time it runs."""

    name = "kill-always"

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        if params.get("kill"):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run_batch([params], [run_dir])[0]


class FailsWhenTold(ToyTrain):
    """ToyTrain one run at a time that raises while its class attribute ``fail`` is true (a code change)."""

    name = "fails-when-told"
    fail = False

    def batch_key(self, params):
        return None

    def run(self, params, run_dir):
        if FailsWhenTold.fail:
            raise RuntimeError("the new code raises")
        return super().run_batch([params], [run_dir])[0]
