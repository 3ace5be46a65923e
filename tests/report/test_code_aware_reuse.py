"""`attnlab reproduce` reuses a finished experiment only when the code that computed it is the current code.

The fake experiment lives in a package written to a temporary folder, and reads a value from a helper module
there: editing the helper (as a user edits an experiment's code between two `make demo`) must make the next
reproduction compute the experiment again and say so; an unchanged rerun must reuse it and say so.
"""

import importlib
import json
import sys
import textwrap

import pandas as pd
import pytest
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.experiments import registry
from attnlab.report import reproduce
from attnlab.runner.fingerprint import source_hash

EXPERIMENT = '''
import dataclasses

import pandas as pd

from attnlab.verify import Claim, Experiment, ExperimentResult

from fakecode import helpers


@dataclasses.dataclass(frozen=True)
class ValueConfig:
    """Attributes
    ----------
    steps : int
        Rows of the table.
    """

    steps: int = 3


VALUE = Claim("helpers.value() is 1", "000:Fake1", "here", kind="property")


def run(config, ctx):
    value = helpers.value()
    frame = pd.DataFrame({"step": range(config.steps), "value": [value] * config.steps})
    return ExperimentResult(frame=frame, checks=[VALUE.holds(1.0, value, "exact", value == 1.0)])


EXPERIMENT = Experiment(name="fakecode.value", paper="fake-code", summary="reads helpers.value()",
                        config_type=ValueConfig, run=run, claims=(VALUE,))
'''


def _helpers(root, value):
    (root / "fakecode" / "helpers.py").write_text(f"def value():\n    return {value}\n")


@pytest.fixture
def fake_code(tmp_path, monkeypatch):
    """The package ``fakecode`` on sys.path, its experiment registered; the helper returns 1.0."""
    root = tmp_path / "src"
    (root / "fakecode").mkdir(parents=True)
    (root / "fakecode" / "__init__.py").write_text("")
    (root / "fakecode" / "experiment.py").write_text(textwrap.dedent(EXPERIMENT))
    _helpers(root, 1.0)
    monkeypatch.syspath_prepend(str(root))
    module = importlib.import_module("fakecode.experiment")
    registry.REGISTRY.load_all()
    monkeypatch.setitem(registry.REGISTRY.experiments, "fakecode.value", module.EXPERIMENT)
    source_hash.cache_clear()
    yield root
    for name in [m for m in sys.modules if m == "fakecode" or m.startswith("fakecode.")]:
        del sys.modules[name]
    source_hash.cache_clear()


def _measured(out):
    checks = pd.read_csv(next(out.glob("runs/fakecode.value-*/checks.csv")))
    return float(checks["measured"].iloc[0])


def test_an_edited_helper_is_recomputed_and_an_unchanged_rerun_reused(fake_code, tmp_path):
    out = tmp_path / "report"
    first = reproduce(out, paper="fake-code", progress=False)
    assert [e.origin for e in first.entries] == ["computed now"] and _measured(out) == 1.0
    record = json.loads(next(out.glob("runs/fakecode.value-*/record.json")).read_text())
    assert set(record["code"]["source"]) == {"attnlab", "fakecode"}  # the experiment's own package is hashed

    again = reproduce(out, paper="fake-code", progress=False)
    (entry,) = again.entries
    assert entry.origin.startswith("reused from ") and _measured(out) == 1.0
    assert entry.origin in again.path.read_text()  # the report says so
    assert json.loads((out / "summary.json").read_text())["origins"] == {"fakecode.value": entry.origin}

    _helpers(fake_code, 2.0)  # the edit
    importlib.reload(sys.modules["fakecode.helpers"])
    source_hash.cache_clear()  # a new process (the next `make demo`) hashes the edited source
    result = CliRunner().invoke(main, ["reproduce", "--paper", "fake-code", "--out", str(out), "--no-progress"])
    assert (
        "[FAIL] fakecode.value: 0/1 properties of our code hold; computed now (the code changed since the run of"
        in result.output
    )
    assert "the source of fakecode)" in result.output
    assert _measured(out) == 2.0  # the new code ran

    result = CliRunner().invoke(main, ["reproduce", "--paper", "fake-code", "--out", str(out), "--no-progress"])
    assert "fakecode.value: 0/1 properties of our code hold; reused from " in result.output
    assert "1 reused from earlier runs of the same code and config (--fresh recomputes them)" in result.output


def test_a_changed_library_version_is_recomputed(fake_code, tmp_path, monkeypatch):
    out = tmp_path / "report"
    reproduce(out, paper="fake-code", progress=False)
    from attnlab.runner import fingerprint

    monkeypatch.setattr(fingerprint, "dependency_versions", lambda: {"attnlab": "0", "torch": "9.9"})
    (entry,) = reproduce(out, paper="fake-code", progress=False).entries
    assert entry.origin.startswith("computed now (the code changed since the run of")
    assert "torch " in entry.origin and "-> 9.9" in entry.origin


def test_fresh_recomputes_what_would_be_reused(fake_code, tmp_path):
    out = tmp_path / "report"
    reproduce(out, paper="fake-code", progress=False)
    (entry,) = reproduce(out, paper="fake-code", progress=False, fresh=True).entries
    assert entry.origin.startswith("computed now (--fresh: the run of ")


def test_an_attnlab_source_edited_after_import_keys_no_run(fake_code, tmp_path, monkeypatch):
    """A notebook that edits attnlab's code and keeps its kernel runs the old code in memory: the hash of the files
    on disk would key those runs as the new code's. They are computed, never reused, and the warning says why."""
    import os

    from attnlab import _sources
    from attnlab.runner.fingerprint import code_fingerprint, is_unreadable

    assert not is_unreadable(code_fingerprint()["source"]["attnlab"])  # nothing edited in this process
    path = sorted(_sources.AT_IMPORT)[0]
    mtime, size = _sources.AT_IMPORT[path]
    monkeypatch.setitem(_sources.AT_IMPORT, path, (mtime - 1, size))  # as if the file changed after the import
    out = tmp_path / "report"
    with pytest.warns(RuntimeWarning, match=os.path.relpath(path, _sources.ROOT)):
        reproduce(out, paper="fake-code", progress=False)
        (entry,) = reproduce(out, paper="fake-code", progress=False).entries
    assert not entry.origin.startswith("reused")  # computed again: its first run's code was not the code on disk
    monkeypatch.setitem(_sources.AT_IMPORT, path, (mtime, size))  # the file as imported: runs are keyed again
    reproduce(out, paper="fake-code", progress=False)
    (entry,) = reproduce(out, paper="fake-code", progress=False).entries
    assert entry.origin.startswith("reused from ")
