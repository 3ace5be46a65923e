"""``python -m attnlab`` is the ``attnlab`` command, and its help and list load none of the numerical stack."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "cvxpy", "pandas", "matplotlib")


def _attnlab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True, text=True)


def test_python_m_attnlab_runs_the_command_line():
    result = _attnlab("--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: attnlab")
    for command in ("list", "run", "reproduce", "sweep", "data", "svm", "explain"):
        assert f"  {command}" in result.stdout


def test_python_m_attnlab_passes_the_exit_status_on():
    assert _attnlab("run", "no-such-experiment").returncode == 2


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["list"], ["list", "--paper", "ntk"]])
def test_help_version_and_list_load_no_heavy_library(args):
    probe = (
        "import sys\nfrom attnlab.cli import main\n"
        f"try:\n    main({args!r}, prog_name='attnlab')\n"
        "except SystemExit as stop:\n    assert stop.code == 0, stop.code\n"
        f"print('LOADED', [m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "LOADED []"
