"""``attnlab reproduce``: run every registered experiment (or one paper's) as a sweep, then write the report.

The experiments run through the runner (:class:`~attnlab.report.experiment_task.ExperimentTask`), so a
reproduction that is stopped resumes where it stopped, and an experiment that raises is recorded in the report
while the others still run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from attnlab._validation import ValidationError
from attnlab.experiments import list_experiments
from attnlab.report.experiment_task import ExperimentTask
from attnlab.report.html import ReportSummary, build_report
from attnlab.runner import InProcessExecutor, Job, PoolExecutor, RayExecutor, ResultsStore, run_sweep

__all__ = ["reproduce"]


def reproduce(
    out: str | os.PathLike[str] = "report",
    *,
    paper: str | None = None,
    quick: bool = False,
    executor: InProcessExecutor | PoolExecutor | RayExecutor | None = None,
    fresh: bool = False,
    progress: bool = True,
) -> ReportSummary:
    """Run the experiments of ``paper`` (default all) and write ``out/index.html``.

    Parameters
    ----------
    out : path, default="report"
        Report folder: ``index.html``, ``summary.json``, ``index.parquet`` and ``runs/<experiment>-<hash>/``.
    paper : str, optional
        A spec stem (``"implicit-bias-ngd"``) or name prefix (``"implicit-bias"``); ``None`` or ``"all"``: all.
    quick : bool, default=False
        CI-sized settings of every experiment.
    executor : executor, optional
        Default in-process; a process pool runs experiments side by side.
    fresh : bool, default=False
        Rerun experiments that already finished in ``out`` (default: keep them, resume the rest).
    progress : bool, default=True
        Progress bar over experiments, with ETA.

    Returns
    -------
    ReportSummary
        Checks passed and failed, experiments that raised, and the path of ``index.html``.

    Raises
    ------
    ValidationError
        If no experiment matches ``paper``.
    """
    experiments = list_experiments(paper)
    if not experiments:
        papers = sorted({e.paper for e in list_experiments()})
        raise ValidationError(f"paper == {paper!r} matches no experiment; papers: {', '.join(papers) or 'none registered'}")
    task = ExperimentTask()
    jobs = [Job(task.name, {"experiment": e.name, "quick": quick}, index=i) for i, e in enumerate(experiments)]
    if fresh:
        store = ResultsStore(out)
        for job in jobs:
            shutil.rmtree(store.run_dir(job, task.label(job.params)), ignore_errors=True)
    run_sweep(jobs, out, executor, progress=progress)
    return build_report(Path(out))
