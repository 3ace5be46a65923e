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
    count_checks,
    get_experiment,
    list_experiments,
    make_config,
    observation,
    parse_overrides,
    register,
    run_experiment,
    spread_tolerance,
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
from attnlab.experiments import (  # noqa: E402,F401
    flagship,  # noqa: E402,F401
    implicit_bias,
    kq_nuclear,
    mirror_descent,
    multi_token,
    ntk,  # noqa: E402,F401
    real,  # noqa: E402,F401
    regression,  # noqa: E402,F401
)
