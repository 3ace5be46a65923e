"""``attnlab explain``: train on the user's tokens and name the max-margin SVM the optimizer converges to.

Spec: implicit-bias-ngd §5, kq-nuclear-norm §4, mirror-descent-lp §5 (the candidate programs);
:func:`attnlab.explain.explain` does the work. Exit status 1 (after writing the outputs) when the run has not
converged in direction: no limit is named then.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from attnlab._errors import ValidationError  # not attnlab._validation, which loads torch
from attnlab.cli.main import main, user_errors, warnings_as_lines
from attnlab.cli.svm_cmd import read_head, read_selection

RECORD = "explain.json"  # the run's options and input files, written last: it marks a finished run
MAX_STEPS = 10**8  # ours: about half a day at the ~0.4 ms a step of a small file; a larger count is a typo
INTERRUPTED = (
    "interrupted: explain keeps no partial run (it writes only after training, and run again it trains from step "
    "0); run the command again, with fewer --steps for a shorter run"
)


@main.command("explain")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--param",
    type=click.Choice(["W", "KQ", "diag"]),
    default="W",
    show_default=True,
    help="Combined W, factored K Q^T, or diagonal diag(xi_k * xi_q).",
)
@click.option(
    "--optimizer",
    "--opt",
    "opt",
    default="ngd",
    show_default=True,
    metavar="SPEC",
    help="Optimizer string, e.g. ngd, ngd:momentum=0.9, md:1.5, sign:schedule=inv_sqrt; `attnlab optimizers` lists them.",
)
@click.option("--steps", type=int, default=1000, show_default=True)
@click.option("--lr", type=float, default=None, help="Step size when the optimizer string sets none [default: 0.1].")
@click.option("--loss", type=click.Choice(["exp", "logistic"]), default="exp", show_default=True)
@click.option(
    "--head",
    "head_kind",
    type=click.Choice(["linear", "relu"]),
    default="linear",
    show_default=True,
    help="linear: f = v^T X^T softmax(X W z); relu: f = v^T ReLU(V X^T softmax(X W z)), fixed (needs --V and a "
    "selection).",
)
@click.option(
    "--v",
    "v_source",
    default=None,
    metavar="FILE.npy|KEY",
    help="The linear head v (d,), or the ReLU head's output weights (m,) [default: the file's v; ones for relu]: "
    "a .npy file or a key of the data file.",
)
@click.option("--V", "V_source", default=None, metavar="FILE.npy|KEY", help="The ReLU head's value matrix V (m, d).")
@click.option(
    "--train-head",
    is_flag=True,
    help="Train the linear head v with W (from the file's v, or from 0 when it has none); the candidates are the "
    "trained head's.",
)
@click.option("--select", "select_text", default=None, help="Selected token per sequence, e.g. 0,2,1.")
@click.option(
    "--select-key", default=None, metavar="KEY", help="Read the selection (token indices or sets) from this key."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder (default runs/explain-<file stem>-<param>-<opt>-<hash of the other options and the input "
    "files>: one folder per distinct run, the same run again in its own).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace the outputs of another run in --out (refused without it; the same run again is rewritten).",
)
@user_errors(interrupted=INTERRUPTED)
def explain_cmd(
    path: str,
    param: str,
    opt: str,
    steps: int,
    lr: float | None,
    loss: str,
    head_kind: str,
    v_source: str | None,
    V_source: str | None,  # noqa: N803 (the spec's symbol)
    train_head: bool,
    select_text: str | None,
    select_key: str | None,
    out: str | None,
    overwrite: bool,
) -> None:
    """Train on the tokens in PATH (an .npz with X, y and optionally Z, v, select), then rank every candidate SVM.

    The head: the file's v or --v; --train-head trains v with W (a file with only X and y then works as it is);
    --head relu --V FILE.npy trains with a fixed ReLU head, whose SVMs need a selection (--select, --select-key or
    the file's select). The folder gets explain.json (this run's options and input files) last; a folder that holds
    another run is refused unless --overwrite. Exit status 1 when the run has not converged in direction (no
    candidate is named; the outputs are written), 2 on bad input (a diverged run included).
    """
    from attnlab.data import TokenSelectionData
    from attnlab.explain import explain
    from attnlab.optim import parse_optimizer

    spec = parse_optimizer(opt)  # once, and before loading anything: a bad --optimizer is refused first
    _check_options(opt, spec, steps, train_head)
    if select_text is not None and select_key is not None:
        raise ValidationError("pass either --select or --select-key, not both")
    if head_kind == "relu" and V_source is None:
        raise ValidationError("--head relu needs --V FILE.npy or --V KEY: its value matrix, of shape (m, d)")
    if head_kind == "relu" and train_head:
        raise ValidationError("--train-head trains a linear head v; the ReLU head is fixed: drop one of them")
    if head_kind == "linear" and V_source is not None:
        raise ValidationError("--V is the ReLU head's value matrix: add --head relu")
    data = TokenSelectionData.load(path)
    head = None
    if head_kind == "relu":
        head = _relu_head(data, V_source, v_source, path)
    elif v_source is not None:
        data = read_head(data, v_source, path)
    select = read_selection(data, path, select_text, select_key)
    options = {  # files by their absolute path: mine.npz and ./mine.npz are one run, in one default folder
        "data": os.path.abspath(path),
        "param": param,
        "optimizer": opt,
        "steps": steps,
        "lr": lr,
        "loss": loss,
        "head": head_kind,
        "v": _absolute_if_file(v_source),
        "V": _absolute_if_file(V_source),
        "train_head": train_head,
        "select": select_text,
        "select_key": select_key,
    }
    record = _run_record(options)
    name = f"explain-{Path(path).stem}-{param}-{opt.replace(':', '').replace(',', '-')}-{record['config_hash'][:8]}"
    folder = Path(out) if out is not None else Path("runs") / name
    _check_folder(folder, record, overwrite)  # a folder of another run is refused before training
    with warnings_as_lines():
        result = explain(data, param, spec, steps, lr, loss=loss, head=head, select=select, train_head=train_head)
    _write_outputs(folder, result, record, overwrite)
    if not result.converged:
        raise SystemExit(1)  # no limit is named: a script must not read the table as one


def _check_options(opt: str, spec: Any, steps: int, train_head: bool) -> None:
    """Refuse, before loading or training, a ``--steps`` out of range and an ``--opt`` that needs ``--train-head``."""
    if not 1 <= steps <= MAX_STEPS:
        raise ValidationError(
            f"--steps {steps} is out of range: pass 1 to {MAX_STEPS} (10^8, a bound of ours: so many steps take about "
            "half a day on a small file, and the direction of a run settles in thousands)"
        )
    if not train_head and dict(spec.options).get("head_lr") is not None:
        raise ValidationError(f"--opt {opt}: head_lr sets the step of a trained head; add --train-head or drop head_lr")


def _relu_head(data: Any, V_source: str, v_source: str | None, path: str) -> Any:  # noqa: N803 (the spec's V)
    """The fixed ReLU head of ``--V`` (``(m, d)``) and ``--v`` (``(m,)``, default ones), refused by the flag's name."""
    import torch

    from attnlab._io import read_array
    from attnlab._validation import check_tensor
    from attnlab.models import ReluHead

    sizes = {"d": data.d}
    V = check_tensor("--V", read_array("--V", V_source, path), "md", sizes, min_size={"m": 1})
    v = torch.ones(sizes["m"], dtype=torch.float64)
    if v_source is not None:
        v = check_tensor("--v", read_array("--v", v_source, path), "m", sizes)
    return ReluHead(V, v)


def _absolute_if_file(source: str | None) -> str | None:
    """``source`` (``FILE.npy`` or a key of the data file) with a file given by its absolute path."""
    return os.path.abspath(source) if source is not None and source.endswith(".npy") else source


def _run_record(options: dict[str, Any]) -> dict[str, Any]:
    """The ``explain.json`` of this run: its options and the contents of the files it reads, and their hash."""
    import attnlab
    from attnlab.runner.fingerprint import input_digests
    from attnlab.runner.store import config_hash

    files = [options["data"], *(options[k] for k in ("v", "V") if str(options[k]).endswith(".npy"))]
    inputs = input_digests(files)
    digest = config_hash({"options": options, "inputs": inputs})
    return {
        "experiment": "explain",
        "config_hash": digest,
        "options": options,
        "inputs": inputs,
        "attnlab": attnlab.__version__,
    }


def _check_folder(folder: Path, record: dict[str, Any], overwrite: bool) -> None:
    """Check, touching nothing and before the run trains, that ``folder`` may take the outputs of ``record``'s run: a
    folder whose ``explain.json`` says the same run is rewritten; one that holds another run (or other files) is
    refused unless ``overwrite``, so that no file of an earlier run (its ``v.npy``, its figures) is read as this
    run's."""
    from attnlab.runner.store import check_out

    owner = {key: record[key] for key in ("experiment", "config_hash")}
    check_out(folder, owner, overwrite=overwrite, record=RECORD)


def _write_outputs(folder: Path, result: Any, record: dict[str, Any], overwrite: bool) -> None:
    """Write the tables, figures and trained head of ``result`` into ``folder``, then ``explain.json``; print them.

    ``folder`` is emptied first when it holds another run and ``overwrite`` is set (after training: a run refused
    by its options leaves the earlier one as it was).
    """
    import matplotlib.pyplot as plt

    from attnlab._io import save_npy
    from attnlab.runner.store import prepare_out, save_figure, write_csv, write_json, write_parquet

    owner = {key: record[key] for key in ("experiment", "config_hash")}
    try:
        prepare_out(folder, owner, overwrite=overwrite, record=RECORD)
    except BaseException:
        plt.close(result.figure)
        raise
    write_parquet(folder / "explain.parquet", result.table)
    write_csv(folder / "explain.csv", result.table)
    write_parquet(folder / "trajectory.parquet", result.trajectory)
    figures = save_figure(result.figure, folder / "explain")
    plt.close(result.figure)
    click.echo(result.table.to_string(index=False, float_format=lambda x: f"{x:.3e}"))
    for reason in result.skipped:
        click.echo(f"skipped {reason}")
    if result.v is not None:  # the trained head, for svm --v or a later run
        save_npy(folder / "v.npy", result.v.numpy())
        click.echo(f"trained head v written to {folder / 'v.npy'}")
    else:  # never left from an earlier run, where a later --v out/v.npy would read it as this run's head
        (folder / "v.npy").unlink(missing_ok=True)
    click.echo(result.verdict)
    final = {"converged": bool(result.converged), "closest": result.closest}
    write_json(folder / RECORD, {**record, "result": final})  # last: it marks a finished run
    click.echo(
        f"wrote {folder / 'explain.parquet'}, explain.csv, trajectory.parquet, "
        f"{', '.join(p.name for p in figures)}{', v.npy' * (result.v is not None)}, explain.json in {folder}"
    )
