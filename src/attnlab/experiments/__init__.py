"""Named experiments, one module per paper; importing this package registers them all.

Run one with ``attnlab run <name>`` or :func:`run_experiment`; list them with ``attnlab list``.
"""

from attnlab.experiments.base import (
    Check,
    CheckCounts,
    Experiment,
    ExperimentResult,
    RunContext,
    RunRecord,
    check_close,
    check_greater,
    check_less,
    check_ordering,
    check_slope,
    observation,
    spread_tolerance,
    count_checks,
    get_experiment,
    list_experiments,
    make_config,
    parse_overrides,
    register,
    run_experiment,
)


__all__ = [
    "Check",
    "CheckCounts",
    "Experiment",
    "ExperimentResult",
    "RunContext",
    "RunRecord",
    "check_close",
    "check_greater",
    "check_less",
    "check_ordering",
    "check_slope",
    "observation",
    "spread_tolerance",
    "count_checks",
    "get_experiment",
    "list_experiments",
    "make_config",
    "parse_overrides",
    "register",
    "run_experiment",
]

# One import per paper module below; each registers its experiments on import.
from attnlab.experiments import flagship  # noqa: E402,F401
from attnlab.experiments import implicit_bias, kq_nuclear, mirror_descent  # noqa: E402,F401
from attnlab.experiments import ntk  # noqa: E402,F401
from attnlab.experiments import real  # noqa: E402,F401
from attnlab.experiments import regression  # noqa: E402,F401
