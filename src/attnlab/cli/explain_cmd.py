"""``attnlab explain``: train on the user's tokens and name the max-margin SVM the optimizer converges to.

Spec: implicit-bias-ngd §5, kq-nuclear-norm §4, mirror-descent-lp §5 (the candidate programs);
:func:`attnlab.explain.explain` does the work. Exit status 1 (after writing the outputs) when the run has not
converged in direction: no limit is named then.
"""

from __future__ import annotations

from pathlib import Path

import click

from attnlab.cli.main import main, user_errors


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
    help="Optimizer, e.g. ngd, ngd:momentum=0.9, polyak:max_step=5, md:1.5 (l_p mirror descent); see attnlab.optim.spec.",
)
@click.option("--steps", type=int, default=1000, show_default=True)
@click.option("--lr", type=float, default=None, help="Step size when the optimizer string sets none [default: 0.1].")
@click.option("--loss", type=click.Choice(["exp", "logistic"]), default="exp", show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder (default runs/explain-<file stem>-<param>-<opt>).",
)
@user_errors
def explain_cmd(path: str, param: str, opt: str, steps: int, lr: float | None, loss: str, out: str | None) -> None:
    """Train on the tokens in PATH (an .npz with X, y, v and optionally Z, select), then rank every candidate SVM.

    Exit status 1 when the run has not converged in direction (no candidate is named; the outputs are written), 2
    on bad input (a diverged run included).
    """
    import matplotlib.pyplot as plt

    from attnlab._io import make_dir
    from attnlab.data import TokenSelectionData
    from attnlab.explain import explain
    from attnlab.optim import parse_optimizer
    from attnlab.runner.store import save_figure, write_csv, write_parquet

    spec = parse_optimizer(opt)  # once, and before loading anything: a bad --optimizer is refused first
    data = TokenSelectionData.load(path)
    result = explain(data, param, spec, steps, lr, loss=loss)
    default = Path("runs") / f"explain-{Path(path).stem}-{param}-{opt.replace(':', '').replace(',', '-')}"
    folder = make_dir(Path(out) if out is not None else default)
    write_parquet(folder / "explain.parquet", result.table)
    write_csv(folder / "explain.csv", result.table)
    write_parquet(folder / "trajectory.parquet", result.trajectory)
    figures = save_figure(result.figure, folder / "explain")
    plt.close(result.figure)
    click.echo(result.table.to_string(index=False, float_format=lambda x: f"{x:.3e}"))
    for reason in result.skipped:
        click.echo(f"skipped {reason}")
    click.echo(result.verdict)
    click.echo(
        f"wrote {folder / 'explain.parquet'}, explain.csv, trajectory.parquet, "
        f"{', '.join(p.name for p in figures)} in {folder}"
    )
    if not result.converged:
        raise SystemExit(1)  # no limit is named: a script must not read the table as one
