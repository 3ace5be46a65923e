"""Arguments of the wrong type to the runner's public functions: a ValidationError that names the argument, what it
got and the fix, never a bare TypeError or AttributeError (nor a flag read by truthiness)."""

from pathlib import Path

import pytest
from sweep_fixtures import ToyTrain

from attnlab._validation import ValidationError
from attnlab.runner import (
    Job,
    RayExecutor,
    SweepSpec,
    expand,
    get_task,
    load_sweep,
    make_executor,
    read_sweep,
    register_task,
    run_sweep,
)

register_task(ToyTrain())
SPEC = SweepSpec(task="toy-train", base={"d": 3, "steps": 2, "lr": 0.1}, grid={"seed": [0, 1]})


@pytest.mark.parametrize("flag", ["fresh", "progress"])
@pytest.mark.parametrize("value", ["no", 0, None])
def test_a_flag_of_run_sweep_that_is_not_a_bool_is_refused_before_anything_runs(tmp_path, flag, value):
    # fresh="no" recomputed every run and progress="no" showed the bar: both were read by truthiness
    with pytest.raises(ValidationError, match=rf"^{flag} == {value!r}, must be a bool \(True or False\)"):
        run_sweep(SPEC, tmp_path / "out", **{flag: value})
    assert not (tmp_path / "out").exists()


def test_run_sweep_with_fresh_false_reuses_and_fresh_true_recomputes(tmp_path):
    assert run_sweep(SPEC, tmp_path, progress=False).ran == 2
    assert run_sweep(SPEC, tmp_path, progress=False, fresh=False).ran == 0
    assert run_sweep(SPEC, tmp_path, progress=False, fresh=True).ran == 2


@pytest.mark.parametrize("root", [3, None, ["a"]])
def test_read_sweep_of_a_root_that_is_not_a_path_names_root(root):
    # was a TypeError from pathlib
    with pytest.raises(ValidationError, match=rf"^root == .* \(of type {type(root).__name__}\) is not a path; pass"):
        read_sweep(root)


@pytest.mark.parametrize("path", [3, None, {"task": "toy-train"}])
def test_load_sweep_of_a_path_that_is_not_a_path_names_path(path):
    # was a TypeError from pathlib
    with pytest.raises(ValidationError, match=rf"^path == .* \(of type {type(path).__name__}\) is not a path; pass"):
        load_sweep(path)


@pytest.mark.parametrize("name", [3, None, ("toy-train",)])
def test_get_task_of_a_name_that_is_not_a_str_names_task(name):
    # was "TypeError: argument of type 'int' is not iterable"
    with pytest.raises(
        ValidationError, match=rf"^task == .* \(of type {type(name).__name__}\) is not a task name; pass a str"
    ):
        get_task(name)


@pytest.mark.parametrize("task", [3, None, ""])
def test_a_job_with_a_task_that_is_not_a_name_is_refused_when_made(task):
    # Job(task=3) was accepted; run_sweep then raised a TypeError
    with pytest.raises(ValidationError, match=r"^task must be a task name such as 'batched-train'"):
        Job(task=task, params={})


def test_a_sweep_spec_with_a_task_that_is_not_a_str_says_its_type():
    with pytest.raises(ValidationError, match=r"^SweepSpec: task must be a task name .*, got 3 of type int$"):
        SweepSpec(task=3)


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        ("sweep.yaml", r"pass load_sweep\('sweep.yaml'\)"),
        (Path("sweep.yaml"), r"pass load_sweep\(\w*Path\('sweep.yaml'\)\)"),
        ({"task": "toy-train"}, r"pass SweepSpec\(task=..., base=..., grid=...\)"),
        (None, r"pass SweepSpec\(task="),
    ],
    ids=["str", "path", "mapping", "none"],
)
def test_expand_of_something_else_than_a_sweep_spec_names_spec(spec, hint):
    # expand("x") was "AttributeError: 'str' object has no attribute 'points'"
    with pytest.raises(ValidationError, match=rf"^spec must be a SweepSpec, got .* of type \w+; {hint}"):
        expand(spec)


@pytest.mark.parametrize("address", [3, b"127.0.0.1:6379", ["127.0.0.1:6379"]])
def test_a_ray_address_that_is_not_a_str_is_refused_when_the_executor_is_made(address):
    # make_executor("ray", address=3) was accepted; the sweep then raised an AttributeError in _check_reachable
    match = rf"^address == .* \(of type {type(address).__name__}\) is not a str; pass the cluster address as a str"
    with pytest.raises(ValidationError, match=match):
        make_executor("ray", address=address)
    with pytest.raises(ValidationError, match=match):
        RayExecutor(address=address)


def test_a_folder_of_other_files_is_refused_as_out_and_a_sweeps_own_or_an_empty_one_is_taken(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / ".gitkeep").write_text("")
    with pytest.raises(ValidationError, match=r"holds files that are not an attnlab sweep \(notes.txt\).*empty folder"):
        run_sweep(SPEC, tmp_path, progress=False)  # the runs and the report would be mixed into the user's files
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gitkeep", "notes.txt"]
    (tmp_path / "notes.txt").unlink()
    assert run_sweep(SPEC, tmp_path, progress=False).ran == 2  # hidden files aside, empty
    (tmp_path / "report.md").write_text("a note beside the runs")
    assert run_sweep(SPEC, tmp_path, progress=False).ran == 0  # a sweep's own folder, whatever else it holds
