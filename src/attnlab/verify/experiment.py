"""What an experiment is, how it is configured and run, and what it writes.

An experiment is a frozen dataclass config (plain-typed fields, defaults from the spec), a ``run`` function
``run(config, context) -> ExperimentResult``, and its theory checks. :func:`run_experiment` writes, atomically,
into one run directory:

- ``trajectory.parquet``: tidy table, one row per recorded (run, step);
- ``checks.csv``: one row per claim (claim, predicted, measured, tolerance, passed, source, kind);
- ``record.json``: config, seed, versions, timings, which defaults are ours rather than the paper's, the command
  line, the git commit of the code and the fingerprint of the code that ran (source hashes and library versions,
  :mod:`attnlab.runner.fingerprint`), and when it finished (``attnlab run --config record.json`` replays the run);
- one PNG and one PDF per figure, plus any extra tidy tables as Parquet.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pandas as pd

from attnlab._overrides import parse_overrides
from attnlab._validation import ValidationError, check_bool, check_seed
from attnlab.runner.fingerprint import code_fingerprint
from attnlab.runner.provenance import git_state
from attnlab.runner.store import (
    config_hash,
    save_figure,
    staged_out,
    versions,
    write_csv,
    write_json,
    write_parquet,
)
from attnlab.training.callbacks import progress_bar
from attnlab.verify.check import CHECK_COLUMNS, Check, CheckCounts, count_checks
from attnlab.verify.claim import Claim, Falsifier, check_declared, with_revisions

__all__ = [
    "FIGURE_FORMATS",
    "Experiment",
    "ExperimentResult",
    "RunContext",
    "RunRecord",
    "make_config",
    "read_record",
    "run_experiment",
]

C = TypeVar("C")

#: The files of each figure, by ``quick``: a quick run (the CI-sized preview, ``make demo``) writes the PNG the
#: report shows; a full-size run adds the PDF for papers. Each format is one more draw of the figure, and at quick
#: size drawing is most of a run's seconds.
FIGURE_FORMATS: dict[bool, tuple[str, ...]] = {True: ("png",), False: ("png", "pdf")}


@dataclass
class ExperimentResult:
    """What ``Experiment.run`` returns: tables, checks and figures, all drawn from the tables.

    Attributes
    ----------
    frame : pandas.DataFrame
        Tidy trajectory, one row per recorded (run, step), snake_case columns.
    checks : list of Check
    figures : dict of str to matplotlib Figure
        Saved as ``<name>.png``, and as ``<name>.pdf`` too by a full-size run (:data:`FIGURE_FORMATS`).
    tables : dict of str to pandas.DataFrame
        Extra tidy tables, saved as ``<name>.parquet``.
    notes : list of str
        Free-text remarks written to ``record.json`` (e.g. where a measurement disagrees with a paper).
    """

    frame: pd.DataFrame
    checks: list[Check] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class RunContext:
    """Passed to ``Experiment.run``: where outputs go and whether to show progress.

    Attributes
    ----------
    out : pathlib.Path
        The run directory (exists). Experiments may write checkpoints here.
    progress : bool or None
        Progress bars: None shows them only when stderr is a terminal (the default), False hides them, True
        forces them. Pass it on as the ``progress=`` of attnlab's loops.
    quick : bool
        Whether the ``--quick`` settings are in use.
    """

    out: Path
    progress: bool | None = None
    quick: bool = False

    def bar(self, iterable: Iterable[Any] | None = None, *, total: int | None = None, desc: str = "") -> Any:
        """A progress bar (:func:`attnlab.training.callbacks.progress_bar`), shown as ``progress`` says.

        Parameters
        ----------
        iterable : iterable, optional
            What to iterate over; without it, advance the bar with its ``update``.
        total : int, optional
            The number of iterations expected (default: ``len(iterable)`` where it has one).
        desc : str, default=""
            The bar's label.

        Returns
        -------
        tqdm.tqdm
            The bar (a disabled one when hidden), iterable when ``iterable`` is given.
        """
        return progress_bar(iterable, total=total, desc=desc, show=self.progress)


@dataclass(frozen=True, kw_only=True)
class Experiment(Generic[C]):
    """A named, declarative experiment.

    Parameters
    ----------
    name : str
        Dotted name, ``"<paper>.<figure or check>"``, e.g. ``"implicit-bias.fig2"``. The project's experiments are
        entries of :mod:`attnlab.experiments.catalog`, whose ``register`` fills in their paper and summary.
    config_type : type
        A frozen dataclass with plain-typed fields. A class attribute ``OURS`` (tuple of field names) lists
        defaults that are our proposals because the paper's numbers were lost; they are labelled in outputs.
    run : callable
        ``run(config, context) -> ExperimentResult``.
    quick : mapping
        Field overrides for ``--quick`` (CI-sized).
    cost : float, default=0.0
        Seconds the full-size run took in one worker of the last ``make reproduce-full`` (2 workers on 2 cores;
        docs/experiments/ntk.md, "Full reproduction"; BENCHMARKS.md, "The reproduction, per experiment", says which
        run set them). ``attnlab reproduce`` starts the costliest experiments first, so parallel workers finish
        together instead of one long run starting last.
    claims : tuple of Claim
        Every theory check and property the run writes, declared once (:class:`attnlab.verify.Claim`).
        Each theory claim names ``falsifiers``, at least one of kind ``"mechanism"``; the coverage tables of
        docs/theory are built from them. A run's rows must be built by these claims' row methods (their readings
        judge them): a copy with another reading under the same id is refused.
    falsifiers : tuple of Falsifier
        The wrong mechanisms the claims name; ``tests/experiments/test_falsifiers.py`` runs each at the quick size
        and asserts that every row naming it fails.
    paper, summary : str, optional
        The theory page the experiment reproduces (``"implicit-bias-ngd"``) and one line for ``attnlab list``.

    Raises
    ------
    ValidationError
        When ``name`` is empty, ``config_type`` is not a dataclass class, ``run`` is not callable, ``quick`` is not
        a mapping or names a field the config lacks, ``claims`` or ``falsifiers`` are not tuples of
        :class:`~attnlab.verify.Claim` and :class:`~attnlab.verify.Falsifier`, a claim's reading names a size field
        the config lacks, the falsifiers repeat a name, a theory claim names a falsifier that is not listed or none
        of kind ``"mechanism"``, or a falsifier is named by no claim.
    """

    name: str
    config_type: type[C]
    run: Callable[[C, RunContext], ExperimentResult]
    quick: Mapping[str, Any] = field(default_factory=dict)
    cost: float = 0.0
    paper: str = ""
    summary: str = ""
    claims: tuple[Claim, ...] = ()
    falsifiers: tuple[Falsifier, ...] = ()

    def __post_init__(self) -> None:
        _check_parts(self)
        names = [f.name for f in self.falsifiers]
        if len(set(names)) != len(names):
            raise ValidationError(f"falsifiers of {self.name!r} repeat a name: {names}")
        ids = [c.id for c in self.claims if c.id]
        if len(set(ids)) != len(ids):
            raise ValidationError(f"claims of {self.name!r} repeat an id: {sorted(ids)}")
        named = {name for c in self.claims if c.kind == "theory" for name in c.falsifiers}
        unknown = sorted(named - set(names))
        if unknown:
            raise ValidationError(
                f"claims of {self.name!r} name falsifiers {unknown} that are not in its falsifiers {names}"
            )
        unused = sorted(set(names) - named)
        if unused:
            raise ValidationError(f"falsifiers {unused} of {self.name!r} are named by no claim; declare or drop them")
        kinds = {f.name: f.kind for f in self.falsifiers}
        unfalsified = [c.id or c.claim for c in self.claims if c.kind == "theory" and "mechanism" not in
                       {kinds[n] for n in c.falsifiers}]  # fmt: skip
        if unfalsified:
            raise ValidationError(
                f"theory claims {unfalsified} of {self.name!r} name no falsifier of kind 'mechanism'; every theory "
                "claim needs a wrong mechanism (the optimizer, the data model, the model) that fails it numerically"
            )

    def falsifier(self, name: str) -> Falsifier:
        """The falsifier called ``name``.

        Parameters
        ----------
        name : str
            A name in :attr:`falsifiers` (as a theory claim names it).

        Returns
        -------
        Falsifier
            The one of that name.

        Raises
        ------
        ValidationError
            When no falsifier has that name; the message lists the names there are.
        """
        for f in self.falsifiers:
            if f.name == name:
                return f
        raise ValidationError(f"{self.name!r} has no falsifier {name!r}; it has {[f.name for f in self.falsifiers]}")


def _check_parts(experiment: Experiment[Any]) -> None:
    """Refuse an :class:`Experiment` part of the wrong type, naming it and the fix; make claims and falsifiers
    tuples."""
    name = experiment.name
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"Experiment.name must be a dotted name such as 'my-paper.fig2', got {name!r}")
    config_type = experiment.config_type
    if not isinstance(config_type, type) or not dataclasses.is_dataclass(config_type):
        raise ValidationError(
            f"config_type of {name!r} must be a dataclass class (not an instance), got {config_type!r}"
        )
    if not callable(experiment.run):
        raise ValidationError(f"run of {name!r} must be a function run(config, context), got {experiment.run!r}")
    if not isinstance(experiment.quick, Mapping):
        raise ValidationError(f"quick of {name!r} must be a mapping of field to value, got {experiment.quick!r}")
    fields = {f.name for f in dataclasses.fields(config_type)}
    unknown_fields = set(experiment.quick) - fields
    if unknown_fields:
        raise ValidationError(f"quick overrides of {name!r} name unknown fields {sorted(unknown_fields)}")
    for part, kind in (("claims", Claim), ("falsifiers", Falsifier)):
        items = getattr(experiment, part)
        if not isinstance(items, tuple | list) or not all(isinstance(item, kind) for item in items):
            raise ValidationError(
                f"{part} of {name!r} must be a tuple of {kind.__name__}, got {items!r}; write {part}=(one,) for one"
            )
        object.__setattr__(experiment, part, tuple(items))
    for claim in experiment.claims:
        sizes = () if claim.reading is None or claim.reading.sizes is None else claim.reading.sizes
        if set(sizes) - fields:
            raise ValidationError(
                f"claim {claim.id or claim.claim!r} of {name!r}: its reading's sizes name {sorted(set(sizes) - fields)}"
                f", which are not fields of its config {sorted(fields)}"
            )


def _check_experiment(name: str, experiment: Any, quick: Any) -> None:
    """Refuse an ``experiment`` that is not an :class:`Experiment` and a ``quick`` that is not a bool."""
    if not isinstance(experiment, Experiment):
        raise ValidationError(
            f"{name}() takes an Experiment, got {experiment!r}; look a project experiment up by name with "
            "attnlab.experiments.get_experiment(name)"
        )
    check_bool("quick", quick)


def make_config(experiment: Experiment[C], overrides: Sequence[str] | Mapping[str, Any] = (), quick: bool = False) -> C:
    """Default config of ``experiment``, then its quick overrides (if ``quick``), then ``overrides``.

    Parameters
    ----------
    experiment : Experiment
        Whose ``config_type`` to build; its defaults are the full-size settings.
    overrides : sequence of "key=value" or mapping, default=()
        Field changes, applied last; strings are parsed by the field's type annotation.
    quick : bool, default=False
        Apply ``experiment.quick`` (the CI-sized settings) before ``overrides``.

    Returns
    -------
    config
        An instance of ``experiment.config_type``.

    Raises
    ------
    ValidationError
        When an override names an unknown field (the message lists the known ones) or a value does not parse, or
        the config refuses the resulting values, ``experiment`` is not an :class:`Experiment`, or ``quick`` is not
        a bool.
    """
    _check_experiment("make_config", experiment, quick)
    base = experiment.config_type()
    if quick:
        base = dataclasses.replace(base, **experiment.quick)
    config = dataclasses.replace(base, **parse_overrides(experiment.config_type, overrides))
    for f in dataclasses.fields(config):  # whatever each config checks itself: seeds a generator takes, no NaN
        value = getattr(config, f.name)
        if f.name == "seed" or f.name.endswith("_seed"):
            check_seed(f.name, value)
        if any(
            isinstance(v, float) and math.isnan(v) for v in (value if isinstance(value, (tuple, list)) else [value])
        ):
            raise ValidationError(f"{f.name} == {value!r} holds NaN; `attnlab show {experiment.name}` lists its values")
    return config


@dataclass(frozen=True)
class RunRecord:
    """Where a finished run wrote its outputs, and its check table; what :func:`run_experiment` returns.

    Parameters
    ----------
    name : str
        The experiment's name.
    out : pathlib.Path
        The run directory.
    checks : pandas.DataFrame
        The check table as written to ``checks.csv`` (columns :data:`~attnlab.verify.check.CHECK_COLUMNS`).
    seconds : float
        Wall time of the experiment's ``run``, in seconds (writing the outputs not included).
    """

    name: str
    out: Path
    checks: pd.DataFrame
    seconds: float

    @property
    def counts(self) -> CheckCounts:
        """The check table's totals per kind (:func:`~attnlab.verify.check.count_checks`)."""
        return count_checks(self.checks)

    @property
    def passed(self) -> bool:
        """Every theory check passed (observations that disagree with a paper do not fail a run)."""
        return self.counts.ok


def run_experiment(
    experiment: Experiment[Any],
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    quick: bool = False,
    out: str | Path | None = None,
    progress: bool = True,
    overwrite: bool | None = False,
) -> RunRecord:
    """Build the config of ``experiment``, run it, and write its outputs.

    The project's named experiments run through :func:`attnlab.experiments.run_experiment`, which looks the name
    up; this function runs any :class:`Experiment`, one of your own included.

    Parameters
    ----------
    experiment : Experiment
        What to run.
    overrides : list of "key=value" or mapping
        Config changes; unknown keys raise and list the known ones.
    quick : bool, default=False
        Use the CI-sized settings.
    out : path, optional
        Run directory; default ``runs/<name>-<config hash>``.
    progress : bool, default=True
        Show progress bars on a terminal.
    overwrite : bool or None, default=False
        ``False``: refuse an ``out`` that holds another run; ``True``: replace it once this run is complete (see
        :func:`attnlab.runner.store.staged_out`); ``None``: use ``out`` as it is (a sweep's own run directory,
        which the sweep's store owns).

    Returns
    -------
    RunRecord
        The run directory, the check table and the run's wall time.

    Raises
    ------
    ValidationError
        When an override names an unknown field or a bad value, ``out`` holds another run, ``experiment`` is not an
        :class:`Experiment`, ``quick`` is not a bool, the run returns no :class:`ExperimentResult`, or it writes a
        theory check or property that none of ``experiment.claims`` stands for (or one built from another reading).
    """
    _check_experiment("run_experiment", experiment, quick)
    name = experiment.name
    config = make_config(experiment, overrides, quick)
    digest = config_hash({"experiment": name, "config": dataclasses.asdict(config)})
    out_dir = Path(out) if out is not None else Path("runs") / f"{name}-{digest}"
    # --overwrite of another run: this one is staged beside it, and the other goes only once this one is complete
    with staged_out(out_dir, {"experiment": name, "config_hash": digest}, overwrite=overwrite, tag=digest) as run_dir:
        checks, seconds = _run_into(run_dir, experiment, config, digest, quick=quick, progress=progress)
    return RunRecord(name=name, out=out_dir, checks=checks, seconds=seconds)


def _run_into(
    run_dir: Path, experiment: Experiment[Any], config: Any, digest: str, *, quick: bool, progress: bool
) -> tuple[pd.DataFrame, float]:
    """Run ``experiment`` on ``config`` and write its outputs into ``run_dir``, the record last: (checks, seconds)."""
    name, config_dict = experiment.name, dataclasses.asdict(config)
    start = time.perf_counter()
    # progress=True asks for bars where they can be seen: on a terminal (never forced into a piped log)
    result = experiment.run(config, RunContext(out=run_dir, progress=None if progress else False, quick=quick))
    seconds = time.perf_counter() - start
    if not isinstance(result, ExperimentResult):
        raise ValidationError(f"the run of {name!r} returned a {type(result).__name__}, not an ExperimentResult")
    check_declared(result.checks, experiment.claims, name)
    rows = with_revisions(result.checks, experiment.claims)

    write_parquet(run_dir / "trajectory.parquet", result.frame)
    checks = pd.DataFrame([c.as_row() for c in rows], columns=CHECK_COLUMNS)
    write_csv(run_dir / "checks.csv", checks)
    for table_name, table in result.tables.items():
        write_parquet(run_dir / f"{table_name}.parquet", table)
    figure_files = []
    footnoted = False  # the defaults-ours footnote once per experiment: under the first figure that has one
    for fig_name, figure in result.figures.items():
        import matplotlib.pyplot as plt

        from attnlab.plotting import drop_ours, has_ours

        if footnoted:
            drop_ours(figure)
        footnoted = footnoted or has_ours(figure)
        figure_files += [p.name for p in save_figure(figure, run_dir / fig_name, FIGURE_FORMATS[quick])]
        plt.close(figure)
    ours = tuple(getattr(experiment.config_type, "OURS", ()))
    record = {
        "experiment": name,
        "paper": experiment.paper,
        "summary": experiment.summary,
        "quick": quick,
        "config": config_dict,
        "config_hash": digest,
        "seed": config_dict.get("seed"),
        "defaults_ours": {k: config_dict[k] for k in ours if k in config_dict},
        "versions": versions(),
        "timings": {"run_seconds": seconds},
        "figures": figure_files,
        "tables": sorted(result.tables),
        "checks": dataclasses.asdict(count_checks(checks)),
        "notes": result.notes,
        "command": list(sys.argv),  # what started the run; `attnlab run --config record.json` replays it
        "module": experiment.run.__module__,  # where a replay finds an experiment that no registry knows
        "code": code_fingerprint([experiment.run.__module__, experiment.config_type.__module__]),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
    }
    git = git_state()
    if git is not None:  # absent when attnlab does not run from a git checkout (an installed wheel)
        record["git"] = git
    write_json(run_dir / "record.json", record)
    return checks, seconds


def read_record(run_dir: str | Path) -> dict[str, Any]:
    """Load ``record.json`` of a run directory.

    Parameters
    ----------
    run_dir : path
        A directory that :func:`run_experiment` wrote.

    Returns
    -------
    dict
        The record: experiment, config, versions, timings, check counts, code fingerprint, git state.
    """
    return json.loads((Path(run_dir) / "record.json").read_text())
