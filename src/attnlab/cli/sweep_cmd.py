"""``attnlab sweep``: run a grid or list of runs from a YAML file, resumably, on any executor."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from attnlab.cli.main import main, user_errors


@main.command("sweep")
@click.argument("sweep_file", type=click.Path(dir_okay=False))
@click.option(
    "--executor",
    type=click.Choice(["inprocess", "pool", "ray"]),
    default="inprocess",
    show_default=True,
    help="inprocess: batched in this process; pool: local worker processes; ray: a Ray cluster.",
)
@click.option("--address", default=None, help="Ray cluster address (ray only; default: start a local cluster).")
@click.option("--workers", type=int, default=None, help="Pool size (pool only; default: CPU cores).")
@click.option(
    "--batch-size", type=int, default=None, help="Most runs per batched call (inprocess only) [default: 256]."
)
@click.option(
    "--out", type=click.Path(file_okay=False), default=None, help="Results folder (default runs/<file stem>)."
)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@user_errors
def sweep_cmd(
    sweep_file: str,
    executor: str,
    address: str | None,
    workers: int | None,
    batch_size: int | None,
    out: str | None,
    no_progress: bool,
) -> None:
    """Run every unfinished run of SWEEP_FILE (YAML: task, base, grid, list, repeats).

    Finished runs are skipped, so rerunning a stopped sweep finishes it. Each run writes its table and
    record.json under OUT/runs/<label>-<config hash>/, and OUT/index.parquet lists every run with its status.
    Exit status 1 when a run failed, 2 on a bad SWEEP_FILE or an option of another executor (--workers is the
    pool's, --address Ray's, --batch-size inprocess's).
    """
    import attnlab.tasks  # noqa: F401  (registers attnlab's sweep tasks: experiment, batched-train)
    from attnlab.runner import load_sweep, make_executor, run_sweep

    spec = load_sweep(sweep_file, argument="SWEEP_FILE")
    root = Path(out) if out is not None else Path("runs") / Path(sweep_file).stem
    result = run_sweep(
        spec,
        root,
        make_executor(executor, workers=workers, address=address, batch_size=batch_size),
        progress=not no_progress,
    )
    counts = result.index["status"].value_counts()
    others = "".join(f", {counts[s]} {s}" for s in ("diverged", "running", "pending") if counts.get(s, 0))
    click.echo(
        f"{len(result.index)} runs: {counts.get('done', 0)} done ({len(result.index) - result.ran} were already), "
        f"{counts.get('failed', 0)} failed{others}; index in {root / 'index.parquet'}"
    )
    for row in result.failed.itertuples():
        last = row.error.strip().splitlines()[-1] if row.error.strip() else "unknown error"
        click.echo(f"  failed: {row.run_dir}: {last}", err=True)
    if len(result.failed):
        sys.exit(1)
