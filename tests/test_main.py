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


def test_a_reader_that_closes_the_pipe_is_not_an_error():
    """``attnlab list | head -1`` printed "error: [Errno 32] Broken pipe" and exited 1."""
    shell = f"{sys.executable} -m attnlab list | head -1; exit ${{PIPESTATUS[0]}}"
    result = subprocess.run(["bash", "-c", shell], capture_output=True, text=True)
    assert result.returncode == 0 and "error" not in result.stderr and len(result.stdout.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "kq-nuclear.x1", "--quick", "--set", "seed=99999999999999999999"], "seed == 99999999999999999999"),
        (["run", "kq-nuclear.x1", "--quick", "--set", "omegas=nan,1"], "positive, finite scales"),
        (["data", "make", "example1", "--out", "x.npz", "--seed", "99999999999999999999"], "must be <= 92233720"),
    ],
)
def test_seeds_past_the_generators_range_and_nan_settings_are_refused_by_name(args, message, tmp_path):
    """A seed above 2**64 - 1 ended in torch's "Overflow when unpacking long long" traceback; NaN scales passed."""
    result = subprocess.run([sys.executable, "-m", "attnlab", *args], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr and message in result.stderr
