"""Sweep files: parsing, expansion order, seeds derived per repeat, duplicate and malformed sweeps refused."""

import datetime
from pathlib import Path

import numpy as np
import pytest

from attnlab._validation import ValidationError
from attnlab.runner import config_hash
from attnlab.runner.spec import Job, SweepSpec, derive_seed, expand, load_sweep


def write(tmp_path, text):
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return path


def test_grid_times_list_expands_in_written_order(tmp_path):
    spec = load_sweep(
        write(
            tmp_path,
            "task: toy\nbase: {d: 3}\nlist:\n  - {opt: a}\n  - {opt: b, d: 4}\ngrid:\n  lr: [0.1, 0.2]\n  seed: [0, 1]\n",
        )
    )
    jobs = expand(spec)
    got = [(j.params["opt"], j.params["d"], j.params["lr"], j.params["seed"]) for j in jobs]
    expected = [(o, d, lr, s) for o, d in (("a", 3), ("b", 4)) for lr in (0.1, 0.2) for s in (0, 1)]
    assert got == expected
    assert [j.index for j in jobs] == list(range(8))


def test_job_key_depends_on_task_and_params_only():
    a = Job("toy", {"lr": 0.1, "d": 3}, index=0)
    b = Job("toy", {"d": 3, "lr": 0.1}, index=5)
    assert a.key == b.key  # key order and position do not matter
    assert Job("other", {"lr": 0.1, "d": 3}).key != a.key
    assert Job("toy", {"lr": 0.2, "d": 3}).key != a.key


def test_repeats_derive_distinct_seeds_from_base_seed():
    jobs = expand(SweepSpec(task="toy", base={"seed": 7}, repeats=4))
    seeds = [j.params["seed"] for j in jobs]
    assert seeds == [derive_seed(7, r) for r in range(4)]
    assert len(set(seeds)) == 4


def test_derive_seed_matches_numpy_seed_sequence():
    import numpy as np

    # independent truth: NumPy's SeedSequence spawned child for the repeat index
    child = np.random.SeedSequence(3).spawn(6)[5]
    assert derive_seed(3, 5) == int(child.generate_state(1)[0] % 2**31)


def test_duplicate_runs_are_refused():
    with pytest.raises(ValidationError, match="same parameters"):
        expand(SweepSpec(task="toy", points=[{"lr": 1}, {"lr": 1}]))


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("task: toy\ngrids: {}\n", "unknown keys"),
        ("grid: {lr: [1]}\n", "task must be"),
        ("task: toy\ngrid: {lr: 1}\n", "grid.lr must be a non-empty list"),
        ("task: toy\nlist: {lr: 1}\n", "list must be a list"),
        ("task: toy\nrepeats: 0\n", "repeats == 0, must be >= 1"),
        ("task: toy\nbase: [1]\n", "base must be a mapping"),
        ("task: [\n", "not valid YAML"),
    ],
)
def test_malformed_sweeps_name_the_problem(tmp_path, text, match):
    with pytest.raises(ValidationError, match=match):
        load_sweep(write(tmp_path, text))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ValidationError, match="does not exist"):
        load_sweep(tmp_path / "nope.yaml")


def test_a_yaml_error_is_one_line_with_its_position(tmp_path):
    match = r"is not valid YAML: while parsing a flow node; .*line 2, column 1"
    with pytest.raises(ValidationError, match=match) as info:
        load_sweep(write(tmp_path, "task: [\n"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "seed", [2.9, 2.0, "abc", None, True, -1], ids=["float", "whole-float", "str", "none", "bool", "negative"]
)
def test_a_seed_with_repeats_that_is_not_a_whole_number_is_refused_not_rounded(seed):
    # int(2.9) would silently run seed 2; int("abc") and int(None) raise errors that name nothing
    with pytest.raises(
        ValidationError, match=r"^seed .*with repeats, seed is the base seed .*give a whole number >= 0"
    ):
        expand(SweepSpec(task="toy", base={"seed": seed}, repeats=2))


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"repeats": 0}, r"^SweepSpec: repeats == 0, must be >= 1"),  # expanded to no run at all
        ({"repeats": True}, r"^SweepSpec: repeats must be a int"),
        ({"grid": {"lr": 0.1}}, r"^SweepSpec: grid.lr must be a non-empty list of values, got 0.1"),  # a TypeError
        ({"grid": {"lr": []}}, r"^SweepSpec: grid.lr must be a non-empty list"),
        ({"task": ""}, r"^SweepSpec: task must be a task name"),
        ({"points": [1]}, r"^SweepSpec: list\[0\] must be a mapping"),
    ],
)
def test_a_spec_built_in_python_is_checked_like_a_file(fields, match):
    with pytest.raises(ValidationError, match=match):
        SweepSpec(**{"task": "toy", **fields})


def test_a_yaml_date_is_refused_naming_the_parameter(tmp_path):
    # an unquoted 2020-01-01 is a datetime.date, which job.json cannot hold: was a TypeError naming no parameter
    match = r"base\.note == datetime\.date\(2020, 1, 1\) is a date; parameter values must be numbers, strings"
    with pytest.raises(ValidationError, match=match):
        load_sweep(write(tmp_path, "task: toy\nbase: {note: 2020-01-01}\n"))
    with pytest.raises(ValidationError, match=r"^params\.when\[0\] == datetime\.date"):
        Job("toy", {"when": [datetime.date(2020, 1, 1)]})
    with pytest.raises(ValidationError, match=r"^SweepSpec: grid\.when\[1\] == datetime\.date"):
        SweepSpec(task="toy", grid={"when": ["a", datetime.date(2020, 1, 1)]})


def test_values_that_job_json_converts_are_still_parameters():
    job = Job("toy", {"path": Path("a/b.npz"), "n": np.int64(3), "lr": np.float64(0.5), "opts": {"k": [1, None]}})
    assert job.key == Job("toy", {"path": "a/b.npz", "n": 3, "lr": 0.5, "opts": {"k": [1, None]}}).key


@pytest.mark.parametrize("length", [0, -3, 65, True, 2.0])
def test_config_hash_length_is_checked(length):
    with pytest.raises(ValidationError, match=r"^length == .*, must be an int from 1 to 64"):
        config_hash({"a": 1}, length=length)
    assert len(config_hash({"a": 1}, length=64)) == 64 and len(config_hash({"a": 1}, length=1)) == 1


def test_yaml_exponents_without_a_dot_are_floats(tmp_path):
    # PyYAML's YAML 1.1 needs a dot: 1e-3 was the string '1e-3', which batched-train refused as lr
    spec = load_sweep(
        write(tmp_path, "task: toy\nbase: {lr: 1e-3, big: 1E5, c: 1.5e3, m: -.5, n: 10, z: '09', s: 1e, h: .inf}\n")
    )
    assert spec.base == {"lr": 0.001, "big": 1e5, "c": 1500.0, "m": -0.5, "n": 10, "z": "09", "s": "1e", "h": np.inf}
    assert type(spec.base["n"]) is int and type(spec.base["big"]) is float
    import yaml

    assert yaml.safe_load("lr: 1e-3") == {"lr": "1e-3"}  # the global SafeLoader is left alone


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "task: toy\nbase: {steps: 10, steps: 20}\n",
            r"'steps' is given twice .*line 2, column 8 and line 2, column 19",
        ),
        ("task: toy\nbase:\n  lr: 0.1\n  lr: 0.2\n", r"'lr' is given twice .*line 3, column 3 and line 4, column 3"),
        ("task: toy\ntask: other\n", r"'task' is given twice .*line 1, column 1 and line 2, column 1"),
    ],
)
def test_a_key_given_twice_is_refused_naming_it_and_its_lines(tmp_path, text, match):
    # was: the last value silently won
    with pytest.raises(ValidationError, match=rf"is not valid YAML: the key {match}\); keep one$"):
        load_sweep(write(tmp_path, text))


def test_keys_merged_from_an_anchor_may_be_overridden(tmp_path):
    text = "task: toy\nlist:\n  - &a {lr: 0.1, d: 3}\n  - {<<: *a, lr: 0.2}\n"
    assert load_sweep(write(tmp_path, text)).points == [{"lr": 0.1, "d": 3}, {"lr": 0.2, "d": 3}]
