"""``attnlab show NAME``: an experiment's settings, every config field with its type, default and meaning."""

from __future__ import annotations

import click

from attnlab.cli.main import main, user_errors


def settings_text(name: str, *, fields: list[str] | None = None) -> str:
    """The header line and the settings table of experiment ``name`` (only ``fields``' rows, when given)."""
    from attnlab.cli.settings import settings, settings_table
    from attnlab.experiments import get_experiment

    experiment = get_experiment(name)
    rows = settings(experiment.config_type, dict(experiment.quick))
    if fields:
        rows = [row for row in rows if row.name in fields]
    head = f"{experiment.name} ({experiment.paper}): {experiment.summary}"
    note = (
        "default by: ours where the paper's number was lost (labelled in every output), else the paper's. "
        f"Change a field with `attnlab run {experiment.name} --set FIELD=VALUE`; --quick uses the quick column."
    )
    return f"{head}\n\n{settings_table(rows)}\n\n{note}"


@main.command("show")
@click.argument("name")
@user_errors
def show_cmd(name: str) -> None:
    """Print every setting of the experiment NAME: type, default, quick value, whose default, and meaning.

    Exit status 2 for an unknown NAME.
    """
    click.echo(settings_text(name))
