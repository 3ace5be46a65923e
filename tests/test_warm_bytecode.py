"""tools/warm_bytecode.py writes the bytecode of what a run imports, even where writing bytecode is turned off."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "warm_bytecode.py"


def test_bytecode_is_written_for_attnlab_and_its_lazy_libraries_despite_pythondontwritebytecode(tmp_path):
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(tmp_path)}
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("bytecode written for ")
    written = {p.name.split(".")[0] + "@" + p.parent.name for p in tmp_path.rglob("*.pyc")}
    # attnlab's own modules (every one of them, the experiments included) and the lazily imported libraries
    assert {"main@cli", "catalog@experiments", "html@report"} <= written
    assert {"__init__@cvxpy", "pyplot@matplotlib"} <= written
    # the variable still holds for everyone else: a plain import in the same environment writes nothing new
    before = set(tmp_path.rglob("*.pyc"))
    subprocess.run([sys.executable, "-c", "import json.tool"], env=env, check=True, timeout=60)
    assert set(tmp_path.rglob("*.pyc")) == before
