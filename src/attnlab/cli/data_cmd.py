"""``attnlab data make`` and ``attnlab data check``: the papers' data models as ``.npz`` files, and their assumptions."""

from __future__ import annotations

import dataclasses
import inspect
import sys
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any

import click

from attnlab._errors import ValidationError  # not attnlab._validation, which loads torch
from attnlab.cli.main import main, user_errors


def _parseable(annotation: Any) -> Any:
    """``A | B`` written as ``typing.Union[A, B]``, the form the ``--set`` parser reads."""
    if isinstance(annotation, types.UnionType):
        return typing.Union[typing.get_args(annotation)]  # noqa: UP007 (the parser matches typing.Union)
    return annotation


def _generator_overrides(func: Callable[..., Any], sets: Sequence[str]) -> dict[str, Any]:
    """Typed keyword arguments for ``func`` from ``["key=value", ...]``, read from its signature (``seed`` aside).

    An unknown key raises a :class:`ValidationError` that lists the valid keys.
    """
    from attnlab.experiments.base import parse_overrides

    hints = typing.get_type_hints(func)
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "seed"]
    fields = [(p.name, _parseable(hints[p.name]), dataclasses.field(default=p.default)) for p in params]
    arguments = dataclasses.make_dataclass(func.__name__, fields, frozen=True)
    return parse_overrides(arguments, sets)


@main.group("data")
def data_group() -> None:
    """Make the papers' data sets and check their assumptions."""


@data_group.command("make")
@click.argument("generator")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The .npz file to write.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="A generator argument (repeatable).")
@click.option("--seed", type=int, default=None, help="Seed of the generator (default: its own, 0).")
@user_errors
def make_cmd(generator: str, out: str, sets: tuple[str, ...], seed: int | None) -> None:
    """Write the data set of GENERATOR (example1, dm, unit_gaussian, joint_toy, scores_equal, aligned_pairs)."""
    from attnlab.data import GENERATORS, AlignedPairs

    if generator not in GENERATORS:
        raise ValidationError(f"unknown generator {generator!r}; known generators: {', '.join(GENERATORS)}")
    func = GENERATORS[generator]
    kwargs = _generator_overrides(func, sets)
    if seed is not None:
        if "seed" not in inspect.signature(func).parameters:
            raise ValidationError(f"generator {generator!r} is deterministic and takes no --seed; drop it")
        kwargs["seed"] = seed
    result = func(**kwargs)
    data = result.data if isinstance(result, AlignedPairs) else result
    path = data.save(out)
    extras = [name for name in ("v", "select") if getattr(data, name) is not None]
    click.echo(f"wrote {path}: {generator} with n={data.n}, T={data.T}, d={data.d}; keys X, Z, y{''.join(', ' + e for e in extras)}")


@data_group.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--which", multiple=True, metavar="NAME", help="An assumption to check (repeatable); default: all that apply.")
@click.option("--strict", is_flag=True, help="Exit with status 1 when an assumption fails.")
@user_errors
def check_cmd(path: str, which: tuple[str, ...], strict: bool) -> None:
    """Print the assumption reports of the data set in PATH (an attnlab .npz)."""
    from attnlab.data import TokenSelectionData, check_assumptions

    data = TokenSelectionData.load(path)
    reports = check_assumptions(data, which=list(which) or None)
    for report in reports:
        click.echo(str(report))
    failed = sum(not r.holds for r in reports)
    click.echo(f"{path}: {len(reports) - failed}/{len(reports)} assumptions hold")
    if strict and failed:
        sys.exit(1)
