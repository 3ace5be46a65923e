"""The site's command-line pages: the reference is generated from the click commands (every command, option, default
and exit status), and the page on explain's and svm's output names every column and line they print."""

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from attnlab.cli import main

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_PAGE = ROOT / "docs" / "cli" / "output.md"


@pytest.fixture
def generator(load_script):
    return load_script("tools/docs/cli_reference.py")


def _leaves(group: click.Group, path: str) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _leaves(command, f"{path} {name}")
        else:
            found.append((f"{path} {name}", command))
    return found


def test_the_reference_lists_every_command_option_and_default(generator):
    text = generator.cli_reference()
    for path, command in _leaves(main, "attnlab"):
        assert re.search(rf"^#+ {path}$", text, flags=re.M), path
        section = text.split(f" {path}\n", 1)[1].split("\n#", 1)[0]
        for param in command.params:
            if isinstance(param, click.Option):
                assert f"`{param.opts[0]}" in section, (path, param.opts[0])
                if param.show_default and param.default is not None:
                    assert f"`{param.default}`" in section, (path, param.opts[0], param.default)
            else:
                assert f"`{param.human_readable_name}`" in section, (path, param.name)


def test_every_command_says_its_exit_status():
    missing = [path for path, command in _leaves(main, "attnlab") if "exit status" not in (command.help or "").lower()]
    assert not missing, f"say the exit statuses in the command's help (docs/cli/index.md lists them): {missing}"


def test_the_reference_page_keeps_its_marker_and_escapes_help_text(generator):
    assert generator.MARKER in (ROOT / "docs" / "cli" / "index.md").read_text()
    text = generator.cli_reference()
    assert "runs/&lt;name&gt;-&lt;hash&gt;" in text  # `run --out`'s default is text, not an HTML tag


def _documented(name: str) -> bool:
    return f"`{name}`" in OUTPUT_PAGE.read_text()


def test_every_column_of_explain_is_explained():
    from attnlab.data import example1
    from attnlab.explain import explain

    data = example1(n=3, T=3, d=8, seed=0)
    for opt in ("ngd", "md:3"):  # md adds the bregman column
        result = explain(data, "W", opt, 60, 0.3)
        columns = set(result.table.columns) | set(result.trajectory.columns)
        assert "bregman" in columns and "attended" in columns
        missing = [c for c in sorted(columns) if not _documented(c)]
        assert not missing, f"docs/cli/output.md does not explain the columns {missing}"


def test_every_line_of_svm_is_explained(tmp_path):
    runner = CliRunner()
    data = tmp_path / "data.npz"
    assert (
        runner.invoke(main, ["data", "make", "example1", "--out", str(data), "--set", "n=3", "--set", "d=8"]).exit_code
        == 0
    )
    labels = set()
    for args in ([], ["--norm", "nuc"], ["--select", "0,1,0"]):
        done = runner.invoke(main, ["svm", str(data), "--out", str(tmp_path / "w.npz"), *args])
        assert done.exit_code == 0, done.output
        labels |= {line[:14].strip() for line in done.output.splitlines() if not line.startswith("wrote")}
    assert {"status", "norm", "margin", "selected", "support (i:t)"} <= labels
    missing = [label for label in sorted(labels) if not _documented(label)]
    assert not missing, f"docs/cli/output.md does not explain the lines {missing}"
    import numpy as np

    keys = set(np.load(tmp_path / "w.npz").files)
    missing = [key for key in sorted(keys) if not _documented(key)]
    assert not missing, f"docs/cli/output.md does not explain the arrays {missing}"
