"""``attnlab explain``: trains, names the closest SVM, writes the table and figure, refuses a bad --opt."""

import pandas as pd
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.data import example1, scores_equal


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_names_the_frobenius_svm_for_W_with_ngd_and_writes_its_outputs(tmp_path):
    src, out = tmp_path / "d.npz", tmp_path / "out"
    example1(n=3, T=3, d=8, seed=0).save(src)
    result = invoke("explain", src, "--param", "W", "--opt", "ngd", "--steps", 300, "--lr", 0.3, "--out", out)
    assert result.exit_code == 0, result.output
    assert "closest: fro" in result.output
    table = pd.read_parquet(out / "explain.parquet")
    assert table.loc[table["closest"], "candidate"].tolist() == ["fro"]
    assert pd.read_csv(out / "explain.csv")["candidate"].tolist() == table["candidate"].tolist()
    assert (out / "trajectory.parquet").exists() and (out / "explain.png").exists() and (out / "explain.pdf").exists()


def test_names_l1_diag_for_the_diagonal_parametrisation(tmp_path):
    src = tmp_path / "d.npz"
    scores_equal(n=2, T=3, d=8, seed=0).save(src)
    result = invoke("explain", src, "--param", "diag", "--steps", 800, "--lr", 0.3, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert "closest: l1-diag" in result.output


def test_bad_opt_gives_a_clear_error_and_exit_status_2(tmp_path):
    src = tmp_path / "d.npz"
    example1(n=3, T=3, d=8, seed=0).save(src)
    result = invoke("explain", src, "--opt", "md:0.5")
    assert result.exit_code == 2
    assert "error: optimizer 'md:0.5': p == 0.5, must be > 1.0" in result.output


def test_a_run_not_converged_in_direction_exits_1_and_names_no_candidate(tmp_path):
    src = tmp_path / "d.npz"
    example1(n=3, T=3, d=8, seed=0).save(src)
    result = invoke("explain", src, "--steps", 50, "--out", tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert "not converged in direction" in result.output and "closest:" not in result.output
    assert not pd.read_parquet(tmp_path / "out" / "explain.parquet")["closest"].any()
