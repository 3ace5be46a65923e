"""The CLI audit's findings on ``attnlab explain`` and ``attnlab svm``: refusals made before the work, Ctrl-C lines that
say what is kept, and messages that name the flag as typed (not the library's argument)."""

import numpy as np
import pytest
from click.testing import CliRunner

import attnlab.explain
import attnlab.svm
from attnlab.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def files(tmp_path):
    """The audit's inputs: a file with a head, one with X and y only, and two with token sets stored as select."""
    r = np.random.default_rng(0)
    X, y, v = r.normal(size=(6, 3, 4)), np.array([1, -1, 1, -1, 1, -1.0]), r.normal(size=4)
    some = np.zeros((6, 3), bool)
    some[:, 0] = some[0, 1] = True
    np.savez(tmp_path / "good.npz", X=X, y=y, v=v)
    np.savez(tmp_path / "xy.npz", X=X, y=y)
    np.savez(tmp_path / "selmask.npz", X=X, y=y, v=v, select=some)
    np.savez(tmp_path / "selmaskall.npz", X=X, y=y, v=v, select=np.ones((6, 3), bool))
    return tmp_path


@pytest.fixture
def no_training(monkeypatch):
    """Training fails the test: a refusal must come before it."""

    def train(*args, **kwargs):
        raise AssertionError("explain trained before refusing its input")

    monkeypatch.setattr(attnlab.explain, "batched_train", train)


def test_explain_refuses_sets_of_whole_sequences_before_training(files, no_training):
    result = invoke("explain", files / "selmaskall.npz", "--out", files / "o", "--steps", 100000)
    assert result.exit_code == 2, result.output
    assert "SVM-equivalence: the token sets of sequences [0, 1, 2, 3, 4] and 1 more (every sequence)" in result.output
    assert not (files / "o").exists()


@pytest.mark.parametrize("steps", ["99999999999999999999", "100000001", "0"])
def test_explain_refuses_steps_out_of_range_naming_the_flag(files, no_training, steps):
    result = invoke("explain", files / "good.npz", "--out", files / "o", "--steps", steps)
    assert result.exit_code == 2, result.output
    assert f"error: --steps {steps} is out of range: pass 1 to 100000000 (10^8, a bound of ours" in result.output


def test_ctrl_c_in_explain_says_nothing_is_kept(files, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(attnlab.explain, "batched_train", interrupted)
    result = invoke("explain", files / "good.npz", "--out", files / "o", "--steps", 10)
    assert result.exit_code == 130, result.output
    assert "interrupted: explain keeps no partial run" in result.output and "fewer --steps" in result.output
    assert "what finished is kept" not in result.output and not (files / "o").exists()


def test_ctrl_c_in_svm_says_nothing_was_written(files, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(attnlab.svm, "attention_svm", interrupted)
    result = invoke("svm", files / "good.npz", "--out", files / "w.npz")
    assert result.exit_code == 130, result.output
    assert "interrupted: nothing was written" in result.output and "what finished is kept" not in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["explain", "good.npz", "--opt", "joint:head_lr=0.1"],
            "--opt joint:head_lr=0.1: head_lr sets the step of a trained head; add --train-head or drop head_lr",
        ),
        (["explain", "good.npz", "--select-key", "v"], "--select-key v: select must be 6 integer token indices"),
        (["explain", "good.npz", "--select", "0,1"], "--select 0,1: select must be 6 integer token indices"),
        (["svm", "xy.npz", "--select-key", "X"], "--select-key X: select must be 6 integer token indices"),
        (["explain", "good.npz", "--v", "X"], "--v has shape (6, 3, 4), expected 1 axes (d)"),
        (["svm", "good.npz", "--v", "X"], "--v has shape (6, 3, 4), expected 1 axes (d)"),
        (
            ["explain", "good.npz", "--head", "relu", "--V", "X", "--select", "0,1,2,0,1,2"],
            "--V has shape (6, 3, 4), expected 2 axes (m, d)",
        ),
        (
            ["svm", "selmask.npz", "--norm", "1"],
            "--norm 1: the select of selmask.npz holds token sets (several tokens per sequence)",
        ),
    ],
)
def test_messages_name_the_flag_as_typed(files, no_training, monkeypatch, args, message):
    monkeypatch.chdir(files)
    result = invoke(*args, *(["--out", "o", "--steps", 10] if args[0] == "explain" else []))
    assert result.exit_code == 2, result.output
    assert f"error: {message}" in result.output


@pytest.mark.parametrize(
    "out, message",
    [
        ("", "--out is empty: pass the path of the .npz file to write"),
        ("newdir/", "--out newdir/ is a folder: pass the path of a file in it"),
    ],
)
def test_svm_refuses_an_out_that_is_no_file_before_solving(files, monkeypatch, out, message):
    monkeypatch.chdir(files)
    result = invoke("svm", "good.npz", "--out", out)
    assert result.exit_code == 2, result.output
    assert f"error: {message}" in result.output and "margin" not in result.output  # refused before the solve
    assert not (files / "newdir").exists()


def test_svm_refuses_an_out_under_a_file_before_solving(files, monkeypatch):
    monkeypatch.chdir(files)
    result = invoke("svm", "good.npz", "--out", "good.npz/w.npz")
    assert result.exit_code == 1, result.output  # the file system's refusal, as the write itself says it
    assert "error: cannot write 'good.npz/w.npz': File exists" in result.output and "margin" not in result.output
