"""The Ray executor on a real local Ray cluster (loopback only): same results as in-process, killed workers retried."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import sweep_fixtures
from sweep_fixtures import Diverges, KillOnce, ToyTrain, assert_one_diverging_run_stops_alone

from attnlab._validation import ValidationError
from attnlab.runner import register_task
from attnlab.runner.executors import InProcessExecutor, PoolExecutor, RayExecutor
from attnlab.runner.results import read_index
from attnlab.runner.spec import SweepSpec, expand
from attnlab.runner.sweep import run_sweep

ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")

register_task(ToyTrain())
register_task(KillOnce())
register_task(Diverges())


def closed_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("address", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}"])
def test_an_unreachable_address_is_a_clear_error_not_a_ten_minute_hang(address, tmp_path):
    # Runs before the module's cluster starts: RayExecutor probes only when it calls ray.init itself.
    assert not ray.is_initialized()
    address = address.format(port=closed_port())
    spec = SweepSpec(task="toy-train", base={"d": 3, "steps": 5, "lr": 0.1}, grid={"seed": [0]})
    with pytest.raises(ValidationError, match=rf"cannot reach a Ray cluster at '{address}' \(.*\); check the address"):
        run_sweep(spec, tmp_path, RayExecutor(address, connect_timeout=2.0), progress=False)
    assert not ray.is_initialized()


def test_an_address_that_accepts_tcp_but_is_no_ray_cluster_fails_in_bounded_time(tmp_path):
    # In a child process: the abandoned connection attempt must not share this process with the module's cluster.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)  # accepts connections (the kernel completes the handshake), never answers
        address = f"127.0.0.1:{server.getsockname()[1]}"
        code = (
            "import sys; import attnlab.tasks; from attnlab.runner import RayExecutor, SweepSpec, run_sweep\n"
            "from attnlab._validation import ValidationError\n"
            "spec = SweepSpec(task='batched-train', base={'n': 4, 'T': 3, 'd': 4, 'steps': 1})\n"
            "try:\n"
            f"    run_sweep(spec, sys.argv[1], RayExecutor({address!r}, connect_timeout=2), progress=False)\n"
            "except ValidationError as err:\n"
            "    print(err); sys.exit(2)\n"
        )
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        # 120 s: a hang guard (Ray alone would retry for minutes), not a timing claim
        command = [sys.executable, "-c", code, str(tmp_path)]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"the Ray cluster at '{address}' accepted a connection but did not answer within 2 s" in done.stdout


def test_a_malformed_address_says_the_form_to_use(tmp_path):
    spec = SweepSpec(task="toy-train", base={"d": 3, "steps": 5, "lr": 0.1}, grid={"seed": [0]})
    with pytest.raises(ValidationError, match="--address must be host:port, ray://host:port or auto, got 'nowhere'"):
        run_sweep(spec, tmp_path, RayExecutor("nowhere"), progress=False)


@pytest.fixture(scope="module")
def local_cluster():
    """A Ray cluster of this machine, bound to 127.0.0.1, started and stopped by this test module."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Workers import the stand-in tasks by value: tests/runner is not installed.
    ray.cloudpickle.register_pickle_by_value(sweep_fixtures)
    ray.init(
        num_cpus=2,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def final_weights(root):
    index = read_index(root)
    assert list(index["status"]) == ["done"] * len(index)
    return {k: np.load(root / d / "W.npy") for k, d in zip(index["key"], index["run_dir"])}


def assert_same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        # 1e-12: identical float64 programs; only batched-matmul blocking may change the last bits
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-12)


def test_ray_sweep_equals_the_in_process_batched_sweep(local_cluster, tmp_path):
    spec = SweepSpec(
        task="batched-train", base={"n": 4, "T": 3, "d": 8, "steps": 20}, grid={"lr": [0.1, 0.3]}, repeats=8
    )
    run_sweep(spec, tmp_path / "ray", RayExecutor(), progress=False)
    run_sweep(spec, tmp_path / "batched", InProcessExecutor(), progress=False)
    assert_same(final_weights(tmp_path / "ray"), final_weights(tmp_path / "batched"))


@pytest.mark.slow
def test_256_runs_agree_batched_in_a_pool_and_on_ray(local_cluster, tmp_path):
    spec = SweepSpec(
        task="batched-train",
        base={"n": 8, "T": 6, "d": 64, "steps": 100, "init_scale": 0.01},
        grid={"lr": [0.05, 0.1, 0.2, 0.4]},
        repeats=64,
    )
    assert len(expand(spec)) == 256
    run_sweep(spec, tmp_path / "batched", InProcessExecutor(), progress=False)
    run_sweep(spec, tmp_path / "pool", PoolExecutor(workers=2), progress=False)
    run_sweep(spec, tmp_path / "ray", RayExecutor(), progress=False)
    batched = final_weights(tmp_path / "batched")
    assert_same(final_weights(tmp_path / "pool"), batched)
    assert_same(final_weights(tmp_path / "ray"), batched)


def test_a_worker_killed_mid_task_is_retried_without_loss_or_duplicates(local_cluster, tmp_path):
    marker = tmp_path / "killed-once"
    spec = SweepSpec(
        task="kill-once",
        base={"d": 3, "steps": 5, "lr": 0.1, "marker": str(marker)},
        grid={"seed": list(range(6))},
        points=[{"kill": False}, {"kill": True, "lr": 0.2}],
    )
    result = run_sweep(spec, tmp_path / "out", RayExecutor(retries=2), progress=False)
    assert marker.exists()  # the kill happened
    index = result.index
    assert len(index) == 12 and index["key"].is_unique
    assert list(index["status"]) == ["done"] * 12
    runs = sorted(p.name for p in (tmp_path / "out" / "runs").iterdir())
    assert runs == sorted(index["run_dir"].str.removeprefix("runs/"))  # one directory per run, no extras


def test_a_diverging_batched_train_run_stops_alone_on_ray(local_cluster, tmp_path):
    assert_one_diverging_run_stops_alone(tmp_path, RayExecutor())  # in-process and pool: test_batched_train.py


def test_a_diverged_run_is_finished_and_recorded_on_ray(local_cluster, tmp_path):
    spec = SweepSpec(task="diverges", base={"d": 3, "steps": 5, "lr": 0.1, "seed": 0}, grid={"diverge": [True, False]})
    result = run_sweep(spec, tmp_path, RayExecutor(), progress=False)
    assert list(result.index["status"]) == ["diverged", "done"] and result.failed.empty
    again = run_sweep(spec, tmp_path, RayExecutor(), progress=False)
    assert again.ran == 0 and list(read_index(tmp_path)["status"]) == ["diverged", "done"]
