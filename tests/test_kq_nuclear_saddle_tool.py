"""tools/findings/kq_nuclear_saddle.py: rank-1 KKT points of the factored program (docs/findings.md, "Rank-1
saddles"), checked against the KKT conditions with autograd's margin gradients, the escape exponent against a
followed flow, and the reading and verdict at their thresholds."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.x3 import X3Config
from attnlab.metrics import attention_margin
from attnlab.svm import attention_svm

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tool(load_script, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools" / "findings"))  # the script imports the rank and rate tools
    return load_script("tools/findings/kq_nuclear_saddle.py")


def _program(seed: int, d: int):
    config = X3Config()
    data = scores_equal(config.n, config.T, d, config.gap, seed=seed)
    return data, attention_svm(data, norm="nuc")


@pytest.mark.parametrize(("seed", "d"), [(591, 4), (473, 4), (447, 8)])
def test_the_rank_1_point_meets_the_kkt_conditions_of_the_factored_program(tool, seed, d):
    """Feasible with active margins 1, duals >= 0 on them only, and (a, b) = sum lambda grad margin, the gradients
    taken by autograd through the library's margin; the point is not the nuclear-norm SVM (its value is larger)."""
    data, solution = _program(seed, d)
    point = tool.rank1_point(data, solution.W)
    U, sv, Vh = torch.linalg.svd(point.W)
    assert float(sv[1] / sv[0]) < 1e-12
    a = (U[:, 0] * sv[0].sqrt()).requires_grad_()
    b = (Vh[0] * sv[0].sqrt()).requires_grad_()
    X, Z, select = data.X, data.Z, data.select
    gaps = torch.einsum("ntd,d,e,ne->nt", X[torch.arange(len(select)), select].unsqueeze(1) - X, a, b, Z)
    others = torch.ones_like(gaps, dtype=torch.bool)
    others[torch.arange(len(select)), select] = False
    assert float(gaps[others].detach().min()) == pytest.approx(1.0, abs=1e-7)
    assert float(attention_margin(X, Z, point.W, select)) == pytest.approx(1.0, abs=1e-7)
    assert bool((point.duals >= 0).all()) and bool((point.duals[~others] == 0).all())
    slack = gaps.detach() - 1
    assert float((point.duals * slack).abs().max()) < 1e-7  # complementary slackness
    grad_a, grad_b = torch.autograd.grad((point.duals * gaps).sum(), (a, b))
    assert torch.allclose(grad_a, a.detach(), atol=1e-6) and torch.allclose(grad_b, b.detach(), atol=1e-6)
    assert float(sv[0]) > float(torch.linalg.svdvals(solution.W).sum()) + 1e-6


def test_the_escape_exponent_is_the_slope_of_a_followed_flow(tool):
    """Seed 591 at d = 4: the flow from the rank-1 point grows sigma_2 / sigma_1 at the predicted 0.0069 per unit of
    ln mu (to 1%), where reading sigma_2 alone would give 1.0069 and the nuclear solution's rate a decay."""
    data, solution = _program(591, 4)
    rates = tool.escape_rates(data, tool.rank1_point(data, solution.W), solution)
    assert rates["predicted"] == pytest.approx(0.00691, abs=1e-5)
    assert rates["unnormalised"] == pytest.approx(1 + rates["predicted"])
    assert rates["nuclear"] <= 0 and rates["stationary"] == 0
    assert rates["gap"] == pytest.approx(3.4e-5, rel=0.05)
    slope, records = tool.escape_reading(tool.saddle_path(591, 4, X3Config(), steps=15_000))
    assert records >= tool.MIN_RECORDS
    assert slope == pytest.approx(rates["predicted"], rel=0.01)


def test_a_fast_escape_is_read_below_the_linear_bound(tool):
    """Seed 430 at d = 4 (e = 0.58): its runs cross 1e-4 within the run; the reading stops there and matches."""
    data, solution = _program(430, 4)
    predicted = tool.escape_rates(data, tool.rank1_point(data, solution.W), solution)["predicted"]
    path = tool.saddle_path(430, 4, X3Config(), steps=20_000)
    assert (path.groupby("run")["ratio"].max() > tool.LINEAR).all()
    slope, _ = tool.escape_reading(path)
    assert slope == pytest.approx(predicted, rel=0.02)


def _runs(slope: float, ln_mu: np.ndarray, runs: int = 3, bend: float = 0.0) -> pd.DataFrame:
    """Runs whose ln ratio is ``slope ln mu`` + c below LINEAR and bends by ``bend`` per unit past it."""
    ln_ratio = np.log(1e-8) + slope * (ln_mu - ln_mu[0])
    ln_ratio = np.where(ln_ratio > np.log(1e-4), np.log(1e-4) + (1 + bend) * (ln_ratio - np.log(1e-4)), ln_ratio)
    return pd.concat(
        [pd.DataFrame({"ln_mu": ln_mu, "ratio": np.exp(ln_ratio), "run": r}) for r in range(runs)], ignore_index=True
    )


def test_the_reading_fits_the_second_half_below_the_linear_bound(tool):
    path = _runs(0.5, np.linspace(8.0, 40.0, 321), bend=-0.5)  # a bend past 1e-4 the reading must not see
    slope, records = tool.escape_reading(path)
    assert slope == pytest.approx(0.5, rel=1e-9)
    assert records == 93  # ln mu 8 to 26.4 lies below 1e-4: its second half, 17.2 to 26.4, at 0.1 a record
    fast = _runs(20.0, np.linspace(8.0, 12.0, 41))
    assert np.isnan(tool.escape_reading(fast)[0])  # crossed in 5 records


def test_the_verdict_reads_the_share_within_the_tolerance(tool):
    frame = pd.DataFrame({"slope": [1.0] * 9 + [1.2], "predicted": [1.0] * 10, "unnormalised": [2.0] * 10})
    assert tool.escape_verdict(frame)[0]
    assert not tool.escape_verdict(frame.assign(slope=[1.0] * 8 + [1.2, 0.85]))[0]
    assert not tool.escape_verdict(frame, "unnormalised")[0]
    assert tool.escape_verdict(frame.assign(slope=np.nan)) == (False, "no verdict: no program readable")


def test_the_command_runs_judges_and_keeps_its_paths(tool, monkeypatch, tmp_path, capsys):
    """--seeds writes the programs and their paths; --from-paths reads the paths back to the same programs."""
    monkeypatch.setattr(tool, "SADDLE_STEPS", 2000)
    monkeypatch.setattr(tool, "saddle_path", lambda s, d, c, steps=2000: _runs(0.0069, np.linspace(8.0, 20.0, 121)))
    assert tool.main(["--seeds", "591", "--ds", "4", "--out", str(tmp_path / "s.csv"), "--judge"]) == 0
    printed = capsys.readouterr().out
    assert "seed 591 d 4: slope 0.0069" in printed and "prediction holds" in printed
    assert "falsifier unnormalised" in printed and printed.count("prediction fails") == 3
    paths = pd.read_csv(tmp_path / "s-paths.csv")
    assert paths.columns.tolist() == ["ln_mu", "ratio", "run", "seed", "d"] and len(paths) == 363
    assert tool.main(["--from-paths", str(tmp_path / "s-paths.csv"), "--out", str(tmp_path / "t.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "s.csv"), pd.read_csv(tmp_path / "t.csv"))
    with pytest.raises(SystemExit):
        tool.main(["--seeds", "2", "--ds", "4", "--out", str(tmp_path / "e.csv")])  # rank 1 at seed 2: nothing to read
    assert "no rank-2 program" in capsys.readouterr().err


def test_the_figure_keeps_the_house_rules(tool):
    frame = pd.DataFrame({"slope": [0.007, 0.3], "predicted": [0.0069, 0.31], "unnormalised": [1.0069, 1.31]})
    fig = tool.escape_figure(frame)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and ax.get_ylabel()


def test_a_program_without_a_rank_1_kkt_point_is_kept_unreadable(tool, monkeypatch):
    def refuse(data, start):
        raise ValueError("not a KKT point")

    monkeypatch.setattr(tool, "rank1_point", refuse)
    path = tool.saddle_path(591, 4, X3Config()).assign(seed=591, d=4)
    frame = tool.measured(path, X3Config())
    assert frame[["seed", "d", "records", "kkt"]].to_dict("records") == [
        {"seed": 591, "d": 4, "records": 0, "kkt": False}
    ]
    assert np.isnan(frame["slope"].iloc[0]) and "predicted" not in frame.columns  # no verdict reads it


def test_parked_programs_are_parsed_and_printed_and_a_bad_one_is_refused(tool, monkeypatch, capsys):
    monkeypatch.setattr(tool, "parked", lambda seed, d, config, follow: {"predicted": 0.0069, "seed_times_d": seed * d})
    assert tool.main(["--parked", "591:4", "7:8"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "seed 591 d 4: predicted 0.0069, seed_times_d 2364",
        "seed 7 d 8: predicted 0.0069, seed_times_d 56",
    ]
    for bad in ("591", "591:1", "a:4"):
        with pytest.raises(SystemExit):
            tool.main(["--parked", bad])
        assert "is not SEED:D" in capsys.readouterr().err


def test_escape_levels_read_where_the_ratio_reaches_each_fraction_against_the_exponents_line(tool):
    ln_mu = np.linspace(100.0, 600.0, 501)  # one record per unit of ln mu
    ratio = np.minimum(1e-3 * np.exp(0.01 * (ln_mu - 100.0)), 0.8 * 8e-3)  # growth at e = 0.01, stalling at 0.8 r*
    levels = tool.escape_levels(ln_mu, ratio, 8e-3, 0.01)
    assert levels["predicted_0.5"] == pytest.approx(100.0 + np.log(4.0) / 0.01)  # 238.63
    assert levels["reached_0.5"] == 239.0  # the first record at or past it
    assert levels["reached_0.25"] == 170.0 and np.isnan(levels["reached_0.9"])


def test_a_negative_follow_is_refused(tool, capsys):
    with pytest.raises(SystemExit):
        tool.main(["--parked", "591:4", "--follow-steps", "-1"])
    assert "--follow-steps -1" in capsys.readouterr().err
