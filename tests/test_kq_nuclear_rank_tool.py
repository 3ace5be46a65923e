"""tools/findings/kq_nuclear_rank.py: the nuclear program's rank and x3's K,Q gap per data set (docs/findings.md),
checked against x3's own run and the prediction's arithmetic."""

import pandas as pd
import pytest
import torch

from attnlab.data import scores_equal
from attnlab.experiments import run_experiment
from attnlab.experiments.kq_nuclear.x3 import X3Config
from attnlab.svm import attention_svm


@pytest.fixture
def tool(load_script):
    return load_script("tools/findings/kq_nuclear_rank.py")


def test_rank_of_the_nuclear_solution_at_the_default_and_at_seed_9(tool):
    """x3's default data (seed 2) has a rank-1 solution; seed 9 at d = 4, where the full row failed, has rank 2."""
    config = X3Config()
    assert tool.nuclear_solution(2, 4, config)[0] == 1
    rank, ratio, _ = tool.nuclear_solution(9, 4, config)
    assert rank == 2 and ratio == pytest.approx(0.01503, rel=1e-3)


def test_the_gap_is_x3s_own_row_reading(tool, tmp_path):
    """The tool's K,Q runs are x3's: the same inits, steps and gap as the experiment's trajectory at the last step."""
    steps = 400
    overrides = {"seed": 9, "ds": (4,), "steps": steps, "record_every": 4}
    run_experiment("kq-nuclear.x3", overrides, out=tmp_path, progress=False)
    frame = pd.read_parquet(tmp_path / "trajectory.parquet")
    end = frame[(frame["param"] == "KQ") & (frame["step"] == frame["step"].max())]
    measured = tool.kq_gap(9, 4, X3Config(ds=(4,), steps=steps, record_every=4, seed=9))
    assert measured["gap"] == pytest.approx(float((1 - end["corr_nuc"]).max()), rel=1e-9)
    assert measured["mu"] == pytest.approx(float(end["mu"].min()), rel=1e-9)


def test_chosen_takes_every_rank_2_program_and_as_many_rank_1(tool):
    survey = pd.DataFrame(
        {"seed": [0, 1, 2, 3, 4, 0, 1], "d": [4, 4, 4, 4, 4, 8, 8], "rank": [1, 2, 1, 1, 2, 1, 1], "sv_ratio": 0.0}
    )
    picked = tool.chosen(survey)
    assert sorted(zip(picked["d"], picked["seed"])) == [(4, 0), (4, 1), (4, 2), (4, 4)]


@pytest.mark.parametrize(
    ("gaps_rank1", "gaps_rank2", "held"),
    [
        ([1e-6] * 19 + [1e-3], [1e-3] * 3 + [1e-6] * 7, True),  # 95% pass, 30% fail: both at their bounds
        ([1e-6] * 18 + [1e-3] * 2, [1e-3] * 10, False),  # 90% of rank 1 pass
        ([1e-6] * 20, [1e-3] * 2 + [1e-6] * 8, False),  # 20% of rank 2 fail
    ],
)
def test_the_verdict_reads_the_two_shares(tool, gaps_rank1, gaps_rank2, held):
    frame = pd.DataFrame({"rank": [1] * len(gaps_rank1) + [2] * len(gaps_rank2), "gap": gaps_rank1 + gaps_rank2})
    assert tool.verdict(frame, 1e-4)[0] is held


def test_no_verdict_without_both_ranks(tool):
    held, text = tool.verdict(pd.DataFrame({"rank": [1, 1], "gap": [0.0, 0.0]}), 1e-4)
    assert not held and text.startswith("no verdict")


@pytest.mark.parametrize(("seed", "d"), [(6, 16), (9, 4)])
def test_the_certificate_is_the_programs_subgradient_and_kappa_its_off_range_norm(tool, seed, d):
    """G from a plain loop over the constraints: U^T G V = I on the solution's range (the nuclear norm's subgradient,
    the KKT condition; to 3e-7 at seed 9, whose second singular value 0.0046 blurs its vectors), and kappa = 1 - the
    largest singular value of G's block off the range."""
    data = scores_equal(3, 3, d, 6.0, seed=seed)
    solution = attention_svm(data, norm="nuc")
    G = torch.zeros(d, d, dtype=torch.float64)
    for i in range(data.X.shape[0]):
        for t in range(data.X.shape[1]):
            G += solution.duals[i, t] * torch.outer(data.X[i, data.select[i]] - data.X[i, t], data.Z[i])
    U, sv, Vh = torch.linalg.svd(solution.W)
    rank = int((sv > 1e-6 * sv[0]).sum())
    assert torch.allclose(U[:, :rank].T @ G @ Vh[:rank].T, torch.eye(rank, dtype=torch.float64), atol=1e-6)
    off = torch.linalg.svdvals(U[:, rank:].T @ G @ Vh[rank:].T)[0]
    assert tool.off_range_rate(data, solution.W, solution.duals) == pytest.approx(1 - float(off), abs=1e-9)


def test_a_full_rank_solution_has_no_off_range_direction(tool):
    data = scores_equal(3, 3, 2, 6.0, seed=0)
    W = torch.eye(2, dtype=torch.float64)
    assert tool.off_range_rate(data, W, torch.zeros(3, 3, dtype=torch.float64)) == 1.0


def test_the_kappa_selection_keeps_rank_1_programs_in_the_band_by_seed(tool):
    survey = pd.DataFrame(
        {
            "seed": [0, 0, 1, 2, 3],
            "d": [8, 4, 4, 4, 4],
            "rank": [1, 1, 2, 1, 1],
            "kappa": [0.2, 0.3, 0.2, 0.05, 0.4],
            "sv_ratio": 0.0,
        }
    )
    picked = tool.chosen(survey, "kappa")
    assert list(zip(picked["seed"], picked["d"])) == [(0, 4), (0, 8), (3, 4)]


@pytest.mark.parametrize(
    ("slopes", "gaps", "held"),
    [
        ([-0.4] * 9 + [-0.2], [1e-5] * 10, True),  # 9/10 on the law (ratio 1.0; 0.5 off it), every one passes
        ([-0.4] * 8 + [-0.2] * 2, [1e-5] * 10, False),  # 8/10 on the law
        ([-0.4] * 10, [1e-5] * 9 + [1e-3], False),  # 9/10 pass, under 95%
    ],
)
def test_the_law_verdict_reads_the_slope_ratio_and_the_passes(tool, slopes, gaps, held):
    frame = pd.DataFrame({"rank": 1, "kappa": 0.2, "slope": slopes, "gap": gaps})
    outside = pd.DataFrame({"rank": [2, 1], "kappa": [0.2, 0.6], "slope": 0.0, "gap": 1.0})  # not the prediction's
    assert tool.law_verdict(pd.concat([frame, outside]), 1e-4)[0] is held


def test_programs_read_back_are_counted_once_with_their_program_columns_recomputed(tool, tmp_path):
    stored = tmp_path / "programs.csv"
    pd.DataFrame({"seed": [9, 9, 2], "d": [4, 4, 4], "rank": 0, "gap": [1e-3, 1e-3, 1e-9], "slope": -0.2}).to_csv(
        stored, index=False
    )
    frame = tool.read_programs([stored], X3Config())
    assert list(zip(frame["seed"], frame["rank"])) == [(9, 2), (2, 1)]
    assert frame["kappa"].iloc[1] == pytest.approx(tool.nuclear_solution(2, 4, X3Config())[2])


def test_the_figure_keeps_the_house_rules(tool):
    from attnlab.plotting import figure_problems

    frame = pd.DataFrame(
        {
            "rank": [1, 1, 1, 2],
            "kappa": [0.1, 0.3, 0.6, 0.5],
            "slope": [-0.2, -0.6, -0.9, -0.3],
            "gap": [3e-4, 1e-7, 0.0, 1e-2],
        }
    )
    assert figure_problems(tool.law_figure(frame, 1e-4)) == []


def test_the_command_judges_and_draws_stored_programs_and_asks_for_out_before_running(tool, tmp_path, capsys):
    stored, png = tmp_path / "programs.csv", tmp_path / "law.png"
    pd.DataFrame({"seed": [2, 9], "d": [16, 4], "gap": [2.8e-5, 5.7e-4], "slope": [-0.426, -0.175]}).to_csv(
        stored, index=False
    )
    assert tool.main(["--from-csv", str(stored), "--select", "kappa", "--judge", "--figure", str(png)]) == 0
    out = capsys.readouterr().out  # seed 9's rank-2 program is not the rate prediction's
    assert "slope / (-2 kappa) in [0.8, 1.25]: 1/1" in out and "prediction holds" in out and png.stat().st_size > 0
    with pytest.raises(SystemExit):
        tool.main(["--seeds", "0-1"])
    assert "pass --out" in capsys.readouterr().err


def test_follow_programs_takes_the_rank_2_programs_that_fail_the_row(tool, monkeypatch):
    frame = pd.DataFrame(
        {"seed": [5, 3, 4, 1], "d": [4, 4, 8, 4], "rank": [2, 2, 1, 2], "gap": [2e-4, 1e-3, 1e-2, 5e-5]}
    )
    calls = []
    path = pd.DataFrame({"ln_mu": [1.0, 2.0], "gap": [0.1, 0.01]})
    monkeypatch.setattr(tool, "followed", lambda seed, d, *_: calls.append((seed, d)) or ({"gap_end": 0.0}, path))
    out, paths = tool.follow_programs(frame, X3Config(), 1e-4)
    assert calls == [(3, 4), (5, 4)]  # rank 2 and above the bound, by seed; not the rank-1 or the passing one
    assert list(out["gap_end"]) == [0.0, 0.0] and list(out["seed"]) == [3, 5]
    assert list(paths["seed"]) == [3, 3, 5, 5] and list(paths["gap"]) == [0.1, 0.01] * 2


def test_followed_paths_are_written_as_each_program_ends(tool, monkeypatch, tmp_path):
    """With a file, each path is appended as its program ends: the file is the stacked paths, and a failure at the
    second program leaves the first; with no program, the file holds the header."""
    path = pd.DataFrame({"ln_mu": [1.0, 2.0], "gap": [0.1, 0.01]})
    monkeypatch.setattr(tool, "followed", lambda seed, d, *_: ({"gap_end": 0.0}, path))
    readings, paths = tool.follow_all([(3, 4), (5, 8)], X3Config(), out=tmp_path / "p.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "p.csv"), paths, check_dtype=False)
    broken = iter([path, None])
    with pytest.raises(AttributeError):
        tool.stacked_paths([(3, 4), (5, 8)], lambda seed, d: next(broken), tmp_path / "q.csv")
    assert pd.read_csv(tmp_path / "q.csv")["seed"].tolist() == [3, 3]
    tool.stacked_paths([], lambda seed, d: path, tmp_path / "e.csv")
    assert pd.read_csv(tmp_path / "e.csv").columns.tolist() == ["ln_mu", "gap", "seed", "d"]


def test_followed_reads_the_relative_flow_at_the_level_and_at_the_end(tool, monkeypatch):
    """followed's readings against the ngd-relative flow from x3's inits, recomputed here at every step."""
    from attnlab.experiments.kq_nuclear.x3 import x3_inits
    from attnlab.metrics import attention_margin, cosine, margin_normalized
    from attnlab.models import Factored
    from attnlab.training.flow import gradient_flow

    monkeypatch.setattr(tool, "LN_MU_X3", 4.0)
    config = X3Config(seed=199, ds=(4,))
    out, trace = tool.followed(199, 4, config, step=2e-3, steps=4000)
    data = scores_equal(3, 3, 4, 6.0, seed=199)
    K0, Q0, _ = x3_inits(config, 4)
    path = gradient_flow(Factored(4, 4, K0=K0, Q0=Q0), data, step=2e-3, steps=4000, method="ngd-relative",
                         record_every=10).path  # fmt: skip
    args = (data.X, data.Z, path["W"], data.select)
    mu = attention_margin(*args)
    gap = 1 - cosine(torch.nan_to_num(margin_normalized(*args)), attention_svm(data, norm="nuc").W)
    ln_mu = torch.log(mu.clamp(min=1e-300)).where(mu > 0, torch.tensor(float("-inf"))).min(dim=1).values
    first = int((ln_mu >= 4.0).nonzero()[0])
    assert out["gap_x3"] == pytest.approx(float(gap[first].max()), rel=1e-12)
    assert out["gap_end"] == pytest.approx(float(gap[-1].max()), rel=1e-12)
    assert out["ln_mu_end"] == pytest.approx(float(ln_mu[-1]), rel=1e-12)
    assert 4.0 < out["ln_mu_end"] and out["gap_end"] < out["gap_x3"]  # the margin passed the level, the gap fell
    assert trace["gap"].iloc[-1] == out["gap_end"] and trace["ln_mu"].iloc[-1] == out["ln_mu_end"]
    tool.follow_figure(trace.assign(seed=199, d=4), 1e-4)  # draws


@pytest.mark.parametrize(
    ("ends", "starts", "held"),
    [
        ([1e-6] * 8 + [1e-3] * 2, [1e-2] * 10, True),  # 80% within the bound, every one fell: both at their bounds
        ([1e-6] * 7 + [1e-3] * 3, [1e-2] * 10, False),  # 70% within
        ([1e-6] * 10, [1e-2] * 9 + [1e-7], False),  # one ended above its gap where x3's runs end
        ([1e-6] * 10, [1e-2] * 9 + [float("nan")], False),  # one never reached that margin
    ],
)
def test_the_follow_verdict_reads_the_share_within_the_bound_and_that_every_gap_fell(tool, ends, starts, held):
    frame = pd.DataFrame({"gap_end": ends, "gap_x3": starts, "ln_mu_end": 90.0})
    assert tool.follow_verdict(frame, 1e-4)[0] is held


def test_read_programs_solves_only_the_rows_kept(tool, tmp_path, monkeypatch):
    path = tmp_path / "ranks.csv"
    pd.DataFrame(
        {"seed": [1, 2, 2, 3], "d": [4, 4, 4, 8], "rank": [1, 2, 2, 2], "gap": [1e-3, 1e-3, 1e-3, 1e-6]}
    ).to_csv(path, index=False)
    solved = []
    monkeypatch.setattr(tool, "nuclear_solution", lambda seed, d, config: solved.append((seed, d)) or (2, 0.1, 0.5))
    frame = tool.read_programs([path], X3Config(), lambda f: (f["rank"] >= 2) & (f["gap"] > 1e-4))
    assert solved == [(2, 4)] and list(frame["seed"]) == [2]  # the duplicate once; not the rank-1 or passing rows
    assert list(frame["kappa"]) == [0.5]
