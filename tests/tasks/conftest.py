"""The sweep tasks run through the runner: its stand-in tasks and helpers (tests/runner/sweep_fixtures.py) serve
here too."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
