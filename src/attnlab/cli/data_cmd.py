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

    An unknown key raises a :class:`ValidationError` that lists the valid keys (or says that ``func`` takes none); ``seed`` is pointed to ``--seed``.
    """
    from attnlab._overrides import parse_overrides

    for item in sets:
        if item.partition("=")[0].strip() == "seed":
            raise ValidationError(
                f"--set {item}: the seed is an option of its own; pass --seed {item.partition('=')[2]}"
            )

    hints = typing.get_type_hints(func)
    params = [p for p in inspect.signature(func).parameters.values() if p.name != "seed"]
    if sets and not params:
        raise ValidationError(
            f"--set {sets[0]}: generator {func.__name__!r} takes no settings (its data are fixed); drop --set"
        )
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
    """Write the data set of GENERATOR (example1, dm, unit_gaussian, joint_toy, scores_equal, aligned_pairs).

    Exit status 2 for an unknown GENERATOR or a --set it does not take.
    """
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
        {"A3": "needs a score gap of about T log n (the defaults gap 3, n 2, T 3 have it); raise gap until it holds"},
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


def _load(path: str) -> tuple[Any, Any]:
    """The data set in ``path`` and its token sets as a raw ``(n, T)`` bool mask (None when it stores none).

    The sets are kept out of the data set, so that a degenerate selection is reported, not refused on loading.
    """
    import numpy as np

    from attnlab._io import read_npz
    from attnlab.data import TokenSelectionData

    arrays = read_npz(path)
    select = arrays.get("select")
    if select is None or select.ndim != 2 or any(k not in arrays for k in ("X", "y")):
        return TokenSelectionData.load(path), None  # load names a missing key or a bad array
    try:
        data = TokenSelectionData(**{k: arrays[k] for k in ("X", "Z", "y", "v") if k in arrays})
    except ValidationError as err:
        raise ValidationError(f"data file {path!r}: {err}") from None
    if select.shape != (data.n, data.T) or not (select.dtype == bool or np.isin(select, (0, 1)).all()):
        raise ValidationError(
            f"data file {path!r}: select as a mask of token sets must be a 0/1 array of shape ({data.n}, {data.T}), "
            f"got shape {select.shape} and dtype {select.dtype}; write it with TokenSelectionData(..., select=sets)"
        )
    return data, select.astype(bool)


def _shown(rows: Sequence[int]) -> str:
    rows = list(rows)
    return ", ".join(str(r) for r in rows[:8]) + (f" and {len(rows) - 8} more" if len(rows) > 8 else "")


def _token_set_report(data: Any, mask: Any) -> tuple[list[str], bool]:
    """Lines describing the token sets ``mask`` (n, T) of ``data``, and whether the selection is usable.

    Spec: multi-token §2 (degenerate selections), §3.1 (the direction program, solved when none is degenerate).
    Degenerate, each naming its sequences: an empty set, every set equal to its whole sequence (no margin
    constraint anywhere), a tie (a token of a set equal to a token outside it, or a zero query: the margin
    constraint reads 0 >= 1). A whole-sequence set beside others is named as contributing equalities only.
    """
    import warnings

    import numpy as np

    from attnlab.svm import InfeasibleProgramError, WholeSequenceWarning, set_direction_svm

    X, Z = data.X.numpy(), data.Z.numpy()
    sizes = mask.sum(axis=1)
    counts = ", ".join(f"{k} token{'s' * (k != 1)}: {int((sizes == k).sum())}" for k in sorted(set(sizes.tolist())))
    lines = [f"token sets: {data.n} sequences of T={data.T} tokens; sequences by set size: {counts}"]
    multi = np.flatnonzero(sizes > 1).tolist()
    if multi:
        lines.append(f"  sequences keeping two or more tokens: {_shown(multi)}")
    problems = []
    empty, whole = np.flatnonzero(sizes == 0).tolist(), np.flatnonzero(sizes == data.T).tolist()
    if empty:
        problems.append(f"degenerate: the sets of sequences {_shown(empty)} are empty; every set needs a token")
    if whole and len(whole) == data.n:
        problems.append(
            f"degenerate: the sets of sequences {_shown(whole)} (every sequence) hold the whole sequence (all {data.T} "
            "tokens): no token is separated from a set anywhere, so the direction program has no margin; leave a "
            "token out"
        )
    elif whole:
        lines.append(
            f"  sequences whose set is the whole sequence (all {data.T} tokens): {_shown(whole)}; they contribute "
            "equal logits only (no margin), as in the source's program"
        )
    scale = max(float(np.abs(X).max(initial=0.0)), 1e-300)
    for i in range(data.n):
        if i in empty or i in whole:
            continue
        inside, outside = np.flatnonzero(mask[i]), np.flatnonzero(~mask[i])
        if not Z[i].any():
            problems.append(f"degenerate: sequence {i} has a zero query z_i, so every margin there reads 0 >= 1")
            continue
        ties = [(int(a), int(b)) for a in inside for b in outside if np.abs(X[i, a] - X[i, b]).max() <= 1e-12 * scale]
        if ties:
            shown = ", ".join(f"token {a} (in) = token {b} (out)" for a, b in ties[:4])
            problems.append(
                f"degenerate: sequence {i} has a tie, {shown}: no W separates equal tokens; drop one or change the set"
            )
    lines += problems
    if problems:
        return lines, False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WholeSequenceWarning)  # the line above names those sequences
            result = set_direction_svm(data, mask)
    except InfeasibleProgramError as err:
        lines.append(f"infeasible: {err}")
        return lines, False
    lines.append(
        f"feasible: the direction program separates every set with margin 1 at ||W||_F = {result.norm_value:.4g} "
        f"(KKT residual {result.kkt_residual:.1e})"
    )
    return lines, True


@data_group.command("check")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--generator",
    type=click.Choice(sorted(INTENTS)),
    default=None,
    help="The generator that made PATH: check what it is meant to satisfy, say what holds by construction.",
)
@click.option(
    "--which",
    multiple=True,
    metavar="NAME",
    help="An assumption to check (repeatable; a repeated one is checked once); default: all that apply.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Exit with status 1 when an assumption (of --generator's) fails, or stored token sets are degenerate or "
    "infeasible.",
)
@user_errors
def check_cmd(path: str, generator: str | None, which: tuple[str, ...], strict: bool) -> None:
    """Print the assumption reports of the data set in PATH (an attnlab .npz), each with the paper that states it.

    With --generator, the default checks are the assumptions that generator is meant to satisfy. The
    assumptions are each paper's sufficient conditions: a failure means its theorem does not cover the data.
    A data set that stores token sets (select of shape (n, T)) is first reported on: its set sizes, the sequences
    whose set is the whole sequence (they add equal logits only), those whose selection is degenerate (an empty
    set, a tie, every set the whole sequence), and whether the sets' direction program is feasible. Exit status 1
    with --strict when an assumption fails or the token sets are unusable, 2 on bad input.
    """
    from attnlab.data import check_assumptions, default_assumptions

    data, sets = _load(path)
    usable = True
    if sets is not None:
        lines, usable = _token_set_report(data, sets)
        for line in lines:
            click.echo(line)
        click.echo("the assumptions below are about one token per sequence (the head's optimal tokens):")
    intent = INTENTS[generator] if generator is not None else None
    if which:
        names = list(dict.fromkeys(which))  # each once, in the order given: --which A1 --which A1 checks A1 once
    elif intent is not None and (intent.built or intent.conditional):
        names = [*intent.built, *intent.conditional]
    else:  # check_assumptions' own default
        names = default_assumptions(data)
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
    if strict and (failed or not usable):
        sys.exit(1)
