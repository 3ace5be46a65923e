"""Install the CPU build of torch into the running Python: from PyTorch's CPU wheel index when it answers, else
the pinned version from the default index (where this machine's CI keeps a local CPU wheel).

Run by ``make`` with the venv's python: ``.venv/bin/python tools/install_torch.py``. Without the CPU index, pip
would take torch from PyPI, whose Linux wheel is the multi-GB CUDA build. The index is probed with a timeout of a
few seconds, so a machine that cannot reach it (an offline CI) falls back at once.

    python tools/install_torch.py              # install, then print which build is installed
    python tools/install_torch.py --dry-run    # print the plan (probe result and pip command), install nothing
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import urllib.error
import urllib.request
import warnings

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PIN = "torch==2.13.0"
PROBE_SECONDS = 3.0


def reachable(url: str, timeout: float = PROBE_SECONDS) -> bool:
    """Whether ``url`` answers an HTTP request within ``timeout`` seconds (any status below 400)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout) as answer:
            return answer.status < 400
    except (urllib.error.URLError, OSError, ValueError):
        return False


def plan(index: str, timeout: float) -> tuple[str, list[str]]:
    """Which build to install and the pip command that installs it."""
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile"]
    if reachable(index.rstrip("/") + "/torch/", timeout):
        return f"CPU build from {index}", [*pip, "--index-url", index, PIN]
    return f"pinned {PIN} from the default index ({index} did not answer; probed for at most {timeout:g} s)", [
        *pip,
        PIN,
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the plan, install nothing")
    parser.add_argument("--index", default=CPU_INDEX, help=f"CPU wheel index (default {CPU_INDEX})")
    parser.add_argument("--timeout", type=float, default=PROBE_SECONDS, help="seconds to wait for the index")
    args = parser.parse_args(argv)
    what, command = plan(args.index, args.timeout)
    print(f"torch: installing the {what}")
    print("torch: " + " ".join(command))
    if args.dry_run:
        return 0
    done = subprocess.run(command)
    if done.returncode != 0:
        return done.returncode
    with warnings.catch_warnings():  # numpy is not installed yet, and torch warns about it on import
        warnings.simplefilter("ignore")
        import torch

    build = "CUDA " + torch.version.cuda if torch.version.cuda else "CPU"
    print(f"torch: installed torch {torch.__version__} ({build} build)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
