"""docs/tutorial/verify-your-own.md: its blocks build, run, falsify and replay an experiment of one's own."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab._validation import ValidationError
from attnlab.experiments.registry import REGISTRY
from attnlab.verify.replay import find_experiment

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "tutorial" / "verify-your-own.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE, re.S)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "my_experiments.py").write_text(BLOCKS[0])
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_experiments", None)


def _run(*blocks: str) -> dict:
    """Run ``blocks`` one after the other in one namespace, as a reader runs the page's blocks in one session."""
    namespace: dict = {"__name__": "tutorial"}
    for block in blocks:
        exec(compile(block, "verify-your-own.md", "exec"), namespace)
    return namespace


def test_the_page_has_the_module_a_run_and_a_falsified_run():
    assert len(BLOCKS) == 3


def test_the_experiment_passes_and_its_falsifier_fails_it_numerically(workdir, capsys):
    ran = _run(BLOCKS[1], BLOCKS[2])
    assert ran["record"].passed and "1/1 theorem checks passed" in capsys.readouterr().out
    checks = ran["checks"]
    assert checks["verdict"].tolist() == ["pass"] and checks["margin"].iloc[0] > 0
    falsified = ran["row"]
    assert falsified.verdict == "fail" and falsified.margin is not None and falsified.margin < -0.05


def test_the_command_line_replays_it_from_its_record(workdir):
    _run(BLOCKS[1])
    record = json.loads((workdir / "runs/norm-growth/record.json").read_text())
    assert record["module"] == "my_experiments"
    replay = subprocess.run(
        [sys.executable, "-m", "attnlab", "run", "--config", "runs/norm-growth/record.json", "--no-progress"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert replay.returncode == 0, replay.stderr
    assert "mine.norm-growth: 1/1 theorem checks passed" in replay.stdout


def test_an_experiment_defined_in_a_script_run_as_main_cannot_be_replayed():
    record = {"experiment": "mine.script", "config": {}, "quick": True, "module": "__main__"}
    with pytest.raises(ValidationError, match="script run as __main__"):
        find_experiment(record, REGISTRY)
    with pytest.raises(ValidationError, match="not importable here"):
        find_experiment({**record, "module": "no_such_module_of_mine"}, REGISTRY)
