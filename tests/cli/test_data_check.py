"""`attnlab data check`: what each generator is meant to satisfy holds for its data; --strict sets the exit code."""

import numpy as np
import pytest
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.cli.data_cmd import _PAPER_OF, INTENTS
from attnlab.data import ASSUMPTIONS, GENERATORS, TokenSelectionData, check_assumptions, dm, example1, scores_equal
from attnlab.svm import set_direction_svm


def run(*args):
    return CliRunner().invoke(main, list(args))


def _data(name, **kwargs):
    made = GENERATORS[name](**kwargs)
    return getattr(made, "data", made)


def test_the_tables_cover_every_generator_and_assumption():
    assert set(INTENTS) == set(GENERATORS)
    assert set(_PAPER_OF) == set(ASSUMPTIONS)
    for intent in INTENTS.values():
        assert set(intent.built) | set(intent.conditional) <= set(ASSUMPTIONS)


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_what_a_generator_is_built_to_satisfy_holds_for_its_data(name, seed):
    kwargs = {} if name == "joint_toy" else {"seed": seed}  # the toy set is fixed
    built = INTENTS[name].built
    if built:
        reports = check_assumptions(_data(name, **kwargs), which=list(built))
        assert all(r.holds for r in reports), [str(r) for r in reports if not r.holds]


@pytest.mark.parametrize(
    ("name", "assumption", "fails", "holds"),
    [
        # the conditional claims fail and hold where their text says; A1: d >> (n T)^2 and rho^2 << sigma^2
        ("example1", "A1", {}, {"n": 2, "T": 2, "d": 20000, "rho": 0.5}),
        ("dm", "A1", {}, {"n": 2, "d": 20000}),
        ("scores_equal", "A3", {"n": 8}, {}),  # a gap of about T log n: gap 3 covers n = 2, not n = 8
        ("aligned_pairs", "A3", {}, {"score": 10.0}),  # raise score until it holds
    ],
)
def test_a_conditional_assumption_fails_and_holds_as_its_text_says(name, assumption, fails, holds):
    assert assumption in INTENTS[name].conditional
    (bad,) = check_assumptions(_data(name, **fails), which=[assumption])
    (good,) = check_assumptions(_data(name, **holds), which=[assumption])
    assert not bad.holds and good.holds


def test_the_cli_default_is_check_assumptions_default(tmp_path):
    for data in (example1(n=4, T=3, d=16), dm(n=4, d=16)):
        path = data.save(tmp_path / "d.npz")
        out = run("data", "check", str(path)).output
        expected = [str(r) for r in check_assumptions(TokenSelectionData.load(path))]
        assert [line for line in out.splitlines() if line.startswith("[")] == expected


def test_readme_example1_fails_a1_a3_a4_and_says_why(tmp_path):
    path = example1(d=64).save(tmp_path / "ex1.npz")
    plain = run("data", "check", str(path))
    assert plain.exit_code == 0 and "2/5 assumptions hold" in plain.output
    assert "sufficient conditions for its theorems, not necessary ones" in plain.output
    assert "--strict exits 1 when one fails" in plain.output
    mine = run("data", "check", str(path), "--generator", "example1")
    assert "example1 satisfies it by construction" in mine.output
    assert "example1 needs d >> (n T)^2 log(n T)" in mine.output and "2/3 assumptions of example1 hold" in mine.output
    assert "A3" not in mine.output and "A4" not in mine.output  # the K,Q paper's assumptions are not example1's
    assert run("data", "check", str(path), "--generator", "example1", "--strict").exit_code == 1  # A1 fails


def test_strict_exits_0_when_every_assumption_of_the_generator_holds(tmp_path):
    good = scores_equal().save(tmp_path / "good.npz")
    result = run("data", "check", str(good), "--generator", "scores_equal", "--strict")
    assert result.exit_code == 0 and "3/3 assumptions of scores_equal hold" in result.output
    bad = scores_equal(n=8).save(tmp_path / "bad.npz")
    result = run("data", "check", str(bad), "--generator", "scores_equal", "--strict")
    assert result.exit_code == 1 and "raise gap until it holds" in result.output


def test_a_generator_whose_paper_assumes_nothing_never_fails_strict(tmp_path):
    path = _data("unit_gaussian").save(tmp_path / "u.npz")
    result = run("data", "check", str(path), "--generator", "unit_gaussian", "--strict")
    assert result.exit_code == 0, result.output
    assert "not an assumption of unit_gaussian's paper (mirror-descent-lp §6)" in result.output
    assert "states no assumption that these checks cover" in result.output


def test_an_unknown_generator_is_refused_with_the_choices(tmp_path):
    result = run("data", "check", str(tmp_path / "x.npz"), "--generator", "nope")
    assert result.exit_code == 2 and "'nope' is not one of" in result.output and "aligned_pairs" in result.output


# --- a data set that stores token sets (multi-token §2): sizes, degenerate sequences named, feasibility ----------


def _sets_file(tmp_path, name, X, Z, sets):
    """An .npz as a user writes it: numpy.savez, so that a degenerate selection reaches the check unrefused."""
    path = tmp_path / f"{name}.npz"
    np.savez(path, X=X, Z=Z, y=np.array([1.0, -1.0]), select=np.array(sets, dtype=bool))
    return str(path)


X3 = np.tile(np.eye(3), (2, 1, 1))  # two sequences of the three unit tokens
Z3 = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


def test_token_sets_are_counted_and_a_feasible_selection_is_certified(tmp_path):
    path = _sets_file(tmp_path, "good", X3, Z3, [[1, 1, 0], [0, 1, 0]])
    result = run("data", "check", path, "--strict", "--which", "condition1")
    lines = result.output.splitlines()
    assert lines[0] == "token sets: 2 sequences of T=3 tokens; sequences by set size: 1 token: 1, 2 tokens: 1"
    assert lines[1] == "  sequences keeping two or more tokens: 0"
    # a second solver's answer: the direction program's own minimum norm, solved here through the library
    expected = set_direction_svm(TokenSelectionData(X3, Z3, [1, -1]), [[0, 1], [1]])
    assert lines[2].startswith(
        f"feasible: the direction program separates every set with margin 1 at ||W||_F = {expected.norm_value:.4g}"
    )
    assert result.exit_code == 0, result.output


def test_a_whole_sequence_set_beside_others_is_named_and_adds_equalities_only(tmp_path):
    path = _sets_file(tmp_path, "whole", X3, Z3, [[1, 1, 0], [1, 1, 1]])
    result = run("data", "check", path, "--strict", "--which", "condition1")
    lines = result.output.splitlines()
    assert lines[2] == (
        "  sequences whose set is the whole sequence (all 3 tokens): 1; they contribute equal logits only (no "
        "margin), as in the source's program"
    )
    # the library's program with the same sets: sequence 0's margins and sequence 1's equalities
    with pytest.warns(UserWarning, match=r"sequences \[1\] hold the whole sequence"):
        expected = set_direction_svm(TokenSelectionData(X3, Z3, [1, -1]), [[0, 1], [0, 1, 2]])
    assert lines[3].startswith(
        f"feasible: the direction program separates every set with margin 1 at ||W||_F = {expected.norm_value:.4g}"
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("name", "X", "Z", "sets", "expected"),
    [
        (
            "whole",
            X3,
            Z3,
            [[1, 1, 1], [1, 1, 1]],
            "degenerate: the sets of sequences 0, 1 (every sequence) hold the whole sequence (all 3 tokens)",
        ),
        (
            "tie",
            np.concatenate([X3[:1, [0, 1, 0]], X3[1:]]),  # sequence 0's token 2 equals its token 0
            Z3,
            [[1, 0, 0], [0, 1, 0]],
            "degenerate: sequence 0 has a tie, token 0 (in) = token 2 (out)",
        ),
        (
            "zero query",
            X3,
            np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
            [[1, 0, 0], [0, 1, 0]],
            "degenerate: sequence 1 has a zero query z_i",
        ),
        (
            "infeasible",
            X3,
            np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]),  # one query: token 0 above 1 in sequence 0, below in 1
            [[1, 0, 0], [0, 1, 1]],
            "infeasible: set-direction SVM",
        ),
    ],
)
def test_a_degenerate_or_infeasible_selection_is_named_and_fails_strict(tmp_path, name, X, Z, sets, expected):
    path = _sets_file(tmp_path, name.replace(" ", "_"), X, Z, sets)
    relaxed = run("data", "check", path, "--which", "condition1")
    assert relaxed.exit_code == 0, relaxed.output  # reported, not refused
    assert any(line.startswith(expected) for line in relaxed.output.splitlines()), relaxed.output
    assert "feasible: " not in relaxed.output.replace("infeasible: ", "")
    assert run("data", "check", path, "--strict", "--which", "condition1").exit_code == 1


def test_a_mask_of_the_wrong_shape_is_refused_with_its_shape(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, X=X3, Z=Z3, y=np.array([1.0, -1.0]), select=np.ones((2, 4), dtype=bool))
    result = run("data", "check", str(path))
    assert result.exit_code == 2
    assert "select as a mask of token sets must be a 0/1 array of shape (2, 3), got shape (2, 4)" in result.output


def test_cross_attention_data_are_checked_without_the_aligned_geometry_a4(tmp_path):
    square = example1(n=4, T=3, d=8, seed=0)
    queries = np.random.default_rng(0).standard_normal((4, 5))  # d_q = 5 != d = 8: cross-attention
    data = TokenSelectionData(square.X, queries, square.y, square.v)
    path = data.save(tmp_path / "cross.npz")
    out = run("data", "check", str(path))
    assert out.exit_code == 0, out.output
    checked = [line for line in out.output.splitlines() if line.startswith("[")]
    assert checked == [str(r) for r in check_assumptions(data)]
    assert len(checked) == 4 and not any("A4" in line for line in checked)
    assert len(check_assumptions(square)) == 5  # A4 stays for self-attention data


def test_an_assumption_named_twice_is_checked_once(tmp_path):
    path = example1(n=4, T=3, d=16).save(tmp_path / "d.npz")
    twice = run("data", "check", str(path), "--which", "A1", "--which", "A2", "--which", "A1")
    once = run("data", "check", str(path), "--which", "A1", "--which", "A2")
    assert twice.exit_code == once.exit_code == 0, twice.output
    assert twice.output == once.output  # the same reports, in the order first given
    assert "/2 assumptions hold" in twice.output


@pytest.mark.parametrize("labels", [[True, True, True], [True, False, True]])
@pytest.mark.parametrize("command", [["data", "check"], ["svm"], ["explain", "--steps", "2"]])
def test_boolean_labels_are_refused_not_read_as_plus_one(tmp_path, labels, command):
    path = tmp_path / "ybool.npz"
    data = example1(n=3, T=3, d=8, seed=0)
    np.savez(path, X=data.X.numpy(), y=np.array(labels), v=data.v.numpy())
    result = run(*command, str(path), *(["--out", str(tmp_path / "out")] if command[0] == "explain" else []))
    assert result.exit_code == 2, result.output
    assert "y is boolean; labels must be the numbers -1 and +1" in result.output
    assert not (tmp_path / "out").exists()
