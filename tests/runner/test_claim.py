"""Claims on run directories: exclusive while held, released when the holder exits or is killed."""

import os
import signal
import subprocess
import sys
import threading
import time

from sweep_fixtures import wait_until

from attnlab.runner.claim import LOCK, claim, is_claimed, locked, wait_for_claim


def test_a_claim_is_exclusive_until_released(tmp_path):
    with claim(tmp_path / "run") as first:
        with claim(tmp_path / "run") as second:
            assert (first, second) == (True, False)
        assert is_claimed(tmp_path / "run")
    assert not is_claimed(tmp_path / "run")
    with claim(tmp_path / "run") as again:
        assert again


def test_is_claimed_never_creates_the_lock_file(tmp_path):
    assert not is_claimed(tmp_path)
    assert not (tmp_path / LOCK).exists()
    wait_for_claim(tmp_path)  # nothing to wait for


def test_a_killed_holder_releases_its_claim(tmp_path):
    code = "import sys, time; from attnlab.runner.claim import claim\nwith claim(sys.argv[1]):\n    time.sleep(600)\n"
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)])
    try:
        # 60 s: an interpreter starting on a loaded machine; a hang guard, not a timing claim
        wait_until(lambda: is_claimed(tmp_path), 60, "the child's claim", holder)
        waiter = threading.Thread(target=wait_for_claim, args=(tmp_path,), daemon=True)
        waiter.start()
        time.sleep(0.2)
        assert waiter.is_alive()  # still held: the waiter waits
        os.kill(holder.pid, signal.SIGKILL)  # no cleanup code runs: the kernel drops the lock
        holder.wait()
        waiter.join(30)
        assert not waiter.is_alive() and not is_claimed(tmp_path)
    finally:
        holder.kill()


def test_locked_serialises_its_holders(tmp_path):
    order = []

    def second():
        with locked(tmp_path / "index.lock"):
            order.append("second")

    with locked(tmp_path / "index.lock"):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.2)
        order.append("first")
    thread.join(30)
    assert order == ["first", "second"]
