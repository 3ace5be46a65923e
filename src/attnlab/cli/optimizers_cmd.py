"""``attnlab optimizers``: every optimizer name of the registry, with its aliases and options.

Spec: the optimizer registry (:mod:`attnlab.optim.registry`), which the ``--optimizer`` option of ``explain``, the
``optimizer`` key of a sweep and every Python front door read.
"""

from __future__ import annotations

import click

from attnlab.cli.main import main, user_errors


@main.command("optimizers")
@user_errors
def optimizers_cmd() -> None:
    """List every optimizer name (the registry's), its aliases, options and defaults.

    Exit status 0.
    """
    from attnlab.optim import registry

    click.echo(registry.table().replace("``", ""))
