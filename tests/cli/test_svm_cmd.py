"""``attnlab svm``: prints and writes the solution of the library call, and refuses bad input with a message."""

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.data import TokenSelectionData
from attnlab.svm import attention_svm


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    return TokenSelectionData(torch.randn(4, 3, 4, generator=g), y=[1, -1, 1, -1], v=torch.randn(4, generator=g))


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize(
    ("norm_text", "norm"), [("fro", "fro"), ("nuc", "nuc"), ("l1", 1.0), ("1.5", 1.5), ("l1-diag", "l1-diag")]
)
def test_writes_the_library_solution(tmp_path, data, norm_text, norm):
    if norm == "l1-diag":  # d > n (T - 1), so that the diagonal program is feasible (kq-nuclear-norm §6)
        g = torch.Generator().manual_seed(0)
        X, Z = torch.randn(2, 3, 6, generator=g), torch.randn(2, 6, generator=g)
        data = TokenSelectionData(X, Z, [1, -1], select=[0, 0])
    src, out = tmp_path / "d.npz", tmp_path / "sol.npz"
    data.save(src)
    result = invoke("svm", src, "--norm", norm_text, "--out", out)
    assert result.exit_code == 0, result.output
    sol = attention_svm(data, norm)
    with np.load(out) as f:
        np.testing.assert_allclose(f["W"], sol.W.numpy(), atol=1e-12)  # same solver, same program: same numbers
        assert float(f["margin"]) == pytest.approx(sol.margin, abs=1e-12)
        assert str(f["status"]) == "optimal"
        assert [tuple(r) for r in f["support"].tolist()] == list(sol.support)
    assert "status        optimal" in result.output
    assert "support (i:t) " + " ".join(f"{i}:{t}" for i, t in sol.support) in result.output
    assert not list(tmp_path.glob(".*tmp*"))  # the atomic writer left no temporary file


@pytest.mark.parametrize("name", ["sol.NPZ", "sol"])
def test_an_out_without_the_npz_suffix_holds_the_solution(tmp_path, data, name):
    # np.savez(path) wrote to path + ".npz" and renamed the empty temp file onto --out
    src, out = tmp_path / "d.npz", tmp_path / name
    data.save(src)
    result = invoke("svm", src, "--out", out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["d.npz", name])
    with np.load(out, allow_pickle=False) as f:
        np.testing.assert_allclose(f["W"], attention_svm(data, "fro").W.numpy(), atol=1e-12)  # same program


def test_select_from_option_and_from_key(tmp_path, data):
    src = tmp_path / "d.npz"
    np.savez(src, X=data.X.numpy(), y=data.y.numpy(), v=data.v.numpy(), alpha=np.array([1, 0, 2, 1]))
    by_option = invoke("svm", src, "--select", "1,0,2,1")
    by_key = invoke("svm", src, "--select-key", "alpha")
    assert by_option.exit_code == 0 and by_key.exit_code == 0, by_option.output + by_key.output
    assert "selected      1,0,2,1" in by_option.output
    assert by_option.output == by_key.output


def test_infeasible_data_exit_non_zero_with_a_message(tmp_path):
    X = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]])
    src = tmp_path / "d.npz"
    np.savez(src, X=X, Z=np.ones((2, 2)), y=np.array([1.0, 1.0]), select=np.array([0, 1]))
    result = invoke("svm", src, "--out", tmp_path / "sol.npz")
    assert result.exit_code == 2
    assert "error: attention SVM (norm='fro', n=2, T=2, d=2) is infeasible" in result.output
    assert not (tmp_path / "sol.npz").exists()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--norm", "l2"], "--norm must be one of fro, nuc, l1"),
        (["--norm", "0.5"], "--norm 0.5: an l_p norm needs p >= 1"),
        (["--select", "0,a"], "--select must be comma-separated token indices"),
        (["--select-key", "nope"], "--select-key 'nope' is not in"),
        (["--select", "0,0,0,0", "--select-key", "X"], "either --select or --select-key"),
    ],
)
def test_bad_options_are_named(tmp_path, data, args, match):
    src = tmp_path / "d.npz"
    data.save(src)
    result = invoke("svm", src, *args)
    assert result.exit_code == 2 and match in result.output


def test_an_impossible_out_is_one_line(tmp_path, data):
    data.save(tmp_path / "d.npz")
    (tmp_path / "blocker").write_text("")
    result = invoke("svm", tmp_path / "d.npz", "--out", tmp_path / "blocker" / "w.npz")
    assert result.exit_code == 1 and "Traceback" not in result.output  # the file system refused: status 1
    assert f"error: cannot write '{tmp_path / 'blocker' / 'w.npz'}': File exists" in result.output
    assert "a file is in the way" in result.output


@pytest.mark.parametrize("command", [["svm"], ["data", "check"]])
def test_a_text_file_given_as_data_is_one_line(tmp_path, command):
    (tmp_path / "d.npz").write_text("not an archive")
    result = invoke(*command, tmp_path / "d.npz")
    assert result.exit_code == 2 and "Traceback" not in result.output
    expected = "is not an .npz archive (a zip of .npy arrays); save the arrays with numpy.savez"
    assert result.output.strip() == f"error: data file '{tmp_path / 'd.npz'}' {expected}"


def test_token_sets_stored_in_the_file_are_solved_as_sets(tmp_path, data):
    """A data file whose select is an (n, T) mask: the set-direction program, written with its sets."""
    sets = [[0, 2], [1], [0, 1], [2]]
    src, out = tmp_path / "d.npz", tmp_path / "sol.npz"
    data.with_(select=sets).save(src)
    result = invoke("svm", src, "--out", out)
    assert result.exit_code == 0, result.output
    assert "sets (i:O_i)  0:0,2 1:1 2:0,1 3:2" in result.output
    expected = attention_svm(data, "fro", select=sets)
    with np.load(out) as f:
        np.testing.assert_allclose(f["W"], expected.W.numpy(), atol=1e-12)
        assert f["select"].shape == (4, 3) and f["select"].dtype == bool


def test_a_file_of_x_and_y_takes_its_head_from_a_npy_file_or_a_key(tmp_path):
    import numpy as np

    from attnlab.data import example1

    data = example1(n=3, T=3, d=6, seed=1)
    np.savez(tmp_path / "xy.npz", X=data.X.numpy(), y=data.y.numpy(), head=data.v.numpy())
    np.save(tmp_path / "head.npy", data.v.numpy())
    expected = ",".join(map(str, data.optimal_tokens().tolist()))  # independent: argmax_t y v^T x_t
    for source in (str(tmp_path / "head.npy"), "head"):
        result = CliRunner().invoke(main, ["svm", str(tmp_path / "xy.npz"), "--v", source])
        assert result.exit_code == 0, result.output
        assert f"selected      {expected}" in result.output
    missing = CliRunner().invoke(main, ["svm", str(tmp_path / "xy.npz")])
    assert missing.exit_code == 2 and "holds no selection and no head v: pass --select" in missing.output
    wrong = CliRunner().invoke(main, ["svm", str(tmp_path / "xy.npz"), "--v", str(tmp_path / "none.npy")])
    assert wrong.exit_code == 2 and "none.npy': no such file" in wrong.output


def test_a_complex_data_file_is_refused_not_solved_on_its_real_part(tmp_path, data):
    src = tmp_path / "c.npz"
    np.savez(src, X=data.X.numpy() + 0.5j, y=data.y.numpy(), v=data.v.numpy())
    result = invoke("svm", src)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"error: data file '{src}': X is complex (complex128)" in result.output


def test_a_head_the_stored_selection_overrides_is_said_to_be_unused(tmp_path, data):
    src = tmp_path / "d.npz"
    data.with_(select=[0, 1, 2, 0]).save(src)
    np.save(tmp_path / "v.npy", -data.v.numpy())
    result = invoke("svm", src, "--v", tmp_path / "v.npy")
    assert result.exit_code == 0 and "warning: --v is not used" in result.output


def test_library_warnings_are_one_line_each_once(tmp_path, data):
    X, best = data.X.clone(), int(data.optimal_tokens()[0])
    X[0, (best + 1) % 3] = X[0, best]  # a tie of the optimal token in sequence 0
    src = tmp_path / "d.npz"
    data.with_(X=X).save(src)
    result = invoke("explain", src, "--steps", "20", "--out", tmp_path / "run")
    lines = [line for line in result.output.splitlines() if "not unique" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: the optimal token is not unique in sequences [0]")
