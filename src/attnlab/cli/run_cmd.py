"""``attnlab list`` and ``attnlab run``: the named experiments."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from attnlab._errors import ValidationError
from attnlab.cli.main import main, user_errors

if TYPE_CHECKING:
    from attnlab.verify import RunRecord


@main.command("list")
@click.option(
    "--paper",
    default=None,
    help="Only experiments of this paper: its theory page's name (implicit-bias-ngd, docs/theory/implicit-bias-ngd.md) or an experiment name prefix (implicit-bias).",
)
@user_errors
def list_cmd(paper: str | None) -> None:
    """List every named experiment, one line each, with its paper.

    Exit status 0, 2 when --paper matches no experiment (the message lists the papers).
    """
    from attnlab.experiments.catalog import list_entries  # a table: importing the experiments takes seconds

    for exp in list_entries(paper):
        click.echo(f"{exp.name:<28} {exp.paper:<26} {exp.summary}")


@main.command("run")
@click.argument("name", required=False)
@click.option(
    "--config",
    "record_path",
    type=click.Path(),
    default=None,
    metavar="RECORD",
    help="Replay a run: the experiment, config, seed and --quick of its record.json (or run directory).",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a config field (repeatable).")
@click.option(
    "--out", type=click.Path(file_okay=False), default=None, help="Run directory (default runs/<name>-<hash>)."
)
@click.option("--overwrite", is_flag=True, help="Replace the outputs of another run in --out (refused without it).")
@click.option("--quick", is_flag=True, help="CI-sized settings.")
@click.option("--no-progress", is_flag=True, help="Hide progress bars.")
@user_errors
def run_cmd(
    name: str | None,
    record_path: str | None,
    sets: tuple[str, ...],
    out: str | None,
    overwrite: bool,
    quick: bool,
    no_progress: bool,
) -> None:
    """Run the experiment NAME (or replay the run of --config); write its table, checks, record and figures.

    `attnlab show NAME` lists the settings --set can change, with types, defaults and meanings. Exit status 1 when a
    theory check or a property failed (observations that disagree with a paper are reported, not failures), 2 on bad
    input (an unknown NAME, a --set the config refuses).
    """
    from attnlab.experiments import run_experiment

    if record_path is not None:
        record, name = _replay(name, record_path, sets, out, quick, not no_progress, overwrite)
    elif name is None:
        raise ValidationError("attnlab run needs an experiment NAME (see attnlab list) or --config RECORD")
    else:
        _check_settings(name, sets, quick)
        record = run_experiment(name, sets, quick=quick, out=out, progress=not no_progress, overwrite=overwrite)
    for row in record.checks.itertuples():
        mark = str(row.verdict).upper()
        if row.kind in ("observation", "exploration"):
            whose = "paper" if row.kind == "observation" else "ours"
            click.echo(f"  [{mark}] {row.claim}: measured {row.measured} ({whose} {row.predicted})")
        elif row.kind == "revision":
            click.echo(f"    [OLD READING, {mark}] {row.claim}: measured {row.measured} (predicted {row.predicted})")
        else:
            click.echo(
                f"  [{mark}] {row.claim}: measured {row.measured} (predicted {row.predicted}, tol {row.tolerance})"
            )
            if mark == "FINDING":
                click.echo(f"    a finding: the investigation is {row.investigation}")
    click.echo(f"{name}: {record.counts.describe()} in {record.seconds:.1f}s")
    click.echo(f"outputs in {record.out}")
    if not record.passed:
        sys.exit(1)


def _check_settings(name: str, sets: tuple[str, ...], quick: bool) -> None:
    """Build the config of ``--set``; a refusal comes with the settings table (the rows of the fields it names)."""
    import dataclasses
    import re

    from attnlab._overrides import OverrideError
    from attnlab.cli.show_cmd import settings_text
    from attnlab.experiments import get_experiment
    from attnlab.verify import make_config

    experiment = get_experiment(name)
    try:
        make_config(experiment, sets, quick)
    except ValidationError as err:
        fields = [f.name for f in dataclasses.fields(experiment.config_type)]
        if isinstance(err, OverrideError):
            named = [err.key] if err.key is not None else []
        else:  # refused by the config's own checks, whose message names the fields
            named = [f for f in fields if re.search(rf"\b{re.escape(f)}\b", str(err))]
        raise ValidationError(f"{err}\n\n{settings_text(name, fields=named or None)}") from None


def _replay(
    name: str | None,
    record_path: str,
    sets: tuple[str, ...],
    out: str | None,
    quick: bool,
    progress: bool,
    overwrite: bool,
) -> tuple[RunRecord, str]:
    """Rerun the recorded run of ``--config``; a NAME, when given, must be the recorded experiment."""
    from attnlab.experiments.registry import REGISTRY
    from attnlab.verify.replay import load_record, rerun

    recorded = load_record(record_path)["experiment"]
    if name is not None and name != recorded:
        raise ValidationError(f"--config {record_path} records experiment {recorded!r}, not {name!r}; drop NAME")
    if quick:
        raise ValidationError("--quick does not apply with --config: the record says whether the run was quick")
    return rerun(record_path, sets, registry=REGISTRY, out=out, progress=progress, overwrite=overwrite), recorded
