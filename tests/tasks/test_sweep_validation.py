"""A sweep checks every grid point against the task's parameters before the first run, and refuses all bad
points at once: names, types and ranges, the data generator's own arguments, data_args and options values."""

import pytest

import attnlab.tasks  # noqa: F401  (registers the batched-train task these files name)
from attnlab._validation import ValidationError
from attnlab.runner import SweepSpec, run_sweep

BASE = {"n": 4, "T": 4, "d": 8, "steps": 2}
BAD = {
    "misspelt data_args": ({"data_args": {"rho2": 1.0}}, "data generator 'example1' takes no argument 'rho2'"),
    "negative sigma": ({"data_args": {"sigma": -1.0}}, "sigma == -1.0, must be > 0"),
    "another generator's argument": (
        {"data": "scores_equal", "data_args": {"m_pairs": 2}},
        "data generator 'scores_equal' takes no argument 'm_pairs'; its arguments are n, T, d, gap",
    ),
    "misspelt option": ({"options": {"momentun": 0.9}}, "unknown option(s) ['momentun'] for optimizer 'ngd'"),
    "momentum out of range": ({"options": {"momentum": 1.5}}, "momentum == 1.5, must be < 1.0"),
    "d_e zero": ({"param": "KQ", "d_e": 0, "init_scale": 1.0}, "d_e == 0, must be >= 1"),
    "one token": ({"T": 1}, "T == 1, must be >= 2"),
    "a size as text": ({"n": "8"}, "n must be a int, got '8'"),
}


def test_every_bad_point_is_reported_at_once_and_nothing_runs(tmp_path):
    points = [{}] + [point for point, _ in BAD.values()] + [{"data": "scores_equal"}]
    spec = SweepSpec.from_mapping({"task": "batched-train", "base": BASE, "list": points})
    with pytest.raises(ValidationError) as caught:
        run_sweep(spec, tmp_path, progress=False)
    message = str(caught.value)
    assert message.startswith(f"{len(BAD)} of {len(points)} runs of the sweep have bad parameters; nothing ran:")
    for i, (_, says) in enumerate(BAD.values(), start=1):
        line = next(line for line in message.splitlines() if line.strip().startswith(f"run {i} "))
        assert says in line, (line, says)
    assert "run 0 " not in message and f"run {len(points) - 1} " not in message  # the good points are not listed
    assert not (tmp_path / "runs").exists()


def test_a_good_sweep_on_scores_equal_runs(tmp_path):
    raw = {"task": "batched-train", "base": {"data": "scores_equal", "n": 2, "T": 3, "d": 8, "steps": 2}}
    result = run_sweep(SweepSpec.from_mapping(raw), tmp_path, progress=False)
    assert list(result.index["status"]) == ["done"]
