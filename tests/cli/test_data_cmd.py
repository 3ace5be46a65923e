"""`attnlab data make` / `attnlab data check`: typed --set, seeds, round trip through the file, clear errors."""

import torch
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.data import TokenSelectionData, aligned_pairs, example1


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_make_writes_the_same_data_as_the_python_call(tmp_path):
    out = tmp_path / "e.npz"
    result = run(
        "data",
        "make",
        "example1",
        "--out",
        str(out),
        "--set",
        "n=4",
        "--set",
        "T=3",
        "--set",
        "antipodal=true",
        "--set",
        "opt_pos=random",
        "--seed",
        "2",
    )
    assert result.exit_code == 0, result.output
    assert "n=4, T=3, d=128" in result.output
    loaded = TokenSelectionData.load(out)
    expected = example1(n=4, T=3, antipodal=True, opt_pos="random", seed=2)
    for key in ("X", "Z", "y", "v", "select"):
        assert torch.equal(getattr(loaded, key), getattr(expected, key)), key


def test_make_parses_tuples_for_aligned_pairs_and_check_reports(tmp_path):
    out = tmp_path / "a.npz"
    result = run(
        "data",
        "make",
        "aligned_pairs",
        "--out",
        str(out),
        "--set",
        "radii=1,2,3",
        "--set",
        "c=0.5",
        "--set",
        "score=20",
    )
    assert result.exit_code == 0, result.output
    assert torch.equal(TokenSelectionData.load(out).X, aligned_pairs(radii=(1.0, 2.0, 3.0), c=0.5, score=20.0).data.X)
    check = run("data", "check", str(out), "--which", "A2", "--which", "A3", "--which", "A4", "--strict")
    assert check.exit_code == 0, check.output
    assert "[holds] A4 aligned geometry" in check.output and "3/3 assumptions hold" in check.output


def test_check_strict_exits_1_when_an_assumption_fails(tmp_path):
    out = tmp_path / "e.npz"
    run("data", "make", "example1", "--out", str(out))
    loose = run("data", "check", str(out))
    assert loose.exit_code == 0 and "[FAILS] A1 near-orthogonal tokens" in loose.output
    assert run("data", "check", str(out), "--strict").exit_code == 1


def test_unknown_key_lists_the_valid_keys(tmp_path):
    result = run("data", "make", "dm", "--out", str(tmp_path / "d.npz"), "--set", "sigma=2")
    assert result.exit_code == 2
    assert "unknown key 'sigma' for dm; keys: n, d, sigma_opt, sigma_oth, mu" in result.output


def test_bad_values_and_names_are_refused(tmp_path):
    out = str(tmp_path / "x.npz")
    cases = [
        (["example1", "--set", "opt_pos=middle"], "must be one of first, random"),
        (["example1", "--set", "n=two"], "--set n=two: expected int"),
        (["nope"], "unknown generator 'nope'; known generators: example1, dm"),
        (["joint_toy", "--seed", "1"], "takes no --seed"),
        (["example1", "--set", "T=1"], "T == 1, must be >= 2"),
    ]
    for args, message in cases:
        result = run("data", "make", *args, "--out", out)
        assert result.exit_code == 2 and message in result.output, (args, result.output)


def test_check_missing_file(tmp_path):
    result = run("data", "check", str(tmp_path / "none.npz"))
    assert result.exit_code == 2 and "does not exist" in result.output


def test_an_impossible_out_is_one_line(tmp_path):
    (tmp_path / "blocker").write_text("")
    result = run("data", "make", "example1", "--out", str(tmp_path / "blocker" / "d.npz"))
    assert result.exit_code == 1 and "Traceback" not in result.output  # the file system refused: status 1
    assert "a file is in the way" in result.output.strip().splitlines()[-1]


def test_an_out_without_the_npz_suffix_holds_the_data(tmp_path):
    # the data went to a hidden .ex1.<hex>.tmp.npz and ex1 was left empty, with exit status 0
    result = run("data", "make", "example1", "--out", str(tmp_path / "ex1"), "--set", "n=4")
    assert result.exit_code == 0, result.output
    assert [p.name for p in tmp_path.iterdir()] == ["ex1"]
    assert torch.equal(TokenSelectionData.load(tmp_path / "ex1").X, example1(n=4, seed=0).X)


def test_a_seed_given_as_a_setting_is_pointed_to_its_option(tmp_path):
    result = run("data", "make", "example1", "--out", str(tmp_path / "x.npz"), "--set", "seed=3")
    assert result.exit_code == 2 and "the seed is an option of its own; pass --seed 3" in result.output
    assert not (tmp_path / "x.npz").exists()
