"""``attnlab reproduce``: every named experiment (or one paper's), then a static HTML report."""

from __future__ import annotations

import sys

import click

from attnlab.cli.main import main, user_errors


@main.command("reproduce")
@click.option(
    "--paper",
    default="all",
    show_default=True,
    help="A paper's spec stem (kq-nuclear-norm: all its experiments), a group of experiments, the part of their "
    "names before the first dot (kq-nuclear: kq-nuclear.x1, ...; a name without a dot, flagship, is a group of one), "
    "or 'all'. Another experiment by its full name (kq-nuclear.x1) is refused: `attnlab run NAME` runs it.",
)
@click.option("--quick", is_flag=True, help="CI-sized settings.")
@click.option("--out", type=click.Path(file_okay=False), default="report", show_default=True, help="Report folder.")
@click.option("--executor", type=click.Choice(["inprocess", "pool", "ray"]), default="inprocess", show_default=True)
@click.option("--workers", type=int, default=None, help="Pool size (pool only; default: CPU cores).")
@click.option("--address", default=None, help="Ray cluster address (ray only; default: start a local cluster).")
@click.option(
    "--fresh",
    is_flag=True,
    help="Rerun every experiment. Without it, a run finished in OUT by the same code, config and library versions "
    "is reused; any other is computed again.",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Set every experiment's seed field to this (first_seed, the first of its data sets, where it has one, else "
    "seed): the same reproduction on other draws. Experiments without one are left out.",
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@user_errors
def reproduce_cmd(
    paper: str,
    quick: bool,
    out: str,
    executor: str,
    workers: int | None,
    address: str | None,
    fresh: bool,
    seed: int | None,
    no_progress: bool,
) -> None:
    """Run the experiments and write OUT/index.html: figures next to theory checks, configs and versions.

    Each experiment line says "computed now" or "reused from <time, commit>": a run finished in OUT is reused
    only when its files are intact and its code, config and library versions are the current ones.
    An experiment that raises is shown in the report with its traceback; the others still run. Exit status 1
    when a theory check failed or an experiment did not finish (it raised, or its stored run is damaged;
    observations that disagree with a paper are reported, not failures), 2 on bad input (an unknown --paper, one
    experiment's dotted full name as --paper, an --out of other files, --workers without --executor pool, --address
    without --executor ray). With
    --seed S, every experiment with a seed field runs at seed S, the others are named and left out.
    """
    from attnlab.runner import make_executor
    from attnlab.runner.sweep import check_out

    check_out(out, "--out", writer="reproduce")  # before any run: a folder of other files is refused
    chosen = make_executor(executor, workers=workers, address=address)  # first: a pool's server imports meanwhile
    from attnlab.report import reproduce

    summary = reproduce(
        out,
        paper=paper,
        quick=quick,
        executor=chosen,
        fresh=fresh,
        progress=not no_progress,
        seed=seed,
    )
    for entry in summary.entries:
        if entry.status == "failed":
            click.echo(f"  [ERROR] {entry.name}: raised an error (traceback in the report)")
        elif entry.status != "done":
            click.echo(f"  [{entry.status.upper()}] {entry.name}: {entry.outcome}")
        else:
            mark = "PASS" if entry.counts.ok else "FAIL"
            click.echo(f"  [{mark}] {entry.name}: {entry.counts.describe()}; {entry.origin}")
    reused = sum(e.origin.startswith("reused") for e in summary.entries)
    click.echo(
        f"{summary.counts.describe()}; {len(summary.errors)} of {len(summary.entries)} experiments did not finish"
        f"{' (' + summary.unfinished + ')' if summary.errors else ''}; "
        f"{reused} reused from earlier runs of the same code and config (--fresh recomputes them); "
        f"report: {summary.path}"
    )
    if seed is not None:
        from attnlab.experiments import list_experiments

        ran = {entry.name for entry in summary.entries}  # reproduce() left out the experiments with no seed field
        unseeded = [e.name for e in list_experiments(paper) if e.name not in ran]
        click.echo(f"left out at --seed {seed} (no seed field): {', '.join(unseeded) or 'none'}")
    if not summary.ok:
        sys.exit(1)
