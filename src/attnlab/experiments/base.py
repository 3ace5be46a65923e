"""What an experiment is, how it is registered, configured and run, and what it writes.

An experiment is a frozen dataclass config (plain-typed fields, defaults from the spec), a ``run`` function
``run(config, context) -> ExperimentResult``, and its theory checks. :func:`run_experiment` writes, atomically,
into one run directory:

- ``trajectory.parquet``: tidy table, one row per recorded (run, step);
- ``checks.csv``: one row per claim (claim, predicted, measured, tolerance, passed, source, kind);
- ``record.json``: config, seed, versions, timings, which defaults are ours rather than the paper's, the command
  line and the git commit of the code (``attnlab run --config record.json`` replays the run);
- one PNG and one PDF per figure, plus any extra tidy tables as Parquet.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pandas as pd

from attnlab._io import make_dir
from attnlab._validation import ValidationError
from attnlab._overrides import parse_overrides
from attnlab.callbacks import progress_bar
from attnlab.runner.provenance import git_state
from attnlab.runner.store import (
    config_hash,
    prepare_out,
    save_figure,
    versions,
    write_csv,
    write_json,
    write_parquet,
)

__all__ = [
    "Check",
    "Experiment",
    "ExperimentResult",
    "RunContext",
    "RunRecord",
    "check_close",
    "check_less",
    "get_experiment",
    "list_experiments",
    "make_config",
    "parse_overrides",
    "register",
    "run_experiment",
]

C = TypeVar("C")


@dataclass(frozen=True)
class Check:
    """One theory claim measured in a run.

    Parameters
    ----------
    claim : str
        The claim in words, e.g. ``"||W_t|| / (eta t) -> 1 (Lemma 7)"``.
    predicted : str or float
        What the theory predicts (a number, a bound or a trend).
    measured : str or float
        What the run measured.
    tolerance : str or float
        How far ``measured`` may be from ``predicted`` and still pass.
    passed : bool
    source : str
        Spec section that states the claim, e.g. ``"implicit-bias-ngd §8.1"``.
    kind : {"theory", "observation"}, default="theory"
        ``"theory"``: a claim the run must reproduce (a theorem, or a sanity property of our code); a failure
        means something is wrong and fails the run. ``"observation"``: a paper's *empirical* report about real
        models (faster than SGD, sparser weights, ...) set against what we measured; ``passed`` then reads
        "agrees with the paper", and a disagreement is a finding that is shown, never hidden, but does not fail
        the run.
    """

    claim: str
    predicted: Any
    measured: Any
    tolerance: Any
    passed: bool
    source: str = ""
    kind: str = "theory"

    def __post_init__(self) -> None:
        if self.kind not in CHECK_KINDS:
            raise ValidationError(f"Check.kind must be one of {CHECK_KINDS}, got {self.kind!r}")

    def as_row(self) -> dict[str, Any]:
        row = dataclasses.asdict(self)
        for key in ("predicted", "measured", "tolerance"):
            row[key] = _format_value(row[key])
        row["passed"] = bool(row["passed"])
        return row


CHECK_KINDS = ("theory", "observation")
CHECK_COLUMNS = ["claim", "predicted", "measured", "tolerance", "passed", "source", "kind"]


@dataclass(frozen=True)
class CheckCounts:
    """Totals of a check table: theory checks (must pass) and observations (agree or disagree with a paper)."""

    passed: int
    total: int
    agree: int
    observations: int

    @property
    def ok(self) -> bool:
        """Every theory check passed (observations never fail a run)."""
        return self.passed == self.total

    def describe(self) -> str:
        """``"12/12 checks passed"``, plus ``"; 2/5 observations agree with the paper"`` when there are any."""
        text = f"{self.passed}/{self.total} checks passed"
        if self.observations:
            text += f"; {self.agree}/{self.observations} observations agree with the paper"
        return text

    def __add__(self, other: CheckCounts) -> CheckCounts:
        return CheckCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))


def count_checks(checks: pd.DataFrame) -> CheckCounts:
    """Count a ``checks.csv`` table (boolean ``passed``); tables written before ``kind`` existed are all theory."""
    if not len(checks):
        return CheckCounts(0, 0, 0, 0)
    passed = checks["passed"].astype(bool)
    observation = checks["kind"] == "observation" if "kind" in checks else pd.Series(False, index=checks.index)
    return CheckCounts(
        passed=int((passed & ~observation).sum()),
        total=int((~observation).sum()),
        agree=int((passed & observation).sum()),
        observations=int(observation.sum()),
    )


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def check_close(claim: str, predicted: float, measured: float, rtol: float, source: str = "") -> Check:
    """A :class:`Check` that passes when ``|measured - predicted| <= rtol * |predicted|``."""
    passed = abs(measured - predicted) <= rtol * abs(predicted)
    return Check(claim, float(predicted), float(measured), f"rel {rtol:g}", bool(passed), source)


def check_less(claim: str, measured: float, bound: float, source: str = "", *, strict: bool = False) -> Check:
    """A :class:`Check` that passes when ``measured <= bound`` (``<`` if ``strict``)."""
    passed = measured < bound if strict else measured <= bound
    op = "<" if strict else "<="
    return Check(claim, f"{op} {bound:.6g}", float(measured), "bound", bool(passed), source)


@dataclass
class ExperimentResult:
    """What ``Experiment.run`` returns: tables, checks and figures, all drawn from the tables.

    Attributes
    ----------
    frame : pandas.DataFrame
        Tidy trajectory, one row per recorded (run, step), snake_case columns.
    checks : list of Check
    figures : dict of str to matplotlib Figure
        Saved as ``<name>.png`` and ``<name>.pdf``.
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
        """A progress bar (:func:`attnlab.callbacks.progress_bar`), shown as ``progress`` says."""
        return progress_bar(iterable, total=total, desc=desc, show=self.progress)


@dataclass(frozen=True)
class Experiment(Generic[C]):
    """A named, declarative experiment.

    Parameters
    ----------
    name : str
        Dotted name, ``"<paper>.<figure or check>"``, e.g. ``"implicit-bias.fig2"``.
    paper : str
        Spec file stem the experiment reproduces, e.g. ``"implicit-bias-ngd"``.
    summary : str
        One line for ``attnlab list``.
    config_type : type
        A frozen dataclass with plain-typed fields. A class attribute ``OURS`` (tuple of field names) lists
        defaults that are our proposals because the paper's numbers were lost; they are labelled in outputs.
    run : callable
        ``run(config, context) -> ExperimentResult``.
    quick : mapping
        Field overrides for ``--quick`` (CI-sized).
    """

    name: str
    paper: str
    summary: str
    config_type: type[C]
    run: Callable[[C, RunContext], ExperimentResult]
    quick: Mapping[str, Any] = field(default_factory=dict)


_REGISTRY: dict[str, Experiment[Any]] = {}


def register(experiment: Experiment[Any]) -> Experiment[Any]:
    """Add ``experiment`` to the registry (names are unique) and return it."""
    if experiment.name in _REGISTRY:
        raise ValueError(f"experiment {experiment.name!r} is registered twice")
    if not dataclasses.is_dataclass(experiment.config_type):
        raise TypeError(f"config_type of {experiment.name!r} must be a dataclass")
    unknown = set(experiment.quick) - {f.name for f in dataclasses.fields(experiment.config_type)}
    if unknown:
        raise ValueError(f"quick overrides of {experiment.name!r} name unknown fields {sorted(unknown)}")
    _REGISTRY[experiment.name] = experiment
    return experiment


def list_experiments(paper: str | None = None) -> list[Experiment[Any]]:
    """All registered experiments, sorted by name; ``paper`` filters by paper or by name prefix."""
    _load_all()
    exps = sorted(_REGISTRY.values(), key=lambda e: e.name)
    if paper is not None and paper != "all":
        exps = [e for e in exps if e.paper == paper or e.name.split(".")[0] == paper]
    return exps


def get_experiment(name: str) -> Experiment[Any]:
    """The experiment called ``name``; the error lists the names that exist."""
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ValidationError(f"unknown experiment {name!r}; known experiments: {known}") from None


def _load_all() -> None:
    import attnlab.experiments  # noqa: F401  (importing the package registers every experiment)


def make_config(experiment: Experiment[C], overrides: Sequence[str] | Mapping[str, Any] = (), quick: bool = False) -> C:
    """Default config of ``experiment``, then its quick overrides (if ``quick``), then ``overrides``."""
    base = experiment.config_type()
    if quick:
        base = dataclasses.replace(base, **experiment.quick)
    return dataclasses.replace(base, **parse_overrides(experiment.config_type, overrides))


@dataclass(frozen=True)
class RunRecord:
    """Where a finished run wrote its outputs, and its check table."""

    name: str
    out: Path
    checks: pd.DataFrame
    seconds: float

    @property
    def counts(self) -> CheckCounts:
        return count_checks(self.checks)

    @property
    def passed(self) -> bool:
        """Every theory check passed (observations that disagree with a paper do not fail a run)."""
        return self.counts.ok


def run_experiment(
    name: str,
    overrides: Sequence[str] | Mapping[str, Any] = (),
    *,
    quick: bool = False,
    out: str | Path | None = None,
    progress: bool = True,
    overwrite: bool | None = None,
) -> RunRecord:
    """Build the config of experiment ``name``, run it, and write its outputs.

    Parameters
    ----------
    name : str
        A registered experiment (see ``attnlab list``).
    overrides : list of "key=value" or mapping
        Config changes; unknown keys raise and list the known ones.
    quick : bool, default=False
        Use the CI-sized settings.
    out : path, optional
        Run directory; default ``runs/<name>-<config hash>``.
    progress : bool, default=True
        Show progress bars on a terminal.
    overwrite : bool, optional
        ``False``: refuse an ``out`` that holds another run; ``True``: empty it first (see
        :func:`attnlab.runner.store.prepare_out`); ``None`` (a sweep's own run directory): use ``out`` as it is.
    """
    experiment = get_experiment(name)
    config = make_config(experiment, overrides, quick)
    config_dict = dataclasses.asdict(config)
    digest = config_hash({"experiment": name, "config": config_dict})
    run_dir = Path(out) if out is not None else Path("runs") / f"{name}-{digest}"
    if overwrite is None:
        make_dir(run_dir)
    else:
        prepare_out(run_dir, {"experiment": name, "config_hash": digest}, overwrite=overwrite)
    start = time.perf_counter()
    # progress=True asks for bars where they can be seen: on a terminal (never forced into a piped log)
    result = experiment.run(config, RunContext(out=run_dir, progress=None if progress else False, quick=quick))
    seconds = time.perf_counter() - start

    write_parquet(run_dir / "trajectory.parquet", result.frame)
    checks = pd.DataFrame(
        [c.as_row() for c in result.checks],
        columns=CHECK_COLUMNS,
    )
    write_csv(run_dir / "checks.csv", checks)
    for table_name, table in result.tables.items():
        write_parquet(run_dir / f"{table_name}.parquet", table)
    figure_files = []
    for fig_name, figure in result.figures.items():
        figure_files += [p.name for p in save_figure(figure, run_dir / fig_name)]
        import matplotlib.pyplot as plt

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
    }
    git = git_state()
    if git is not None:  # absent when attnlab does not run from a git checkout (an installed wheel)
        record["git"] = git
    write_json(run_dir / "record.json", record)
    return RunRecord(name=name, out=run_dir, checks=checks, seconds=seconds)


def read_record(run_dir: str | Path) -> dict[str, Any]:
    """Load ``record.json`` of a run directory."""
    return json.loads((Path(run_dir) / "record.json").read_text())
