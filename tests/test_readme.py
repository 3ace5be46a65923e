"""README.md: its Python blocks run and print what their comments say; its commands exist; it cites the papers."""

import re
import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

import attnlab
from attnlab.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def _run(block: str) -> dict:
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    return namespace


def test_readme_starts_with_the_two_commands():
    first_block = README.split("```")[1]
    assert [line.split()[:2] for line in first_block.strip().splitlines()] == [["make", "demo"], ["make", "test"]]


def test_the_ten_lines_reach_the_svm_direction_they_claim():
    ns = _run(BLOCKS[0])
    last = ns["traj"].frame.iloc[-1]
    # the comment says alignment 0.99998 and softmax 1.0 at step 2000; 1e-4 and 1e-6 keep the printed digits
    assert last["step"] == 2000 and last["alignment"] > 0.9999 and last["opt_softmax"] > 1 - 1e-6


def test_the_batched_block_defines_its_variables_and_every_run_aligns():
    ns = _run(BLOCKS[1])
    final = ns["res"].frame.query("step == 1000")
    assert len(final) == 4 and (final["alignment"] > 0.9998).all()  # the comment's bound
    assert tuple(ns["res"].W.shape) == (4, 64, 64)


def _commands():
    rows = re.findall(r"^\| `(attnlab [^`]+)` \|", README, re.M)
    assert len(rows) >= 8
    return rows


@pytest.mark.parametrize("command", _commands())
def test_every_documented_command_and_option_exists(command):
    args = shlex.split(command)[1:]
    # --help is eager: click parses every option first (an unknown one fails), then prints the help
    result = CliRunner().invoke(main, [*args, "--help"])
    assert result.exit_code == 0, result.output


def test_the_readme_cites_the_papers_as_citation_cff_does():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == attnlab.__version__
    titles = re.findall(r"^  title   = \{(.*)\},$", README, re.M)
    assert sorted(titles) == sorted(ref["title"] for ref in cff["references"])
    assert len(titles) == 6  # the five seed papers and the source of the extensions (multi-token theory page)


def test_the_own_data_path_runs_from_a_file_holding_only_x_and_y(tmp_path, monkeypatch):
    """The data section's commands, as written, on an .npz of X and y (and the head beside it in head.npy)."""
    import numpy as np

    from attnlab.data import example1

    section = README.split("Your own tokens need only", 1)[1].split("\n**", 1)[0]
    commands = re.findall(r"^\| `(attnlab [^`]+)` \|", section, re.M)
    assert [shlex.split(c)[1] for c in commands] == ["data", "svm", "explain", "sweep"]
    (sweep_file,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    monkeypatch.chdir(tmp_path)
    data = example1(n=4, T=3, d=8, seed=0)
    np.savez("mine.npz", X=data.X.numpy(), y=data.y.numpy())  # as a user writes it: X and y only
    np.save("head.npy", data.v.numpy())
    Path("own.yaml").write_text(sweep_file)
    outputs = {}
    for command in commands:
        result = CliRunner().invoke(main, shlex.split(command)[1:])
        assert result.exit_code == 0, (command, result.output)
        outputs[shlex.split(command)[1]] = result.output
    assert "selected      0,0,0,0" in outputs["svm"]  # Example 1's optimal tokens under its head
    assert "closest: fro" in outputs["explain"]
    frame = attnlab.runner.read_sweep("runs/own")
    assert sorted(frame["lr"].unique()) == [0.1, 0.3]
    assert (frame.query("step == 300")["alignment_fro"] > 0.99).all()  # NGD aligns with its attended SVM
    # the other heads the section names: a head trained from 0, and a file without a head is told what to pass
    trained = CliRunner().invoke(main, ["explain", "mine.npz", "--train-head", "--out", "trained"])
    assert trained.exit_code in (0, 1) and Path("trained/v.npy").exists(), trained.output
    missing = CliRunner().invoke(main, ["svm", "mine.npz"])
    assert missing.exit_code == 2 and "holds no selection and no head v" in missing.output
