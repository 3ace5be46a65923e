"""The rate predictions of §8 (items 1-13) as one experiment: fixed-decoder parts on Example 1, joint on DM.

Spec: docs/theory/implicit-bias-ngd.md §8 (predictions), §6 (data). Reads: config, build (data, W-SVM), measure
and check (:mod:`.rates_fixed`, :mod:`.rates_joint`), figure.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from attnlab._validation import ValidationError, check_scalar
from attnlab.data import dm, example1
from attnlab.experiments.implicit_bias import rates_fixed, rates_joint, rates_landscape
from attnlab.experiments.implicit_bias.common import Example1Config, check_windows
from attnlab.experiments.implicit_bias.figures import rates_figure
from attnlab.experiments.registry import register
from attnlab.svm import attention_svm, head_svm
from attnlab.verify import Experiment, ExperimentResult, RunContext

__all__ = ["RatesConfig", "run_rates"]


@dataclass(frozen=True)
class RatesConfig(Example1Config):
    """The predictions of spec §8 as measured checks, each drawn next to its measurement.

    Spec: implicit-bias-ngd §8 items 1-8 (fixed decoder, NGD/GD/Polyak on Example 1) and 9-13 (joint A6 on DM).
    Every value is ours; ``directions >= 20`` follows the spec's test of globality (§8.3).

    Attributes
    ----------
    n : int
        Sequences of the Example-1 data.
    init_scale : float
        Standard deviation of the entries of the single NGD path's ``W_0`` (Lemma 4).
    eta : float
        NGD's step length (the single path and the directions).
    gd_lr : float
        GD's step size (directions).
    steps : int
        Steps of the fixed-decoder runs; >= 7, so that each quarter of the second half of the single NGD path holds
        the >= 2 steps lemma1-slope fits, and with ``record_every`` it must leave the direction runs >= 2 records in
        the second half (ngd-rate) and in the last decade (gd-log-norm) and put the record nearest ``steps / 10``
        strictly between 1 and ``steps`` (ngd-global's ``ln t0``); ours, what the fits need.
    directions : int
        Random initial directions (NGD, GD and Polyak each start from all of them).
    direction_norm : float
        ``||W_0||`` of every random direction.
    record_every : int
        Steps between recorded rows of the direction runs (rate shapes need >= 2 decades above it); >= 2 and <
        ``steps``: polyak-global reads the record nearest ``record_every`` against the last through ``ln
        record_every`` (ours).
    random_W : int
        Random ``W`` at which Polyak's step length is bounded.
    n_joint : int
        Sequences of the DM data (joint training).
    d_joint : int
        Token width of the DM data.
    sigma_opt : float
        Norm scale of DM's optimal token.
    sigma_oth : float
        Norm scale of DM's other token.
    joint_lr : float
        Step size ``eta`` of the joint rule A6.
    alpha : float
        Decay exponent of A6, in [2/3, 1) for Theorem 2 (its hypothesis; other values are refused, since the joint
        rows' readings assume it).
    joint_steps : int
        Steps of the joint run; w-log-norm's log-against-power fit needs >= 2 decades of records, from the record
        nearest ``max(joint_record_every, joint_steps // 100)`` to ``joint_steps``: ``joint_steps >= 100 x
        joint_record_every``, and that record at most ``joint_steps / 100`` (a multiple of ``100 x
        joint_record_every`` always does; ours, what the fit needs).
    joint_record_every : int
        Steps between recorded rows of the joint run.
    loss : str
        ``"exp"`` (the theory's) or ``"logistic"``.
    seed : int
        Seed of both data sets; ``seed + 1..3`` draw the initialisations and random ``W``.
    """

    n: int = 4
    T: int = 4
    init_scale: float = 0.01
    eta: float = 0.1
    gd_lr: float = 1.0
    steps: int = 2000
    directions: int = 24
    direction_norm: float = 1.0
    record_every: int = 20
    random_W: int = 200  # noqa: N815 (a config field named for the spec's W)
    n_joint: int = 8
    d_joint: int = 200
    sigma_opt: float = 2.0
    sigma_oth: float = 1.0
    joint_lr: float = 0.5
    alpha: float = 2.0 / 3.0
    joint_steps: int = 20_000
    joint_record_every: int = 20
    loss: str = "exp"
    seed: int = 0

    OURS = (
        "n", "T", "d", "rho", "sigma", "init_scale", "eta", "gd_lr", "steps", "directions", "direction_norm",
        "random_W", "n_joint", "d_joint", "sigma_opt", "sigma_oth", "joint_lr", "alpha", "joint_steps",
    )  # fmt: skip

    POSITIVE = ("rho", "sigma", "eta", "gd_lr", "direction_norm", "sigma_opt", "sigma_oth", "joint_lr")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("directions", "random_W", "n_joint", "d_joint", "joint_steps", "joint_record_every"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        check_scalar("alpha", self.alpha)
        if not 2 / 3 <= self.alpha < 1:  # spec §4 A6, Thm 2: alpha in [2/3, 1)
            raise ValidationError(
                f"alpha == {self.alpha!r}, must be in [2/3, 1): Theorem 2's hypothesis on A6's decay (t+1)^-alpha, "
                "which the joint rows' readings (loss-rate's 1 - alpha among them) assume"
            )
        check_scalar("init_scale", self.init_scale, low=0.0)
        if self.steps < 7:
            raise ValidationError(
                f"steps == {self.steps}, must be >= 7: lemma1-slope fits a slope on each quarter of the second half of "
                "the single NGD path, [steps // 2, 3 steps // 4) and [3 steps // 4, steps], >= 2 steps each (ours)"
            )
        if not 2 <= self.record_every < self.steps:
            raise ValidationError(
                f"record_every == {self.record_every}, must be in [2, steps == {self.steps}): polyak-global reads the "
                "record nearest record_every against the last through ln record_every / ln steps (ours)"
            )
        check_windows("steps", self.steps, "record_every", self.record_every, rates_fixed.short_windows)
        rates_joint.check_joint_steps(self.joint_steps, self.joint_record_every)


def run_rates(config: RatesConfig, ctx: RunContext) -> ExperimentResult:
    """Spec §8 items 1-13 on one Example-1 data set (fixed decoder) and one DM data set (joint)."""
    data = example1(config.n, config.T, config.d, config.rho, config.sigma, seed=config.seed)
    sol = attention_svm(data, norm="fro")
    single, checks, predicted_slope = rates_fixed.ngd_path(config, ctx, data, sol)
    directions, more = rates_fixed.directions(config, ctx, data, sol)
    polyak, bounds = rates_fixed.polyak_bounds(config, data, sol)
    bounds += rates_landscape.key_correlation(config, data, sol) + rates_landscape.violated_steps(config, ctx, data)
    joint_data = dm(config.n_joint, config.d_joint, config.sigma_opt, config.sigma_oth, seed=config.seed)
    W_mm, u_mm = attention_svm(joint_data, norm="fro").W, head_svm(joint_data, p=2.0).v
    joint, joint_checks, ratio_note = rates_joint.joint_rates(config, ctx, joint_data, W_mm, u_mm)
    frame = pd.concat([single, directions, polyak, joint], ignore_index=True)
    figure = rates_figure(config, frame, float(sol.W.norm()), predicted_slope)
    checks += more + bounds + joint_checks
    return ExperimentResult(frame=frame, checks=checks, figures={"rates": figure}, notes=[ratio_note])


register(
    Experiment(
        name="implicit-bias.rates",
        cost=66.0,
        config_type=RatesConfig,
        run=run_rates,
        quick={
            "n": 3,
            "T": 3,
            "d": 16,
            "steps": 1000,
            "directions": 20,
            "record_every": 10,
            "random_W": 50,
            "n_joint": 4,
            "d_joint": 30,
            "joint_steps": 10000,
            "joint_record_every": 10,
        },  # fmt: skip
        claims=rates_fixed.CLAIMS + rates_landscape.CLAIMS + rates_joint.CLAIMS,
        falsifiers=rates_fixed.FALSIFIERS + rates_landscape.FALSIFIERS + rates_joint.FALSIFIERS,
    )
)
