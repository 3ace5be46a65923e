"""Declare a theorem's prediction as a check, show that it can fail, run it, and record what it measured.

An :class:`Experiment` is a frozen dataclass config, a ``run(config, context)`` function that returns an
:class:`ExperimentResult` (a tidy frame, check rows, figures), and its declared :class:`Claim` objects, each naming
the paper result it tests and a :class:`Falsifier`: a small plausible wrong mechanism under which its rows must
fail. :func:`run_experiment` runs any experiment (the project's named ones, through
:func:`attnlab.experiments.run_experiment`, or one of your own) and writes its run directory.

- :mod:`attnlab.verify.check`: :class:`Check`, one row of ``checks.csv``, and its counts;
- :mod:`attnlab.verify.compare`: the helpers that build rows from numbers (close, bounds, ordering, slopes, rate
  shapes, observations) and write the tolerance from what they test;
- :mod:`attnlab.verify.fits`: the least-squares slopes (plain and weighted) behind the slope rows;
- :mod:`attnlab.verify.claim`: :class:`Claim`;
- :mod:`attnlab.verify.declared`: a run's rows against the declared claims (:func:`check_declared`), and the old
  readings beside them (:func:`with_revisions`);
- :mod:`attnlab.verify.falsifier`: :class:`Falsifier`, a wrong mechanism patched in by name;
- :mod:`attnlab.verify.reading`: :class:`Reading` (how a claim is read, fixed before it runs), :class:`Revision`
  (an old reading kept with its outcome) and :class:`Finding` (a theorem row our runs contradict, investigated);
- :mod:`attnlab.verify.lock`: the lock of readings, a digest per claim, which a reading may not leave silently;
- :mod:`attnlab.verify.experiment`: :class:`Experiment`, :func:`run_experiment` and what a run writes;
- :mod:`attnlab.verify.coverage`: which numbered results of a paper the declared claims cover;
- :mod:`attnlab.verify.registry`: experiments by name from a catalog, and the results of their papers;
- :mod:`attnlab.verify.replay`: a recorded run, run again.
"""

from attnlab.verify.check import CHECK_COLUMNS, CHECK_KINDS, CHECK_VERDICTS, Check, CheckCounts, count_checks
from attnlab.verify.claim import FALSIFIER_KINDS, Claim, Falsifier, check_declared, with_revisions
from attnlab.verify.compare import (
    OBSERVATION_MARKS,
    check_close,
    check_greater,
    check_less,
    check_ordering,
    check_rate_shape,
    check_slope,
    fit_slope,
    fit_weighted_slope,
    observation,
    spread_observation,
    spread_tolerance,
)
from attnlab.verify.coverage import PaperResult
from attnlab.verify.experiment import (
    Experiment,
    ExperimentResult,
    RunContext,
    RunRecord,
    make_config,
    read_record,
    run_experiment,
)
from attnlab.verify.reading import FULL_UNCHANGED, Finding, Reading, Revision, old_sizes, pinned, size_change
from attnlab.verify.registry import CatalogEntry, Registry
from attnlab.verify.replay import load_record, rerun
from attnlab.verify.shares import share_lower_bound
from attnlab.verify.steps import at_steps, geometric_steps

__all__ = [
    "at_steps",
    "geometric_steps",
    "CHECK_COLUMNS",
    "CHECK_KINDS",
    "CHECK_VERDICTS",
    "FALSIFIER_KINDS",
    "OBSERVATION_MARKS",
    "CatalogEntry",
    "Check",
    "CheckCounts",
    "Claim",
    "Experiment",
    "ExperimentResult",
    "Falsifier",
    "Finding",
    "PaperResult",
    "Reading",
    "Revision",
    "Registry",
    "RunContext",
    "RunRecord",
    "check_close",
    "check_declared",
    "check_greater",
    "check_less",
    "check_ordering",
    "check_rate_shape",
    "check_slope",
    "count_checks",
    "fit_slope",
    "fit_weighted_slope",
    "load_record",
    "make_config",
    "observation",
    "old_sizes",
    "pinned",
    "size_change",
    "FULL_UNCHANGED",
    "read_record",
    "rerun",
    "run_experiment",
    "share_lower_bound",
    "spread_observation",
    "spread_tolerance",
    "with_revisions",
]
