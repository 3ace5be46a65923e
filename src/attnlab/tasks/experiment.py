"""The ``experiment`` sweep task: one named experiment per run, so sweeps and ``attnlab reproduce`` share the runner.

A run's parameters are ``experiment`` (a registered name), optionally ``quick`` (bool), and any config field
of that experiment as an override, e.g. ``{experiment: implicit-bias.fig2, n: 8, seed: 3}``. The run directory
gets what :func:`attnlab.experiments.run_experiment` writes (``record.json`` last).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, run_experiment
from attnlab.runner import Task
from attnlab.verify import make_config

__all__ = ["ExperimentTask"]


def _split(params: dict[str, Any]) -> tuple[str, bool, dict[str, Any]]:
    name = params.get("experiment")
    if not isinstance(name, str):
        raise ValidationError(f"experiment runs need experiment: <name> (see `attnlab list`), got {name!r}")
    quick = params.get("quick", False)
    if not isinstance(quick, bool):
        raise ValidationError(f"quick must be true or false, got {quick!r}")
    # YAML lists become the tuples that config fields hold
    overrides = {
        k: tuple(v) if isinstance(v, list) else v for k, v in params.items() if k not in ("experiment", "quick")
    }
    return name, quick, overrides


class ExperimentTask(Task):
    """Sweep task ``experiment``: run a registered experiment with config overrides."""

    name = "experiment"

    def check(self, params: dict[str, Any]) -> None:
        """Refuse an unknown experiment or config field (the message lists the known ones).

        Parameters
        ----------
        params : dict of str to Any
            ``experiment`` (a registered name), optionally ``quick`` (bool), and config fields as overrides.

        Raises
        ------
        ValidationError
            When ``experiment`` is missing or unknown, ``quick`` is not a bool, or an override names no field of
            the experiment's config or has a value the config refuses.
        """
        name, quick, overrides = _split(params)
        make_config(get_experiment(name), overrides, quick)

    def canonical(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with each config override as the experiment's config holds it (``n: 8.0`` as ``8`` for an
        int field, a list as a tuple).

        Parameters
        ----------
        params : dict of str to Any
            ``experiment``, optionally ``quick``, and config fields as overrides.

        Returns
        -------
        dict of str to Any
            The same keys; ``params`` as written when :meth:`check` refuses them.
        """
        try:
            name, quick, overrides = _split(params)
            config = make_config(get_experiment(name), overrides, quick)
        except ValidationError:
            return params  # check names what is wrong
        return {**params, **{key: getattr(config, key) for key in overrides}}

    def label(self, params: dict[str, Any]) -> str:
        return str(params.get("experiment", self.name))

    def modules(self, params: dict[str, Any]) -> list[str]:
        """The modules of the experiment's ``run`` and config class (an experiment may live outside attnlab).

        Parameters
        ----------
        params : dict of str to Any
            The run's parameters; only ``experiment`` is read.

        Returns
        -------
        list of str
            Two dotted module names (equal when both live in one module).

        Raises
        ------
        ValidationError
            When ``experiment`` is missing or unknown.
        """
        experiment = get_experiment(_split(params)[0])
        return [experiment.run.__module__, experiment.config_type.__module__]

    def run(self, params: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        name, quick, overrides = _split(params)
        record = run_experiment(
            name, overrides, quick=quick, out=run_dir, progress=False, overwrite=None
        )  # the store's
        counts = record.counts
        return {"checks_passed": counts.passed, "checks_total": counts.total}
