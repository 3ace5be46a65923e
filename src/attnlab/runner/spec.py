"""A sweep: a YAML grid and/or list of run parameters, expanded into jobs named by a hash of their config.

A sweep file reads::

    task: batched-train          # which task runs each job ("experiment" runs a named experiment)
    base: {n: 8, T: 6, d: 64}    # parameters shared by every run
    grid:                        # cartesian product, in the order written
      lr: [0.05, 0.1]
      data_seed: [0, 1, 2]
    list:                        # explicit points; each is combined with every grid point
      - {optimizer: ngd}
      - {optimizer: "ngd:momentum=0.9"}   # any string of the optimizer grammar (attnlab.optim.spec)
    repeats: 4                   # each point 4 times, seed derived from (base seed, repeat index)

A run's parameters are ``{**base, **list entry, **grid point}`` (later keys win), then ``seed`` when
``repeats`` is given. Every run is a :class:`Job` whose ``key`` hashes its task and parameters, so the same
run always lands in the same directory, whichever sweep asked for it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from attnlab._io import json_default
from attnlab._validation import ValidationError, check_scalar, check_seed
from attnlab.runner.store import config_hash
from attnlab.runner.task import Task, known_task

__all__ = ["Job", "SweepSpec", "derive_seed", "expand", "load_sweep"]

_SPEC_KEYS = ("task", "base", "grid", "list", "repeats")


@dataclass(frozen=True)
class Job:
    """One run of a sweep.

    Parameters
    ----------
    task : str
        Name of the task that runs it (``"batched-train"``, ``"experiment"``, ...).
    params : dict
        Plain-valued parameters (JSON-serialisable), passed to the task.
    index : int
        Position in the expanded sweep (0-based).

    Attributes
    ----------
    key : str
        12 hex digits, ``config_hash({"task": task, "params": params})``: names the run directory.

    Raises
    ------
    ValidationError
        When ``task`` is not a non-empty str, or ``params`` is not a mapping of names to values that ``job.json`` can
        hold (numbers, strings, booleans, null, and lists and mappings of them; a YAML date is none of these).
    """

    task: str
    params: dict[str, Any]
    index: int = 0
    key: str = field(init=False)

    def __post_init__(self) -> None:
        _check_task_name("task", self.task)
        _check_values("params", _mapping(self.params, "params"))
        object.__setattr__(self, "key", config_hash({"task": self.task, "params": self.params}))


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file (see the module docstring for the format).

    Parameters
    ----------
    task : str
        Task name.
    base : dict
        Parameters shared by every run.
    grid : dict of str to list
        Each key takes every value in its list; the runs are the cartesian product, in key order.
    points : list of dict
        Explicit parameter sets (the file's ``list``); each is combined with every grid point.
    repeats : int or None
        Run every point this many times, with ``seed = derive_seed(base seed, repeat)``.
    file : str or None
        The sweep file it was read from (:func:`load_sweep`), named by the errors about its runs; None when built in
        code. Not part of the spec's identity (equality).

    Raises
    ------
    ValidationError
        When a field is malformed: an empty task name, a ``base`` or entry of ``points`` that is not a mapping, a
        ``grid`` value that is not a non-empty list, ``repeats`` not an int >= 1, or a parameter value that is not a
        number, string, boolean, null, or a list or mapping of them.
    """

    task: str
    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    points: list[dict[str, Any]] = field(default_factory=list)
    repeats: int | None = None
    file: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_spec(self.task, self.base, self.grid, self.points, self.repeats, "SweepSpec")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], source: str = "sweep") -> SweepSpec:
        """Build a spec from the mapping a YAML file holds; errors name ``source`` and the bad key.

        Parameters
        ----------
        raw : mapping
            The file's content: keys ``task`` (required), ``base``, ``grid``, ``list`` and ``repeats``.
        source : str, default="sweep"
            Where the mapping came from (the file path), for error messages.

        Returns
        -------
        SweepSpec

        Raises
        ------
        ValidationError
            When ``raw`` is not a mapping, has unknown keys, lacks a task name, or has a malformed ``base``,
            ``grid`` (each value a non-empty list), ``list`` (a list of mappings) or ``repeats`` (an int >= 1), or a
            parameter value that is not a number, string, boolean, null, or a list or mapping of them (a date).
        """
        if not isinstance(raw, Mapping):
            raise ValidationError(
                f"{source}: expected a mapping with keys {', '.join(_SPEC_KEYS)}, got {type(raw).__name__}"
            )
        unknown = sorted(set(raw) - set(_SPEC_KEYS))
        if unknown:
            raise ValidationError(f"{source}: unknown keys {unknown}; a sweep has the keys {', '.join(_SPEC_KEYS)}")
        base = raw.get("base") or {}
        grid = raw.get("grid") or {}
        points = raw.get("list") or []
        repeats = raw.get("repeats")
        _check_spec(raw.get("task"), base, grid, points, repeats, source)
        return cls(
            task=raw["task"],
            base=dict(base),
            grid={k: list(v) for k, v in grid.items()},
            points=[dict(p) for p in points],
            repeats=repeats,
        )


def _check_spec(task: Any, base: Any, grid: Any, points: Any, repeats: Any, source: str) -> None:
    """Refuse malformed fields of a sweep; messages start with ``source`` and name the field."""
    _check_task_name(f"{source}: task", task)
    _check_values(f"{source}: base", _mapping(base, f"{source}: base"))
    for key, values in _mapping(grid, f"{source}: grid").items():
        if not isinstance(values, (list, tuple)) or not values:
            raise ValidationError(f"{source}: grid.{key} must be a non-empty list of values, got {values!r}")
        _check_values(f"{source}: grid.{key}", values)
    if not isinstance(points, (list, tuple)):
        raise ValidationError(f"{source}: list must be a list of mappings, got {type(points).__name__}")
    for i, point in enumerate(points):
        _check_values(f"{source}: list[{i}]", _mapping(point, f"{source}: list[{i}]"))
    if repeats is not None:
        check_scalar(f"{source}: repeats", repeats, kind=int, low=1)


def _check_task_name(where: str, task: Any) -> None:
    """Refuse a task name that is not a non-empty str, naming ``where`` it was given."""
    if not isinstance(task, str) or not task:
        raise ValidationError(
            f"{where} must be a task name such as 'batched-train' or 'experiment', got {task!r}"
            + ("" if isinstance(task, str) else f" of type {type(task).__name__}")
        )


def _check_values(where: str, value: Any) -> None:
    """Refuse a parameter value that ``job.json`` cannot hold (a YAML date, an object), naming where it is."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{where} has the key {key!r}; the keys of a mapping of parameters are strings")
            _check_values(f"{where}.{key}", item)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_values(f"{where}[{i}]", item)
    elif not isinstance(value, (str, int, float, bool, type(None))):
        try:  # what write_json converts (NumPy numbers and arrays, paths, sets) is kept as before
            json.dumps(value, default=json_default)
        except (TypeError, ValueError):
            hint = (
                " (YAML reads an unquoted date as a date: quote it, '2020-01-01')" if isinstance(value, dt.date) else ""
            )
            raise ValidationError(
                f"{where} == {value!r} is a {type(value).__name__}; parameter values must be numbers, strings, "
                f"booleans or null, or lists and mappings of them{hint}"
            ) from None


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValidationError(f"{where} must be a mapping of parameter names to values, got {value!r}")
    return dict(value)


class _SweepLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2 floats (``1e-3``, not only ``1.0e-3``) that refuses duplicate keys.

    PyYAML implements YAML 1.1, whose floats need a dot, so ``lr: 1e-3`` would be the string ``'1e-3'``; and a
    mapping that gives a key twice would silently keep the last value.
    """

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Mark] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue  # merged (<<) keys may repeat; a non-scalar key is left to PyYAML
                key, mark = self.construct_object(key_node), key_node.start_mark
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        problem=f"the key {key!r} is given twice in one mapping (line {first[key].line + 1}, column "
                        f"{first[key].column + 1} and line {mark.line + 1}, column {mark.column + 1}); keep one"
                    )
                first[key] = mark
        return super().construct_mapping(node, deep=deep)


# YAML 1.2's float pattern, tried after PyYAML's own resolvers; digits alone stay YAML 1.1's (an int, or "09" a
# string). On the subclass: add_implicit_resolver copies the resolvers first, so yaml.SafeLoader is unchanged.
_SweepLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?![-+]?[0-9]+$)(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


def load_sweep(path: str | os.PathLike[str], *, argument: str = "sweep file") -> SweepSpec:
    """Read a sweep YAML file.

    Parameters
    ----------
    path : path
        The ``.yaml`` file (UTF-8 text).
    argument : str, default="sweep file"
        What the errors about the file as a whole call it (the command line's ``SWEEP_FILE``).

    Returns
    -------
    SweepSpec

    Raises
    ------
    ValidationError
        If ``path`` is not a str or path, the file is missing, is not UTF-8 text or not YAML, gives a key twice in one mapping (naming
        the key and its lines), or has unknown keys or malformed values.

    Notes
    -----
    Numbers are read as YAML 1.2 reads them: ``1e-3`` and ``1E5`` are floats (PyYAML's YAML 1.1 would read
    them as strings).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValidationError(
            f"path == {path!r} (of type {type(path).__name__}) is not a path; pass the path of a .yaml sweep file "
            "as a str or pathlib.Path"
        )
    path = Path(path)
    if not path.is_file():
        raise ValidationError(f"{argument} {str(path)!r} does not exist; pass the path of a .yaml sweep file")
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_SweepLoader)  # a yaml.SafeLoader
    except UnicodeDecodeError as err:  # a binary file (an .npz), or text in another encoding (Latin-1)
        raise ValidationError(
            f"{argument} {str(path)!r} is not UTF-8 text, so not a YAML sweep file ({err}); pass the path of a .yaml "
            "sweep file (saved as UTF-8)"
        ) from None
    except yaml.YAMLError as err:
        where = "; ".join(line.strip() for line in str(err).splitlines() if line.strip())  # one line: problem, mark
        raise ValidationError(f"{argument} {str(path)!r} is not valid YAML: {where}") from None
    return dataclasses.replace(SweepSpec.from_mapping(raw, source=str(path)), file=str(path))


def derive_seed(seed: int, index: int) -> int:
    """The seed of repeat ``index`` of a run whose config seed is ``seed``, in ``[0, 2**31)``.

    Uses NumPy's ``SeedSequence(seed, spawn_key=(index,))``, so streams of different repeats are independent
    and the mapping never changes between versions or machines.

    Parameters
    ----------
    seed : int
        The run's config seed, >= 0.
    index : int
        The repeat, >= 0.

    Returns
    -------
    int
        In ``[0, 2**31)``.

    Raises
    ------
    ValidationError
        When ``seed`` or ``index`` is not a non-negative int.

    Examples
    --------
    >>> derive_seed(0, 3) == derive_seed(0, 3) != derive_seed(0, 4)
    True
    """
    check_seed("seed", seed)
    check_scalar("index", index, kind=(int, np.integer), low=0)
    return int(np.random.SeedSequence(int(seed), spawn_key=(int(index),)).generate_state(1)[0] % 2**31)


def _base_seed(seed: Any) -> int:
    """The ``seed`` of a run with ``repeats``, refused unless a whole number >= 0 (never rounded)."""
    try:
        return check_seed("seed", seed)
    except ValidationError as err:
        raise ValidationError(
            f"{err}; with repeats, seed is the base seed of each repeat's own seed: give a whole number >= 0 "
            "(e.g. seed: 2), or leave seed out for 0"
        ) from None


def expand(spec: SweepSpec) -> list[Job]:
    """All runs of ``spec``, in order: list entries, then grid points (last key fastest), then repeats.

    Each run's parameters are ``base``, updated by its list entry, then by its grid point; a built-in or
    registered task may turn them into several (:meth:`~attnlab.runner.task.Task.expand`: ``batched-train``
    makes one run per data file of a ``data`` folder); with ``repeats``, each one's ``seed`` becomes
    :func:`derive_seed` of that seed (default 0) and the repeat.

    Parameters
    ----------
    spec : SweepSpec

    Returns
    -------
    list of Job
        With ``index`` 0, 1, ... in this order.

    Raises
    ------
    ValidationError
        If ``spec`` is not a SweepSpec; if two runs have the same parameters (they would share a run directory): vary
        a parameter or the seed; if two runs differ only in the spelling of values that the task reads as one
        (:meth:`~attnlab.runner.task.Task.canonical`: ``lr`` ``1`` and ``1.0``, optimizer ``ngd`` and ``NGD``), naming
        the key and both spellings. With ``repeats``, if a run's ``seed`` is not a whole number >= 0 (``2.9`` is
        refused, not rounded).
    """
    if not isinstance(spec, SweepSpec):
        hint = (
            f"load_sweep({spec!r}) to read a sweep file"
            if isinstance(spec, (str, os.PathLike))
            else "SweepSpec(task=..., base=..., grid=...) to build one, or load_sweep(path) to read a sweep file"
        )
        raise ValidationError(f"spec must be a SweepSpec, got {spec!r} of type {type(spec).__name__}; pass {hint}")
    points = spec.points or [{}]
    keys = list(spec.grid)
    combos = [dict(zip(keys, values)) for values in itertools.product(*(spec.grid[k] for k in keys))]
    repeats: Sequence[int | None] = range(spec.repeats) if spec.repeats is not None else [None]
    jobs: list[Job] = []
    seen: dict[str, int] = {}
    task = known_task(spec.task)
    variants = [
        params
        for point in points
        for combo in combos
        for params in (task.expand if task is not None else lambda p: [p])({**spec.base, **point, **combo})
    ]
    several = len(variants) * len(repeats) > 1  # one run cannot be spelled twice: its parameters are not read here
    for variant in variants:
        for repeat in repeats:
            params = dict(variant)
            if repeat is not None:
                params["seed"] = derive_seed(_base_seed(params.get("seed", 0)), repeat)
            job = Job(task=spec.task, params=params, index=len(jobs))
            read = _text(_read_as(task, params) if several else params)
            if read in seen:
                raise ValidationError(_same_run(spec, task, jobs[seen[read]], job))
            seen[read] = job.index
            jobs.append(job)
    return jobs


def _read_as(task: Task | None, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as ``task`` reads them (:meth:`~attnlab.runner.task.Task.canonical`); as written for a task that
    is not registered, or parameters it refuses (its check names them)."""
    if task is None:
        return params
    try:
        return task.canonical(dict(params))
    except ValidationError:
        return params


def _same_run(spec: SweepSpec, task: Task | None, first: Job, second: Job) -> str:
    """Why ``first`` and ``second`` are one run: the same parameters, or values spelled two ways (each named by its
    key in the file, with both spellings and the value the task reads)."""
    runs = f"runs {first.index} and {second.index} of the sweep" + (f" {spec.file!r}" if spec.file else "")
    if first.key == second.key:
        return (
            f"{runs} have the same parameters {second.params}; vary a parameter between them or use repeats to vary "
            "the seed"
        )
    read = _read_as(task, second.params)
    spelled = [
        f"{_where(spec, key)} is {first.params.get(key)!r} in run {first.index} and {second.params.get(key)!r} in run "
        f"{second.index}, both read by the {spec.task} task as {read.get(key)!r}"
        for key in sorted(set(first.params) | set(second.params))
        if _text(first.params.get(key)) != _text(second.params.get(key))
    ]
    return f"{runs} are one run spelled two ways: {'; '.join(spelled)}; give each value once"


def _text(value: Any) -> str:
    """``value`` as the JSON text a run's key hashes (keys sorted); what JSON cannot write, by its ``repr``."""

    def plain(obj: Any) -> Any:
        try:
            return json_default(obj)
        except TypeError:
            return repr(obj)

    return json.dumps(value, sort_keys=True, default=plain)


def _where(spec: SweepSpec, key: str) -> str:
    """Where the file gives ``key`` a value that varies between runs: ``grid.<key>``, else ``list[<i>].<key>``."""
    if key in spec.grid:
        return f"grid.{key}"
    return next((f"list[{i}].{key}" for i, point in enumerate(spec.points) if key in point), key)
