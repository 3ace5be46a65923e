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
    from attnlab._overrides import parse_overrides

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
    click.echo(
        f"wrote {path}: {generator} with n={data.n}, T={data.T}, d={data.d}; keys X, Z, y{''.join(', ' + e for e in extras)}"
    )


#: The paper (spec section) where each assumption of ``attnlab.data.ASSUMPTIONS`` is stated.
_PAPER_OF = {
    "unique_opt": "implicit-bias-ngd §7, kq-nuclear-norm §5 (part of its A1)",
    "A1": "implicit-bias-ngd §7",
    "A2": "implicit-bias-ngd §7, kq-nuclear-norm §5",
    "A3": "kq-nuclear-norm §5",
    "A4": "kq-nuclear-norm §5",
    "small_init": "implicit-bias-ngd §7 (Lemma 4)",
    "condition1": "implicit-bias-ngd §6.2",
}


@dataclasses.dataclass(frozen=True)
class _Intent:
    """What a generator is meant to satisfy: by construction, and only in a range of its arguments (why)."""

    paper: str
    built: tuple[str, ...]
    conditional: dict[str, str]
    note: str = ""


#: Generator -> the assumptions of its paper it is built to satisfy (spec §6 of each paper).
INTENTS = {
    "example1": _Intent(
        "implicit-bias-ngd §6.1",
        ("unique_opt", "A2"),
        {
            "A1": "needs d >> (n T)^2 log(n T) and rho^2 << sigma^2, so it fails at every practical size; the paper's "
            "constant was lost and NGD converges on Example 1 all the same"
        },
    ),
    "dm": _Intent(
        "implicit-bias-ngd §6.2",
        ("condition1",),
        {"A1": "needs d >= C poly(n) log n (Condition 1's over-parameterisation); fails at practical sizes"},
    ),
    "unit_gaussian": _Intent(
        "mirror-descent-lp §6",
        (),
        {},
        "its paper assumes nothing of the tokens: the selected tokens are read from the trained model, and "
        "`attnlab svm` / `attnlab explain` check that the l_p-AttSVM is feasible for them",
    ),
    "joint_toy": _Intent(
        "mirror-descent-lp §6",
        (),
        {},
        "the paper's fixed toy set; its paper assumes nothing of the tokens (`attnlab explain` checks the SVMs)",
    ),
    "scores_equal": _Intent(
        "kq-nuclear-norm §6",
        ("unique_opt", "A2"),
        {"A3": "needs a score gap of about L log n (the defaults gap 3, n 2, L 3 have it); raise gap until it holds"},
    ),
    "aligned_pairs": _Intent(
        "kq-nuclear-norm §6",
        ("unique_opt", "A2", "A4"),
        {"A3": "needs a large enough gap score - c between optimal and other tokens; raise score until it holds"},
    ),
}

_SUFFICIENT = (
    "These are each paper's sufficient conditions for its theorems, not necessary ones: where one fails, the "
    "theorem does not cover this data set, yet training may still converge and select the optimal tokens "
    "(`attnlab explain` measures what it does)."
)


def _role(name: str, intent: _Intent | None, generator: str | None) -> str:
    """Where assumption ``name`` comes from, and what ``generator`` promises about it."""
    where = _PAPER_OF.get(name, "")
    if intent is None:
        return where
    if name in intent.built:
        return f"{where}; {generator} satisfies it by construction"
    if name in intent.conditional:
        return f"{where}; {generator} {intent.conditional[name]}"
    return f"{where}; not an assumption of {generator}'s paper ({intent.paper})"


@data_group.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--generator",
    type=click.Choice(sorted(INTENTS)),
    default=None,
    help="The generator that made PATH: check what it is meant to satisfy, say what holds by construction.",
)
@click.option(
    "--which", multiple=True, metavar="NAME", help="An assumption to check (repeatable); default: all that apply."
)
@click.option("--strict", is_flag=True, help="Exit with status 1 when an assumption (of --generator's) fails.")
@user_errors
def check_cmd(path: str, generator: str | None, which: tuple[str, ...], strict: bool) -> None:
    """Print the assumption reports of the data set in PATH (an attnlab .npz), each with the paper that states it.

    With --generator, the default checks are the assumptions that generator is meant to satisfy. The
    assumptions are each paper's sufficient conditions: a failure means its theorem does not cover the data.
    """
    from attnlab.data import TokenSelectionData, check_assumptions

    data = TokenSelectionData.load(path)
    intent = INTENTS[generator] if generator is not None else None
    if which:
        names = list(which)
    elif intent is not None and (intent.built or intent.conditional):
        names = [*intent.built, *intent.conditional]
    else:  # check_assumptions' own default (tests/cli/test_data_cmd.py keeps the two equal)
        names = ["unique_opt", "A1", "A2", "A3", "A4"] if data.v is not None else ["A1", "condition1"]
    reports = check_assumptions(data, which=names)
    for name, report in zip(names, reports):
        click.echo(str(report))
        click.echo(f"        {_role(name, intent, generator)}")
    # with --generator (and no --which), only the assumptions of its paper count; the others are shown for information
    own = names if intent is None or which else [*intent.built, *intent.conditional]
    counted = [r for n, r in zip(names, reports) if n in own]
    failed = sum(not r.holds for r in counted)
    if intent is not None and not counted:
        click.echo(f"{path}: {generator}'s paper ({intent.paper}) states no assumption that these checks cover")
    else:
        whose = f"of {generator} " if intent is not None else ""
        click.echo(f"{path}: {len(counted) - failed}/{len(counted)} assumptions {whose}hold")
    if intent is not None and intent.note:
        click.echo(f"{generator}: {intent.note}")
    click.echo(_SUFFICIENT + (" --strict exits 1 when one fails." if not strict else ""))
    if strict and failed:
        sys.exit(1)
