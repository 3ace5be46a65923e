"""``attnlab explain``: train on the user's tokens and name the max-margin SVM the optimizer converges to.

Spec: implicit-bias-ngd §5, kq-nuclear-norm §4, mirror-descent-lp §5 (the candidate programs);
:func:`attnlab.experiments.explain.explain` does the work.
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
    "--opt",
    default="ngd",
    show_default=True,
    metavar="gd|ngd|polyak|md:<p>",
    help="Optimizer; md:<p> is normalised l_p mirror descent, e.g. md:1.5.",
)
@click.option("--steps", type=int, default=1000, show_default=True)
@click.option("--lr", type=float, default=0.1, show_default=True, help="Step size (Polyak: its cap).")
@click.option("--loss", type=click.Choice(["exp", "logistic"]), default="exp", show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="Output folder (default runs/explain-<file stem>-<param>-<opt>).",
)
@user_errors
def explain_cmd(path: str, param: str, opt: str, steps: int, lr: float, loss: str, out: str | None) -> None:
    """Train on the tokens in PATH (an .npz with X, y, v and optionally Z, select), then rank every candidate SVM."""
    import matplotlib.pyplot as plt

    from attnlab._io import make_dir
    from attnlab.data import TokenSelectionData
    from attnlab.explain import explain, parse_opt
    from attnlab.runner.store import save_figure, write_csv, write_parquet

    parse_opt(opt)  # refuse a bad --opt before loading anything
    data = TokenSelectionData.load(path)
    result = explain(data, param, opt, steps, lr, loss=loss)
    default = Path("runs") / f"explain-{Path(path).stem}-{param}-{opt.replace(':', '')}"
    folder = make_dir(Path(out) if out is not None else default)
    write_parquet(folder / "explain.parquet", result.table)
    write_csv(folder / "explain.csv", result.table)
    write_parquet(folder / "trajectory.parquet", result.trajectory)
    figures = save_figure(result.figure, folder / "explain")
    plt.close(result.figure)
    click.echo(result.table.to_string(index=False, float_format=lambda x: f"{x:.3e}"))
    for reason in result.skipped:
        click.echo(f"skipped {reason}")
    click.echo(f"closest: {result.closest}")
    click.echo(
        f"wrote {folder / 'explain.parquet'}, explain.csv, trajectory.parquet, "
        f"{', '.join(p.name for p in figures)} in {folder}"
    )
