"""tools/findings/kq_nuclear_rank.py: the nuclear program's rank and x3's K,Q gap per data set (docs/findings.md),
checked against x3's own run and the prediction's arithmetic."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from attnlab.experiments import run_experiment
from attnlab.experiments.kq_nuclear.x3 import X3Config

SCRIPT = Path(__file__).resolve().parents[1] / "tools" / "findings" / "kq_nuclear_rank.py"


def _tool():
    spec = importlib.util.spec_from_file_location("kq_nuclear_rank", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rank_of_the_nuclear_solution_at_the_default_and_at_seed_9():
    """x3's default data (seed 2) has a rank-1 solution; seed 9 at d = 4, where the full row failed, has rank 2."""
    tool, config = _tool(), X3Config()
    assert tool.nuclear_solution(2, 4, config)[0] == 1
    rank, ratio = tool.nuclear_solution(9, 4, config)
    assert rank == 2 and ratio == pytest.approx(0.01503, rel=1e-3)


def test_the_gap_is_x3s_own_row_reading(tmp_path):
    """The tool's K,Q runs are x3's: the same inits, steps and gap as the experiment's trajectory at the last step."""
    tool, steps = _tool(), 400
    overrides = {"seed": 9, "ds": (4,), "steps": steps, "record_every": 4}
    run_experiment("kq-nuclear.x3", overrides, out=tmp_path, progress=False)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    end = frame[(frame["param"] == "KQ") & (frame["step"] == frame["step"].max())]
    measured = tool.kq_gap(9, 4, X3Config(ds=(4,), steps=steps, record_every=4, seed=9))
    assert measured["gap"] == pytest.approx(float((1 - end["corr_nuc"]).max()), rel=1e-9)
    assert measured["mu"] == pytest.approx(float(end["mu"].min()), rel=1e-9)


def test_chosen_takes_every_rank_2_program_and_as_many_rank_1():
    survey = pd.DataFrame(
        {"seed": [0, 1, 2, 3, 4, 0, 1], "d": [4, 4, 4, 4, 4, 8, 8], "rank": [1, 2, 1, 1, 2, 1, 1], "sv_ratio": 0.0}
    )
    picked = _tool().chosen(survey)
    assert sorted(zip(picked["d"], picked["seed"])) == [(4, 0), (4, 1), (4, 2), (4, 4)]


@pytest.mark.parametrize(
    ("gaps_rank1", "gaps_rank2", "held"),
    [
        ([1e-6] * 19 + [1e-3], [1e-3] * 3 + [1e-6] * 7, True),  # 95% pass, 30% fail: both at their bounds
        ([1e-6] * 18 + [1e-3] * 2, [1e-3] * 10, False),  # 90% of rank 1 pass
        ([1e-6] * 20, [1e-3] * 2 + [1e-6] * 8, False),  # 20% of rank 2 fail
    ],
)
def test_the_verdict_reads_the_two_shares(gaps_rank1, gaps_rank2, held):
    frame = pd.DataFrame({"rank": [1] * len(gaps_rank1) + [2] * len(gaps_rank2), "gap": gaps_rank1 + gaps_rank2})
    assert _tool().verdict(frame, 1e-4)[0] is held


def test_no_verdict_without_both_ranks():
    held, text = _tool().verdict(pd.DataFrame({"rank": [1, 1], "gap": [0.0, 0.0]}), 1e-4)
    assert not held and text.startswith("no verdict")
