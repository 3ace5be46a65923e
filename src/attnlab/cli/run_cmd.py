"""``attnlab list`` and ``attnlab run``: the named experiments."""

from __future__ import annotations

import sys

import click

from attnlab.cli.main import main, user_errors


@main.command("list")
@click.option("--paper", default=None, help="Only experiments of this paper (spec stem or name prefix).")
def list_cmd(paper: str | None) -> None:
    """List every named experiment, one line each, with its paper."""
    from attnlab.experiments import list_experiments

    for exp in list_experiments(paper):
        click.echo(f"{exp.name:<28} {exp.paper:<26} {exp.summary}")


@main.command("run")
@click.argument("name")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a config field (repeatable).")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Run directory (default runs/<name>-<hash>).")
@click.option("--overwrite", is_flag=True, help="Replace the outputs of another run in --out (refused without it).")
@click.option("--quick", is_flag=True, help="CI-sized settings.")
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
@user_errors
def run_cmd(name: str, sets: tuple[str, ...], out: str | None, overwrite: bool, quick: bool, no_progress: bool) -> None:
    """Run the experiment NAME; write its table, checks, record and figures."""
    from attnlab.experiments import run_experiment

    record = run_experiment(name, sets, quick=quick, out=out, progress=not no_progress, overwrite=overwrite)
    for row in record.checks.itertuples():
        if row.kind == "observation":
            mark = "AGREES" if row.passed else "DISAGREES"
            click.echo(f"  [{mark}] {row.claim}: measured {row.measured} (paper {row.predicted})")
        else:
            mark = "PASS" if row.passed else "FAIL"
            click.echo(f"  [{mark}] {row.claim}: measured {row.measured} (predicted {row.predicted}, tol {row.tolerance})")
    click.echo(f"{name}: {record.counts.describe()} in {record.seconds:.1f}s")
    click.echo(f"outputs in {record.out}")
    if not record.passed:
        sys.exit(1)
