"""tools/install_torch.py: the CPU wheel index when it answers, the pinned torch otherwise; the dry run prints
the plan and installs nothing."""

import functools
import http.server
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "install_torch.py"


def _dry_run(index: str) -> tuple[str, float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--index", index, "--timeout", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, time.monotonic() - start


@pytest.fixture
def index_server(tmp_path):
    """A local HTTP server standing in for PyTorch's CPU index: a page for the project torch."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text('<a href="torch-2.13.0+cpu-cp311-linux_x86_64.whl">torch</a>')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_a_reachable_index_installs_the_cpu_build_from_it(index_server):
    out, _ = _dry_run(index_server)
    assert f"torch: installing the CPU build from {index_server}" in out
    assert f"--index-url {index_server} torch==2.13.0" in out


def test_an_unreachable_index_falls_back_to_the_pin_at_once():
    with socket.socket() as sock:  # a port nothing listens on: refused at once, as on a machine without a network
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    out, seconds = _dry_run(f"http://127.0.0.1:{port}/whl/cpu")
    assert "torch: installing the pinned torch==2.13.0 from the default index" in out
    assert "--index-url" not in out and out.rstrip().endswith("--no-compile torch==2.13.0")
    assert seconds < 20  # a bound for a hang (the probe waits at most 3 s), not a timing claim


def test_an_index_without_torch_falls_back_to_the_pin(index_server):
    out, _ = _dry_run(index_server + "missing/")  # answers, but 404 for torch/
    assert "torch: installing the pinned torch==2.13.0" in out
