"""Defects of `attnlab sweep` and `attnlab reproduce` an audit found: one run spelled two ways ran twice, a binary
sweep file was a traceback, the only run's error named neither the run nor the file, reproduce's --out refusal
spoke of a sweep, and the help of --paper refused the experiment flagship that it runs (a group of one)."""

import pytest
from click.testing import CliRunner

import attnlab.tasks  # noqa: F401  (registers batched-train and experiment)
from attnlab._validation import ValidationError
from attnlab.cli import main
from attnlab.experiments import list_experiments
from attnlab.runner.spec import SweepSpec, expand

BASE = {"data": "example1", "n": 4, "T": 3, "d": 4, "steps": 20}


@pytest.mark.parametrize(
    ("task", "base", "grid", "says"),
    [
        (
            "batched-train",
            BASE,
            {"lr": [1, 1.0]},
            "grid.lr is 1 in run 0 and 1.0 in run 1, both read by the batched-train task as 1.0",
        ),
        (
            "batched-train",
            BASE,
            {"optimizer": ["ngd", "NGD", "ngd:", "sngd"]},
            "grid.optimizer is 'ngd' in run 0 and 'NGD' in run 1, both read by the batched-train task as 'ngd'",
        ),
        (
            "batched-train",
            BASE,
            {"optimizer": ["ngd:", "sngd"]},
            "grid.optimizer is 'ngd:' in run 0 and 'sngd' in run 1, both read by the batched-train task as 'ngd'",
        ),
        (
            "experiment",
            {"experiment": "flagship", "quick": True},
            {"n": [8, 8.0]},
            "grid.n is 8 in run 0 and 8.0 in run 1, both read by the experiment task as 8",
        ),
    ],
    ids=["lr-int-float", "optimizer-spellings", "optimizer-alias", "experiment-int-float"],
)
def test_one_run_spelled_two_ways_is_refused_naming_the_key_and_both_spellings(task, base, grid, says):
    # each ran twice (identical W.npy, identical configs), both copies listed and counted
    with pytest.raises(ValidationError, match="runs 0 and 1 of the sweep are one run spelled two ways: ") as info:
        expand(SweepSpec(task=task, base=base, grid=grid))
    assert says in str(info.value)


def test_the_cli_refuses_them_before_anything_runs_naming_the_file(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\nbase: {data: example1, n: 4, T: 3, d: 4, steps: 20}\ngrid: {lr: [1, 1.0]}\n")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o"), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert f"error: runs 0 and 1 of the sweep '{sweep}' are one run spelled two ways: grid.lr is 1" in result.output
    assert not (tmp_path / "o").exists()


def test_values_that_differ_keep_their_run_keys():
    # run folders of sweeps without duplicates keep their names: the key hashes the parameters as written
    spec = SweepSpec(task="batched-train", base=BASE, grid={"lr": [1, 2], "optimizer": ["ngd", "ngd:momentum=0.9"]})
    jobs = expand(spec)
    assert [j.params["lr"] for j in jobs] == [1, 1, 2, 2]
    assert [j.params["optimizer"] for j in jobs] == ["ngd", "ngd:momentum=0.9"] * 2
    assert [j.key for j in jobs] == ["5ac57e672ca9", "b470a1cdb48f", "31c480a75920", "559d42c21eb0"]
    with pytest.raises(ValidationError, match=r"grid\.lr is 2 in run 1 and 2\.0 in run 2"):
        expand(SweepSpec(task="batched-train", base=BASE, grid={"lr": [1, 2, 2.0]}))


@pytest.mark.parametrize("content", [b"PK\x03\x04\xe7\x00binary", b"task: batched-train\n# caf\xe9\n"])
def test_a_sweep_file_that_is_not_utf8_is_refused_naming_sweep_file(tmp_path, content):
    # a .npz or a Latin-1 file was a UnicodeDecodeError traceback, exit status 1
    sweep = tmp_path / "good.npz"
    sweep.write_bytes(content)
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert f"error: SWEEP_FILE '{sweep}' is not UTF-8 text, so not a YAML sweep file" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "o").exists()


def test_the_error_of_a_sweeps_only_run_names_the_run_and_the_file(tmp_path):
    # was "error: steps == -5, must be >= 0" alone
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\nbase: {data: example1, n: 4, T: 3, d: 4, steps: -5}\n")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert (
        f"error: steps == -5, must be >= 0 (run 0 of the sweep '{sweep}', its only run: "
        '{"T": 3, "d": 4, "data": "example1", "n": 4, "steps": -5})' in result.output
    )


def test_the_bad_runs_of_a_sweep_file_name_the_file(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("task: batched-train\nbase: {data: example1, n: 4, T: 3, d: 4}\ngrid: {steps: [-5, 3]}\n")
    result = CliRunner().invoke(main, ["sweep", str(sweep), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert f"error: 1 of 2 runs of the sweep '{sweep}' have bad parameters; nothing ran:" in result.output
    assert '  run 0 {"T": 3, "d": 4, "data": "example1", "n": 4, "steps": -5}: steps == -5, must be >= 0' in (
        result.output
    )


def test_reproduce_into_a_folder_of_other_files_names_out_and_a_report(tmp_path):
    # said "out '...' holds files that are not an attnlab sweep"
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["reproduce", "--paper", "flagship", "--quick", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert f"error: --out '{out}' holds files that are not an attnlab report folder (notes.txt)" in result.output
    assert "sweep" not in result.output and sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_the_help_of_paper_says_flagship_is_a_group_of_one():
    # the help refused one experiment by its full name, yet --paper flagship runs: flagship is its own group
    assert [e.name for e in list_experiments("flagship")] == ["flagship"]
    (paper,) = [p for p in main.commands["reproduce"].params if p.name == "paper"]
    assert "a name without a dot, flagship, is a group of one" in paper.help
    assert "Another experiment by its full name (kq-nuclear.x1) is refused: `attnlab run NAME` runs it." in paper.help
