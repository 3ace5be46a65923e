"""``attnlab explain``: trains, names the closest SVM, writes the table and figure, refuses a bad --opt."""

import re
from pathlib import Path

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


def _xy_file(tmp_path):
    """A user's file with X and y only; its head, saved beside it, and the same data with the head inside."""
    import numpy as np

    data = example1(n=3, T=3, d=8, seed=0)
    np.savez(tmp_path / "xy.npz", X=data.X.numpy(), y=data.y.numpy(), v_true=data.v.numpy())
    np.save(tmp_path / "head.npy", data.v.numpy())
    data.save(tmp_path / "full.npz")
    return data


def test_the_head_comes_from_a_npy_file_or_a_key_of_the_data_file(tmp_path):
    _xy_file(tmp_path)
    tables = {}
    for name, args in {
        "file": ["xy.npz", "--v", "head.npy"],
        "key": ["xy.npz", "--v", "v_true"],
        "inside": ["full.npz"],
    }.items():
        args = [str(tmp_path / a) if a.endswith((".npz", ".npy")) else a for a in args]
        result = invoke("explain", *args, "--steps", 300, "--lr", 0.3, "--out", tmp_path / name)
        assert result.exit_code == 0, result.output
        tables[name] = pd.read_csv(tmp_path / name / "explain.csv")
    pd.testing.assert_frame_equal(tables["file"], tables["inside"])  # the same head, the same run
    pd.testing.assert_frame_equal(tables["key"], tables["inside"])
    bad = invoke("explain", tmp_path / "xy.npz", "--v", "nothere")
    assert bad.exit_code == 2 and "is neither a .npy file nor a key of" in bad.output and "v_true" in bad.output


def test_a_trained_head_is_written_and_a_relu_head_needs_its_matrix_and_a_selection(tmp_path):
    import numpy as np

    data = _xy_file(tmp_path)
    src = tmp_path / "xy.npz"
    trained = invoke("explain", src, "--train-head", "--steps", 200, "--out", tmp_path / "t")
    assert trained.exit_code in (0, 1), trained.output  # joint training converges in direction slowly
    v = np.load(tmp_path / "t" / "v.npy")
    assert v.shape == (8,) and np.abs(v).max() > 0  # trained from 0
    V = np.random.default_rng(0).standard_normal((5, 8))
    np.save(tmp_path / "V.npy", V)
    relu = invoke(
        "explain",
        src,
        "--head",
        "relu",
        "--V",
        tmp_path / "V.npy",
        "--select",
        "0,0,0",
        "--steps",
        200,
        "--out",
        tmp_path / "r",
    )
    assert relu.exit_code in (0, 1), relu.output
    table = pd.read_csv(tmp_path / "r" / "explain.csv", dtype={"select": str})
    assert table.set_index("candidate").at["fro", "select"] == "0,0,0"  # the SVMs of the selection given
    for args, message in (
        (["--head", "relu"], "--head relu needs --V FILE.npy"),
        (["--V", str(tmp_path / "V.npy")], "--V is the ReLU head's value matrix: add --head relu"),
        (["--head", "relu", "--V", str(tmp_path / "V.npy"), "--train-head"], "--train-head trains a linear head"),
        (["--head", "relu", "--V", str(tmp_path / "V.npy")], "head= trains with a fixed nonlinear head.*select="),
    ):
        result = invoke("explain", src, *args, "--steps", 5)
        assert result.exit_code == 2 and re.search(message, result.output), (args, result.output)
    del data


def test_another_runs_folder_is_refused_before_training_unless_overwrite(tmp_path):
    # a later run without --train-head left the earlier run's v.npy beside its own outputs, for a later
    # --v out/v.npy to read as this run's head; nothing recorded which options made the folder
    import json

    _xy_file(tmp_path)
    src, out = tmp_path / "xy.npz", tmp_path / "out"
    first = invoke("explain", src, "--train-head", "--steps", 20, "--out", out)
    assert first.exit_code in (0, 1), first.output
    recorded = json.loads((out / "explain.json").read_text())
    assert recorded["options"]["train_head"] is True and recorded["options"]["steps"] == 20
    assert list(recorded["inputs"]) == [str(src)] and (out / "v.npy").is_file()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    refused = invoke("explain", src, "--v", "v_true", "--steps", 20, "--out", out)
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert f"error: --out '{out}' already holds another run (explain, config " in refused.output
    assert "pass --overwrite to replace it" in refused.output
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # refused before training: untouched
    replaced = invoke("explain", src, "--v", "v_true", "--steps", 20, "--out", out, "--overwrite")
    assert replaced.exit_code in (0, 1), replaced.output
    assert not (out / "v.npy").exists()  # the earlier run's head is gone with the rest of it
    options = json.loads((out / "explain.json").read_text())["options"]
    assert options["train_head"] is False and options["v"] == "v_true"


def test_the_same_run_again_rewrites_its_folder_and_leaves_no_stale_head(tmp_path):
    import numpy as np

    _xy_file(tmp_path)
    src, out = tmp_path / "xy.npz", tmp_path / "out"
    first = invoke("explain", src, "--v", "v_true", "--steps", 20, "--out", out)
    assert first.exit_code in (0, 1), first.output
    (out / "v.npy").write_bytes(b"a head from elsewhere")  # the same run has no trained head: it must not stay
    again = invoke("explain", src, "--v", "v_true", "--steps", 20, "--out", out)
    assert again.exit_code == first.exit_code, again.output
    assert sorted(p.name for p in out.iterdir()) == [
        ".attnlab-run.json",  # whose folder it is, written before the run
        "explain.csv",
        "explain.json",
        "explain.parquet",
        "explain.pdf",
        "explain.png",
        "trajectory.parquet",
    ]
    other = example1(n=3, T=3, d=8, seed=1)  # other data in the same file, under the same options: another run
    np.savez(src, X=other.X.numpy(), y=other.y.numpy(), v_true=other.v.numpy())
    refused = invoke("explain", src, "--v", "v_true", "--steps", 20, "--out", out)
    assert refused.exit_code == 2 and "already holds another run (explain" in refused.output


def test_the_output_doc_names_every_candidate_and_file_explain_writes_for_token_sets(tmp_path):
    import numpy as np

    doc = (Path(__file__).resolve().parents[2] / "docs" / "cli" / "output.md").read_text()
    section = doc[doc.index("## attnlab explain") : doc.index("## attnlab svm")]
    data = example1(n=3, T=3, d=8, seed=0)
    sets = np.zeros((3, 3), dtype=bool)
    sets[np.arange(3), data.select.numpy()] = True
    sets[0, (int(data.select[0]) + 1) % 3] = True  # a set of two tokens: the token-set candidates join
    np.savez(tmp_path / "sets.npz", X=data.X.numpy(), y=data.y.numpy(), v=data.v.numpy(), select=sets)
    out = tmp_path / "out"
    result = invoke("explain", tmp_path / "sets.npz", "--opt", "md:1.5", "--steps", 20, "--out", out)
    assert result.exit_code in (0, 1), result.output
    candidates = pd.read_csv(out / "explain.csv")["candidate"].tolist()
    assert {"sets-fro", "sets-nuc", "fro", "nuc", "l1.5", "equivalence"} <= set(candidates), candidates
    for candidate in candidates:  # fro[0,2,1] and l<p> stand for their families
        named = (
            "`fro["
            if candidate.startswith("fro[")
            else ("`l<p>`" if re.fullmatch(r"l[0-9.]+|linf", candidate) else f"`{candidate}`")
        )
        assert named in section, f"docs/cli/output.md does not name the candidate {candidate}"
    for file in sorted(p.name for p in out.iterdir()):
        assert f"`{file}`" in section, f"docs/cli/output.md does not name the file {file}"
    assert "for a token-set file, always of the head's optimal tokens" in section  # not the file's token sets


def test_runs_of_other_options_get_default_folders_of_their_own(tmp_path, monkeypatch):
    # the README's two head variants, one after the other: both wrote runs/explain-<stem>-<param>-<opt>, so the
    # second was refused as "another run" (exit 2)
    monkeypatch.chdir(tmp_path)
    example1(n=3, T=3, d=8, seed=0).save("mine.npz")
    common = ("explain", "mine.npz", "--steps", 50, "--lr", 0.3)
    first = invoke(*common)
    second = invoke(*common, "--train-head")
    again = invoke("explain", "./mine.npz", *common[2:])  # the same run again (the file as typed aside): its folder
    assert second.exit_code in (0, 1), second.output  # 1: not converged in direction at 50 steps, still written
    assert first.exit_code == again.exit_code and first.exit_code in (0, 1), again.output
    folders = sorted(p.name for p in Path("runs").iterdir())
    assert len(folders) == 2 and all(re.fullmatch(r"explain-mine-W-ngd-[0-9a-f]{8}", f) for f in folders), folders
