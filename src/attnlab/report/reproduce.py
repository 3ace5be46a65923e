"""``attnlab reproduce``: run every registered experiment (or one paper's) as a sweep, then write the report.

The experiments run through the runner (:class:`~attnlab.tasks.experiment.ExperimentTask`), so a
reproduction that is stopped resumes where it stopped, and an experiment that raises is recorded in the report
while the others still run.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pandas as pd

from attnlab._validation import ValidationError, check_seed
from attnlab.experiments import list_experiments
from attnlab.report.html import ReportSummary, build_report
from attnlab.runner import InProcessExecutor, Job, PoolExecutor, RayExecutor, run_sweep, write_csv
from attnlab.tasks.experiment import ExperimentTask
from attnlab.verify import CheckCounts, Experiment

__all__ = ["PAPER_COUNT_COLUMNS", "SEED_FIELDS", "paper_counts", "reproduce", "seed_field"]

#: The config fields that seed an experiment's draws, in the order they are looked for: ``first_seed`` (the first of
#: a config's data sets) first, since where a config has both, its ``seed`` draws only initialisations or directions
#: and ``--seed`` is there to redraw the data.
SEED_FIELDS = ("first_seed", "seed")

PAPER_COUNT_COLUMNS = [
    "paper",
    "experiments",
    "theory_checks",
    "theory_passed",
    "findings",
    "properties",
    "properties_passed",
    "observations",
    "observations_agree",
    "errors",
]


def reproduce(
    out: str | os.PathLike[str] = "report",
    *,
    paper: str | None = None,
    quick: bool = False,
    executor: InProcessExecutor | PoolExecutor | RayExecutor | None = None,
    fresh: bool = False,
    progress: bool = True,
    seed: int | None = None,
) -> ReportSummary:
    """Run the experiments of ``paper`` (default all) and write ``out/index.html``.

    Parameters
    ----------
    out : path, default="report"
        Report folder: ``index.html``, ``summary.json``, ``paper_counts.csv`` (:func:`paper_counts`),
        ``index.parquet`` and ``runs/<experiment>-<hash>/``. The report and its counts cover this call's
        experiments only; runs of earlier calls into ``out`` (other papers, the other settings) stay in ``runs/``.
    paper : str, optional
        A paper's spec stem (``"implicit-bias-ngd"``: its experiments, whatever their names) or an experiment
        group, the part of names before the first dot (``"implicit-bias"``: ``implicit-bias.fig2``, ...; a name
        without a dot, ``"flagship"``, is its own group); ``None`` or ``"all"``: all. One experiment by its full
        name is refused: :func:`attnlab.experiments.run_experiment` (``attnlab run NAME``) runs it.
    quick : bool, default=False
        CI-sized settings of every experiment.
    executor : executor, optional
        Default in-process; a process pool runs experiments side by side.
    fresh : bool, default=False
        Rerun experiments that already finished in ``out``. By default a finished experiment is reused when its
        files are intact and the code and library versions that computed it are the current ones
        (:mod:`attnlab.runner.fingerprint`); any other is computed again. Either way each entry of the report
        says "computed now" (and why) or "reused from <time, commit>". A run that another process is computing
        is never deleted, even with ``fresh``.
    progress : bool, default=True
        Progress bar over experiments, with ETA.
    seed : int, optional
        Run every experiment that has a seed field (:func:`seed_field`) with that field set to ``seed``: the same
        reproduction on other draws, to see which verdicts hold beyond the seed they were declared at. Experiments
        without one are left out of the call (and its report). Seeded runs are separate runs in ``out``. A
        ``first_seed`` seeds a run's data sets ``S, S + 1, ...``: nearby seeds share data sets, and ``S`` equal to
        the default reruns the default draw.

    Returns
    -------
    ReportSummary
        Checks passed and failed, experiments that raised, and the path of ``index.html``.

    Raises
    ------
    ValidationError
        If no experiment matches ``paper`` (the message points an experiment's full name to ``attnlab run``),
        ``seed`` is not an integer >= 0, or no matching experiment has a seed field.
    """
    experiments = list_experiments(paper)
    if not experiments:
        raise ValidationError(_unknown_paper(paper))
    seeded: dict[str, dict[str, int]] = {e.name: {} for e in experiments}
    if seed is not None:
        check_seed("seed", seed)
        seeded = {e.name: {field: seed} for e in experiments if (field := seed_field(e)) is not None}
        if not seeded:
            raise ValidationError(
                f"no experiment of paper {paper!r} has a seed field ({', '.join(SEED_FIELDS)}); run it without seed"
            )
    task = ExperimentTask()
    longest_first = sorted((e for e in experiments if e.name in seeded), key=lambda e: -e.cost)  # Experiment.cost
    jobs = [
        Job(task.name, {"experiment": e.name, "quick": quick, **seeded[e.name]}, index=i)
        for i, e in enumerate(longest_first)
    ]
    started = time.time()
    run_sweep(jobs, out, executor, progress=progress, fresh=fresh)
    # only this call's runs: the folder keeps those of other papers and of the other settings (quick or full)
    summary = build_report(Path(out), computed_since=started, keys=[job.key for job in jobs])
    write_csv(Path(out) / "paper_counts.csv", paper_counts(summary))
    return summary


def _unknown_paper(paper: str | None) -> str:
    """Why ``paper`` selects nothing: the papers and groups it could be, and ``attnlab run`` for one experiment."""
    everything = list_experiments()
    papers = sorted({e.paper for e in everything})
    groups = sorted({e.name.split(".")[0] for e in everything})
    single = next((e for e in everything if e.name == paper), None)
    if single is not None:
        return (
            f"paper == {paper!r} is one experiment, not a paper or group; run it alone with `attnlab run {paper}` "
            f"(add --quick for CI-sized settings), or reproduce its whole paper, {single.paper}"
        )
    return (
        f"paper == {paper!r} matches no experiment; papers: {', '.join(papers) or 'none registered'}; groups "
        f"(the part of names before the first dot): {', '.join(groups) or 'none'}; or 'all'. One experiment runs "
        "with `attnlab run NAME`"
    )


def seed_field(experiment: Experiment) -> str | None:
    """The config field that seeds ``experiment``'s draws: the first of :data:`SEED_FIELDS` its config has
    (``first_seed``, the data sets', before ``seed``).

    Parameters
    ----------
    experiment : Experiment

    Returns
    -------
    str or None
        ``None`` when the config has none (its draws are fixed, or seeded by a tuple of seeds).
    """
    names = {field.name for field in dataclasses.fields(experiment.config_type)}
    return next((name for name in SEED_FIELDS if name in names), None)


def paper_counts(summary: ReportSummary) -> pd.DataFrame:
    """Per paper: theorem predictions (passed, findings), properties of our code (hold), observations (agree).

    A theory check is a theorem's prediction: it fails the run unless it is a finding (it failed, and a written
    investigation explains why; ``theory_checks - theory_passed - findings`` are the failures). A property of our
    code fails the run when it does not hold. An observation sets a paper's remark about its figure or table
    against our measurement (docs/theory/<paper>.md §9) and never fails a run. ``errors`` counts the experiments
    that did not finish (raised, damaged, or never ran).

    Parameters
    ----------
    summary : ReportSummary
        From :func:`reproduce` or :func:`attnlab.report.build_report`.

    Returns
    -------
    pandas.DataFrame
        One row per paper, columns :data:`PAPER_COUNT_COLUMNS`, sorted by paper.
    """
    rows = []
    for paper in sorted({e.paper for e in summary.entries}):
        entries = [e for e in summary.entries if e.paper == paper]
        counts = sum((e.counts for e in entries), CheckCounts(0, 0, 0, 0))
        rows.append(
            [
                paper,
                len(entries),
                counts.total,
                counts.passed,
                counts.findings,
                counts.properties,
                counts.properties_passed,
                counts.observations,
                counts.agree,
                sum(e.status != "done" for e in entries),
            ]
        )
    return pd.DataFrame(rows, columns=PAPER_COUNT_COLUMNS)
