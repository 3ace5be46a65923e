"""Experiments of preconditioned-regression (Goel, Soltanolkotabi, Bartlett 2026): softmax attention fitted to
in-context linear regression with structure-aware preconditioned, regularized GD from a spectral start.

Spec: docs/theory/preconditioned-regression.md. Registered experiments:

- ``regression.fig1``: population loss vs iteration, ours (spectral start) vs SGD (random start) (spec §9.1);
- ``regression.fig2``: every method from the same random start, with Adam and the ablations of §6.5;
- ``regression.theory``: every row of the table of spec §8 as a measured check;
- ``regression.scaling``: population excess loss as a function of the sample size n and the iteration T (Theorem 2).

Every number of the paper's experiments was lost (spec §9.2): the defaults listed in each config's ``OURS`` are
our proposals, and the reference numbers of spec §9.3 come from the spec's reconstruction, not from the paper.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.stats
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.experiments.base import (
    Check,
    Experiment,
    ExperimentResult,
    RunContext,
    check_close,
    check_greater,
    check_less,
    observation,
    register,
)
from attnlab.experiments.plotting import (
    house_figure,
    label_axes,
    label_ours,
    log_gap_axis,
    new_figure,
    plot_band,
    theory_hline,
)
from attnlab.optim.preconditioned import PreconditionedGD
from attnlab.optim.spec import parse_optimizer
from attnlab.regression import (
    MinibatchOracle,
    MonteCarloOracle,
    PopulationOracle,
    RegressionProblem,
    empirical,
    empirical_covariance,
    fit,
    make_problem,
    manifold_point,
    population_excess_loss,
    population_gradient,
    project,
    random_rotation,
    regularizer,
    regularizer_gradient,
    sample,
    spectral_init,
    sym_inv_sqrt,
    token_matrix,
    unwhiten,
    whiten,
)
from attnlab.regression._checks import TOKENS
from attnlab.regression.oracles import CONTEXTS
from attnlab.regression.renormalization import RENORMALIZATIONS

__all__ = ["FigureOneConfig", "FigureTwoConfig", "METHODS", "REFERENCE_GAPS", "Method"]

SOURCE = "docs/theory/preconditioned-regression.md"


# ---- methods: Algorithm 1, the baselines and the ablations of spec §6.5 -----------------------------------------


@dataclass(frozen=True)
class Method:
    """One training recipe: where it starts, which optimizer steps, whether the regularizer is on (spec §6.5)."""

    label: str
    start: str  # "spectral" (Algorithm S, spec §6.1) or "random" (i.i.d. N(0, init_std^2) entries, spec §6.5)
    optimizer: str  # "preconditioned" (spec §5.4, built from the covariances), else an attnlab.optim.spec string
    regularized: bool  # add mu * grad R_hat (spec §3.4)


METHODS = {
    "ours": Method("ours (Alg. 1, spectral start)", "spectral", "preconditioned", True),
    "ours_random": Method("ours (Alg. 1, random start)", "random", "preconditioned", True),
    "sgd": Method("SGD, random start", "random", "sgd", False),
    "adam": Method("Adam, random start", "random", "adam", False),
    "precond_only": Method("preconditioner only, random", "random", "preconditioned", False),
    "reg_only": Method("regularizer only, random", "random", "sgd", True),
    "spectral_sgd": Method("SGD, spectral start", "spectral", "sgd", False),
}

REFERENCE_STEPS = (0, 10, 100, 300, 1000, 2000)
REFERENCE_GAPS = {  # spec §9.3: population gap L - L_irr of the spec's reconstruction (seed 0, eta = 1e-2)
    "ours": (5.2e-5, 5.3e-5, 6.5e-5, 1.6e-4, 2.2e-4, 2.1e-4),
    "ours_random": (6.2e2, 9.5e1, 4.3e-1, 3.4e-2, 2.3e-3, 4.7e-4),
    "sgd": (6.2e2, 2.1e1, 1.7e-1, 4.4e-2, 5.1e-2, 3.3e-2),
    "precond_only": (6.2e2, 1.1e2, 9.3e-1, 9.2e-2, 9.8e-2, 1.0e-1),
    "reg_only": (6.2e2, 1.5e1, 1.2e-1, 1.2e-2, 2.8e-3, 3.4e-4),
}


def _optimizer_factory(method: Method, lr: float, covariance: torch.Tensor, token_covariance: torch.Tensor):
    def make(params: list[torch.Tensor]) -> torch.optim.Optimizer:
        V, Q = params
        if method.optimizer == "preconditioned":
            return PreconditionedGD.for_attention(V, Q, covariance, lr=lr, token_covariance=token_covariance)
        return parse_optimizer(method.optimizer).build(params, lr=lr)  # "sgd", "adam": the one optimizer grammar

    return make


def _gap_metrics(problem: RegressionProblem, tokens: str) -> dict[str, Callable]:
    Sigma_z = problem.token_covariance(tokens)
    return {
        "gap": lambda V, Q: population_excess_loss(V, Q, problem.Sigma, problem.W_star, tokens=tokens),
        "dist": lambda V, Q: project(V, Q, problem.W_star, problem.Sigma, Sigma_z).distance,
    }


# ---- figures 1 and 2 ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _FigureConfig:
    """Shared settings of figures 1 and 2 (spec §9.2 defaults; all are ours because the paper's were lost)."""

    d: int = 4  # spec §9.2 [U]
    k: int = 8  # spec §9.2 [U], k >= d (A2)
    noise_std: float = 0.1  # spec §9.2 [U]: L_irr = k sigma^2 = 0.08
    c3: float = 0.25  # spec §7 / §9.2 [U]: ||W* Sigma^1/2||_op
    n: int = 10_000  # spec §9.2 [U]
    batch_size: int = 256  # spec §9.2 [U]
    lr: float = 1e-2  # spec §9.2 [U], the same for every method
    steps: int = 2000  # spec §9.1: SGD unconverged after 2000 iterations
    mu: float = 0.25  # spec §3.4 [R]
    init_std: float = 1.0  # spec §6.5 [R]: N(0, 1) entries of the random start
    seeds: int = 5  # spec §9.2: median and range over 5 seeds
    seed: int = 0  # data, random start and minibatches of run r use seed + r
    problem_seed: int = 0  # one fixed (Sigma, W*) for all runs
    context: str = "minibatch"  # spec §6.3 [R]
    tokens: str = "covariates"  # spec §0 / §10.1 [R]
    renormalization: str = "none"  # spec §6.4 (workshop version only)
    record_every: int = 10
    methods: tuple[str, ...] = ()

    OURS = ("d", "k", "noise_std", "c3", "n", "batch_size", "lr", "mu", "init_std")

    def __post_init__(self) -> None:
        for name in ("d", "k", "n", "batch_size", "steps", "seeds", "record_every"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        if self.k < self.d:
            raise ValidationError(f"k == {self.k} < d == {self.d}: assumption A2 needs k >= d; raise k")
        check_scalar("batch_size", self.batch_size, kind=int, high=self.n)
        for name in ("noise_std", "mu"):
            check_scalar(name, getattr(self, name), low=0.0)
        for name in ("c3", "lr", "init_std"):
            check_scalar(name, getattr(self, name), low=0.0, low_inclusive=False)
        check_in("context", self.context, CONTEXTS)
        check_in("tokens", self.tokens, TOKENS)
        check_in("renormalization", self.renormalization, RENORMALIZATIONS)
        for method in self.methods:
            check_in("methods", method, tuple(METHODS))


@dataclass(frozen=True)
class FigureOneConfig(_FigureConfig):
    """Figure 1: ours from the spectral start vs SGD from a random start (plus SGD from the spectral start)."""

    methods: tuple[str, ...] = ("ours", "sgd", "spectral_sgd")


@dataclass(frozen=True)
class FigureTwoConfig(_FigureConfig):
    """Figure 2: every method from the same random start (ours, SGD, Adam, the ablations of §6.5)."""

    methods: tuple[str, ...] = ("ours_random", "sgd", "adam", "precond_only", "reg_only")


def _train_methods(config: _FigureConfig, ctx: RunContext) -> tuple[pd.DataFrame, RegressionProblem, list[str]]:
    """Run every method of ``config`` on the same samples, random starts and minibatches; a tidy frame."""
    problem = make_problem(config.d, config.k, noise_std=config.noise_std, c3=config.c3, seed=config.problem_seed)
    X, Y = sample(problem, config.n, runs=config.seeds, seed=config.seed)
    covariance = empirical_covariance(X)  # spec §6.2: Sigma_hat of the whole sample, (R, d, d)
    token_covariance = empirical_covariance(token_matrix(X, Y, config.tokens))
    p = token_covariance.shape[-1]
    gen = torch.Generator().manual_seed(config.seed + 1)
    random_start = (
        config.init_std * torch.randn(config.seeds, config.k, p, generator=gen, dtype=torch.float64),
        config.init_std * torch.randn(config.seeds, p, config.d, generator=gen, dtype=torch.float64),
    )
    spectral_start = spectral_init(X, Y, tokens=config.tokens)
    frames, notes = [], []
    for name in config.methods:
        method = METHODS[name]
        V0, Q0 = spectral_start if method.start == "spectral" else random_start
        oracle = MinibatchOracle(
            X, Y, config.batch_size, context=config.context, tokens=config.tokens, seed=config.seed + 2
        )  # same seed for every method: the same minibatch at each iteration (spec §6.5)
        result = fit(
            V0,
            Q0,
            oracle,
            _optimizer_factory(method, config.lr, covariance, token_covariance),
            steps=config.steps,
            metrics=_gap_metrics(problem, config.tokens),
            record_every=config.record_every,
            record_steps=set(REFERENCE_STEPS),
            regularizer_weight=config.mu if method.regularized else 0.0,
            covariance=covariance,
            token_covariance=token_covariance,
            renormalization=config.renormalization,
            progress=ctx.progress,
            desc=name,
        )
        for run in torch.nonzero(result.diverged).flatten().tolist():
            notes.append(
                f"{name}, seed {config.seed + run}: iterates blew up at step {int(result.diverged_at[run])}; "
                f"stopped there with the last good iterate (lower lr or use renormalization)"
            )
        frame = result.frame.assign(method=name, seed=lambda f: config.seed + f.run)
        frames.append(frame.assign(loss=frame.gap + problem.irreducible_loss))
    return pd.concat(frames, ignore_index=True), problem, notes


def _reference_table(frame: pd.DataFrame, methods: tuple[str, ...]) -> pd.DataFrame:
    """Our median/min/max gap at the steps of spec §9.3 next to the spec's reference numbers."""
    rows = []
    for name in methods:
        ours = frame[frame.method == name]
        for step, reference in zip(REFERENCE_STEPS, REFERENCE_GAPS.get(name, (math.nan,) * len(REFERENCE_STEPS))):
            at = ours[ours.step == step].gap
            rows.append(
                {
                    "method": name,
                    "step": step,
                    "gap_median": float(at.median()) if len(at) else math.nan,
                    "gap_min": float(at.min()) if len(at) else math.nan,
                    "gap_max": float(at.max()) if len(at) else math.nan,
                    "reference_gap": reference,
                }
            )
    return pd.DataFrame(rows)


@house_figure
def _figure(frame: pd.DataFrame, config: _FigureConfig, problem: RegressionProblem, title: str):
    fig, axes = new_figure(2, width=4.4, height=3.4)
    for name in config.methods:
        rows = frame[frame.method == name]
        plot_band(axes[0], rows, "step", "loss", label=METHODS[name].label, logy=True)
        plot_band(axes[1], rows, "step", "gap", label=METHODS[name].label)
    theory_hline(axes[0], problem.irreducible_loss, "$L_{irr}$", lw=0.8)
    axes[0].set_ylabel(r"population loss $L(\theta_t)$")
    log_gap_axis(axes[1], r"$L(\theta_t) - L_{irr}$")
    for ax in axes:
        ax.set_xlabel("iteration $t$")
    axes[0].legend()
    fig.suptitle(f"{title} (median and range over {config.seeds} seeds)")
    label_ours(fig, config)
    return fig


def _final(frame: pd.DataFrame, method: str, step: int | None = None) -> pd.Series:
    """Each run's gap at ``step`` (default: its last recorded step)."""
    rows = frame[frame.method == method]
    if step is not None:
        rows = rows[rows.step == step]
    return rows.sort_values("step").groupby("run").gap.last()


def run_fig1(config: FigureOneConfig, ctx: RunContext) -> ExperimentResult:
    """Figure 1 (spec §9.1): ours near-optimal from t = 0; SGD far above and unconverged after T steps."""
    frame, problem, notes = _train_methods(config, ctx)
    irr, checks = problem.irreducible_loss, []
    source = f"{SOURCE} §9.1 fig. 1 (the paper's remark)"
    if {"ours", "sgd"} <= set(config.methods):
        ours0 = float(_final(frame, "ours", 0).median())
        checks.append(
            observation(
                "fig. 1: ours at t = 0 (spectral start) is near-optimal: gap / L_irr (agrees below 1e-2)",
                "near-optimal",
                ours0 / irr,
                ours0 / irr <= 1e-2,
                source,
            )
        )
        ours_max = float(frame[frame.method == "ours"].groupby("run").gap.max().max())
        checks.append(
            observation(
                "fig. 1: ours stays near-optimal for all t: max gap / L_irr (agrees below 5e-2; "
                "the minibatch floor of §9.3 lies above the start's gap)",
                "near-optimal",
                ours_max / irr,
                ours_max / irr <= 5e-2,
                source,
            )
        )
        sgd0 = float(frame[(frame.method == "sgd") & (frame.step == 0)].loss.median()) / irr
        checks.append(
            observation(
                "fig. 1: SGD's random start is > 3 orders of magnitude above: L(theta_0) / L_irr",
                "> 1000",
                sgd0,
                sgd0 > 1e3,
                source,
            )
        )
        ratio = float(_final(frame, "sgd").median() / _final(frame, "ours").median())
        checks.append(
            observation(
                f"fig. 1: SGD not converged at t = {config.steps}: gap_SGD / gap_ours (agrees above 10)",
                "> 10",
                ratio,
                ratio > 10,
                source,
            )
        )
    return ExperimentResult(
        frame=frame,
        checks=checks,
        figures={"fig1": _figure(frame, config, problem, "Figure 1: spectral start vs random-start SGD")},
        tables={"reference": _reference_table(frame, config.methods)},
        notes=notes + [problem.assumptions(config.c3).describe()],
    )


def run_fig2(config: FigureTwoConfig, ctx: RunContext) -> ExperimentResult:
    """Figure 2 (spec §9.1): from the same random start ours converges, SGD does not."""
    frame, problem, notes = _train_methods(config, ctx)
    irr, checks = problem.irreducible_loss, []
    source = f"{SOURCE} §9.1 fig. 2 (the paper's remark)"
    starts = frame[frame.step == 0].groupby("run").gap.nunique()
    checks.append(
        Check(
            "all methods start from the same point",
            1,
            int(starts.max()),
            "exact",
            bool((starts == 1).all()),
            f"{SOURCE} §9.1",
        )
    )
    if {"ours_random", "sgd"} <= set(config.methods):
        ours = float(_final(frame, "ours_random").median())
        checks.append(
            observation(
                "fig. 2: ours from a random start converges: gap(T) / L_irr (agrees below 0.1)",
                "converges",
                ours / irr,
                ours / irr <= 0.1,
                source,
            )
        )
        ratio = float(_final(frame, "sgd").median()) / ours
        checks.append(
            observation(
                "fig. 2: SGD from the same start does not: gap_SGD(T) / gap_ours(T) (agrees above 10)",
                "> 10",
                ratio,
                ratio > 10,
                source,
            )
        )
    return ExperimentResult(
        frame=frame,
        checks=checks,
        figures={"fig2": _figure(frame, config, problem, "Figure 2: all methods from the same random start")},
        tables={"reference": _reference_table(frame, config.methods)},
        notes=notes + [problem.assumptions(config.c3).describe()],
    )


_FIGURE_QUICK = {"n": 2000, "batch_size": 128, "steps": 1000, "seeds": 2, "record_every": 50}

register(
    Experiment(
        name="regression.fig1",
        cost=66.0,
        config_type=FigureOneConfig,
        run=run_fig1,
        quick={**_FIGURE_QUICK, "methods": ("ours", "sgd")},
    )
)
register(
    Experiment(
        name="regression.fig2",
        cost=106.0,
        config_type=FigureTwoConfig,
        run=run_fig2,
        quick={**_FIGURE_QUICK, "methods": ("ours_random", "sgd")},
    )
)


# ---- the theory table of spec §8 --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TheoryConfig:
    """Settings of the measured checks of spec §8 (sizes are ours; the paper gives none)."""

    d: int = 3
    k: int = 6
    noise_std: float = 0.1
    singular_values: tuple[float, ...] = (0.25, 0.2, 0.15)  # sigma(M*): A3 holds, kappa < 2 (fast local rate)
    problem_seed: int = 0
    seed: int = 0
    mu: float = 0.25  # spec §3.4 [R]
    bias_ns: tuple[int, ...] = (25, 50, 100, 200, 400, 800)  # T1.1 / T3: context sizes of the Monte-Carlo bias
    bias_samples: int = 400  # fresh samples per n
    bias_scale: float = 0.05  # T1.1: entry size of the perturbation of theta_R, a point off the manifold M
    spectral_ns: tuple[int, ...] = (100, 1000, 10_000, 100_000)  # L3
    spectral_seeds: int = 20
    radii: tuple[float, ...] = (0.02, 0.05, 0.1, 0.25)  # T1.3: multiples of sigma_d^{1/2}; rho = 0.25 (Tu et al.)
    directions: int = 300
    lr: float = 0.5  # T2: step of the population / Monte-Carlo oracle runs
    steps: int = 300
    mc_ns: tuple[int, ...] = (100, 400, 1600)  # T2: Monte-Carlo oracle context sizes
    mc_runs: int = 3

    OURS = ("d", "k", "noise_std", "singular_values", "mu", "lr", "bias_ns", "bias_scale", "mc_ns", "radii")

    def __post_init__(self) -> None:
        check_scalar("k", self.k, kind=int, low=self.d)
        if len(self.singular_values) != self.d:
            raise ValidationError(f"singular_values has {len(self.singular_values)} entries, needs d == {self.d}")


def _slope(x, y) -> float:
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def _perturbed(problem: RegressionProblem, runs: int, scale: float, seed: int):
    """theta_R for random R in O(d) plus a Gaussian perturbation of entry size ``scale``."""
    V, Q = manifold_point(random_rotation(problem.d, runs=runs, seed=seed), problem.W_star, problem.Sigma)
    gen = torch.Generator().manual_seed(seed + 1)
    return V + scale * torch.randn(V.shape, generator=gen), Q + scale * torch.randn(Q.shape, generator=gen)


def _empirical_bias(problem, V, Q, n, samples, seed):
    """Over fresh samples of context size n: the mean and SE of L_n - L_n^lin, the squared gradient bias, and the
    mean and SE of L_n^lin. The control variate L_n^lin (linear predictor V Sigma Q x with the true Sigma, spec
    §3.3) has expectation exactly the population loss L, so it is a Monte-Carlo value of the closed form and the
    differences estimate the biases of L_n and grad L_n."""
    X, Y = sample(problem, n, runs=samples, seed=seed)
    loss, gV, gQ = empirical.loss_and_gradient(V, Q, X, Y, X)
    P = V @ problem.Sigma @ Q  # spec §3.3: infinite-context predictor
    resid = X @ P.transpose(-1, -2) - Y
    lin = (resid**2).sum((-2, -1)) / n
    gP = 2 / n * resid.transpose(-1, -2) @ X
    dV, dQ = gV - gP @ Q.transpose(-1, -2) @ problem.Sigma, gQ - problem.Sigma @ V.transpose(-1, -2) @ gP
    diff = loss - lin
    grad_bias = torch.cat([dV.mean(0).flatten(), dQ.mean(0).flatten()])
    root = samples**0.5
    return {
        "bias": float(diff.mean()),
        "bias_se": float(diff.std()) / root,
        "grad_bias_sq": float((grad_bias**2).sum()),
        "lin_mean": float(lin.mean()),
        "lin_se": float(lin.std()) / root,
    }


def _bias_expansion(ns, bias, se) -> tuple[float, float, float, int]:
    """Weighted least squares of ``bias = c / n + c2 / n^2``: ``c``, its standard error, chi^2 and its dof."""
    n, b, w = np.asarray(ns, float), np.asarray(bias, float), 1.0 / np.asarray(se, float)
    design = np.stack([1 / n, 1 / n**2], 1) * w[:, None]
    coef, *_ = np.linalg.lstsq(design, b * w, rcond=None)
    chi2 = float(((design @ coef - b * w) ** 2).sum())
    return float(coef[0]), float(np.sqrt(np.linalg.inv(design.T @ design)[0, 0])), chi2, len(n) - 2


def run_theory(config: TheoryConfig, ctx: RunContext) -> ExperimentResult:
    """Every row of the table of spec §8 as a measured check."""
    problem = make_problem(
        config.d, config.k, noise_std=config.noise_std, singular_values=config.singular_values, seed=config.problem_seed
    )
    S, W, mu = problem.Sigma, problem.W_star, config.mu
    s_min, s_max = min(config.singular_values), max(config.singular_values)
    checks, rows = [], []

    def f_excess(V, Q):  # spec §3.4: f - f* = (L - L_irr) + mu R
        return population_excess_loss(V, Q, S, W) + mu * regularizer(V, Q, S)

    def grad_f(V, Q):
        gV, gQ = population_gradient(V, Q, S, W)
        rV, rQ = regularizer_gradient(V, Q, S)
        return gV + mu * rV, gQ + mu * rQ

    # T1.1: the closed form against Monte-Carlo at a point off M, where the parameter-dependent part of L is not
    # zero; then the finite-context bias Theta(1/n) near M (at theta_R, as the spec states it)
    src = f"{SOURCE} §8"
    V1, Q1 = _perturbed(problem, 1, config.bias_scale, config.seed)
    excess = float(population_excess_loss(V1[0], Q1[0], S, W))
    off = _empirical_bias(
        problem, V1[0], Q1[0], min(config.bias_ns), config.bias_samples * len(config.bias_ns), config.seed + 1
    )
    checks.append(
        check_close(
            f"T1.1 closed form L(V, Q) = Monte-Carlo population loss at a point off M (L - L_irr = {excess:.3g}, "
            f"{excess / off['lin_se']:.0f} SE from the minimum)",
            excess + problem.irreducible_loss,
            off["lin_mean"],
            atol=3 * off["lin_se"],
            source=src,
            spread=f"3 SE of the Monte-Carlo mean of L_n^lin, {config.bias_samples * len(config.bias_ns)} samples "
            f"(SE {off['lin_se']:.3g})",
        )
    )
    V0, Q0 = _perturbed(problem, 1, 0.0, config.seed)
    stats = []
    for n in ctx.bar(config.bias_ns, desc="T1.1/T3 bias"):
        stats.append(_empirical_bias(problem, V0[0], Q0[0], n, config.bias_samples, config.seed + n))
        rows.append(
            {
                "check": "bias",
                "n": n,
                "loss_bias": stats[-1]["bias"],
                "grad_bias_sq": stats[-1]["grad_bias_sq"],
                "loss_mean": stats[-1]["lin_mean"] + stats[-1]["bias"],
            }
        )
    ns = np.asarray(config.bias_ns, float)
    c, c_se, chi2, dof = _bias_expansion(ns, [st["bias"] for st in stats], [st["bias_se"] for st in stats])
    checks.append(
        check_greater(
            "T1.1 E L_n - L = Theta(1/n) near M: leading coefficient c of the expansion c/n + "
            "c2/n^2 of the Monte-Carlo biases, in standard errors (c / SE)",
            c / c_se,
            3.0,
            src,
            spread="non-zero at 3 SE",
        )
    )
    if dof > 0:
        quantile = float(scipy.stats.chi2.ppf(0.999, dof))
        checks.append(
            check_less(
                f"T1.1 the expansion c/n + c2/n^2 fits the biases: chi^2 over {dof} dof (a slower "
                "term, e.g. n^-1/2, would not fit)",
                chi2,
                quantile,
                src,
                spread="99.9% quantile of chi^2 with the Monte-Carlo SEs as weights",
            )
        )
    gslope = _slope(ns, [st["grad_bias_sq"] for st in stats])
    checks.append(
        check_less(
            "T3 squared gradient bias <= C/n near M: log-log slope (measured ~ -2: bias itself ~1/n)",
            gslope,
            -0.75,
            src,
        )
    )

    # T1.2: manifold points are global minima
    Rs = random_rotation(config.d, runs=6, seed=config.seed)
    Rs[::2, :, 0] *= -1  # both components of O(d)
    Vm, Qm = manifold_point(Rs, W, S)
    gmax = max(float(g.abs().max()) for g in grad_f(Vm, Qm))
    checks.append(
        check_less(
            "T1.2 f(theta_R) - L_irr on M (max over 6 R, both det signs)",
            float(f_excess(Vm, Qm).abs().max()),
            1e-24,
            src,
        )
    )
    checks.append(check_less("T1.2 ||grad f(theta_R)||_max on M", gmax, 1e-12, src))

    # L1 and T1.3: projection symmetry, one-point strong convexity and smoothness in the Sigma~ geometry
    ratios_a, ratios_b, sym_defect = [], [], 0.0
    for r in ctx.bar(config.radii, desc="T1.3 radii"):
        V0, Q0 = manifold_point(random_rotation(config.d, runs=config.directions, seed=config.seed + 7), W, S)
        A0, C0 = whiten(V0, Q0, S, S)
        gen = torch.Generator().manual_seed(config.seed + int(1e4 * r))
        dA, dC = torch.randn(A0.shape, generator=gen), torch.randn(C0.shape, generator=gen)
        scale = r * s_min**0.5 / (dA.square().sum((-2, -1)) + dC.square().sum((-2, -1))).sqrt()[:, None, None]
        V, Q = unwhiten(A0 + scale * dA, C0 + scale * dC, S, S)
        proj = project(V, Q, W, S)
        A, C = whiten(V, Q, S, S)
        Ab, Cb = whiten(proj.V, proj.Q, S, S)
        sym = (A - Ab).transpose(-1, -2) @ Ab + (C - Cb) @ Cb.transpose(-1, -2)
        sym_defect = max(sym_defect, float((sym - sym.transpose(-1, -2)).abs().max()))
        gV, gQ = grad_f(V, Q)
        root_inv = sym_inv_sqrt(S)
        gA, gC = gV @ root_inv, root_inv @ gQ @ root_inv  # spec §4.4: gradient in the whitened (Sigma~) geometry
        dist2 = proj.distance**2
        inner = (gA * (A - Ab)).sum((-2, -1)) + (gC * (C - Cb)).sum((-2, -1))
        ratios_a.append(float((inner / dist2).min()))
        ratios_b.append(float((((gA**2).sum((-2, -1)) + (gC**2).sum((-2, -1))) / dist2).max()))
        rows.append({"check": "one_point", "radius": r, "alpha_hat": ratios_a[-1], "beta_sq_hat": ratios_b[-1]})
    checks.append(check_less("L1 symmetry defect of Delta_A^T A_bar + Delta_C C_bar^T", sym_defect, 1e-12, src))
    alpha, beta_sq = min(ratios_a), max(ratios_b)
    checks.append(
        Check(
            "T1.3 one-point strong convexity within rho: min <grad f, theta - theta_bar> / dist^2 (> 0); "
            f"alpha / sigma_d = {alpha / s_min:.3g}",
            "> 0",
            alpha,
            "bound",
            alpha > 0,
            src,
        )
    )
    checks.append(
        Check(
            f"T1.3 smoothness within rho: max ||grad f||^2 / dist^2 bounded; beta^2 / sigma_1^2 = "
            f"{beta_sq / s_max**2:.3g}",
            "finite, O(sigma_1^2)",
            beta_sq,
            "bound",
            bool(beta_sq < 100 * s_max**2),
            src,
        )
    )

    # L3: the spectral start approaches M at rate n^{-1/2}, its loss gap at 1/n
    dists, gaps = [], []
    for n in ctx.bar(config.spectral_ns, desc="L3 spectral"):
        X, Y = sample(problem, n, runs=config.spectral_seeds, seed=config.seed + n)
        V0, Q0 = spectral_init(X, Y)
        dists.append(float(project(V0, Q0, W, S).distance.mean()))
        gaps.append(float(population_excess_loss(V0, Q0, S, W).mean()))
        rows.append({"check": "spectral", "n": n, "dist": dists[-1], "gap": gaps[-1]})
    sn = np.asarray(config.spectral_ns, float)
    ds, gs = _slope(sn, dists), _slope(sn, gaps)
    checks.append(
        Check(
            f"L3 dist(theta_0, M) ~ n^-1/2: slope (sqrt(n) dist = {dists[-1] * sn[-1] ** 0.5:.3g})",
            -0.5,
            ds,
            "+-0.1",
            abs(ds + 0.5) <= 0.1,
            src,
        )
    )
    checks.append(
        Check(
            f"L3 L(theta_0) - L_irr ~ 1/n: slope (n gap = {gaps[-1] * sn[-1]:.3g})",
            -1.0,
            gs,
            "+-0.15",
            abs(gs + 1) <= 0.15,
            src,
        )
    )

    # T2 + L2: population oracle -> geometric decay to round-off; Monte-Carlo oracle -> floor ~ 1/n
    V0, Q0 = _perturbed(problem, config.mc_runs, 0.05, config.seed + 3)
    Sb = S.expand(config.mc_runs, -1, -1)

    def run(oracle):
        return fit(
            V0,
            Q0,
            oracle,
            lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], Sb, lr=config.lr),
            steps=config.steps,
            record_every=5,
            regularizer_weight=mu,
            covariance=Sb,
            metrics={**_gap_metrics(problem, "covariates"), "f_gap": f_excess},
            progress=ctx.progress,
            desc="T2",
        )

    pop = run(PopulationOracle(problem))
    pf = pop.frame
    checks.append(
        check_less(
            "T2 population oracle: final gap L - L_irr (round-off)",
            float(pf[pf.step == pf.step.max()].gap.max()),
            1e-20,
            src,
        )
    )
    early = pf[(pf.step > 0) & (pf.gap > 1e-18)]
    rate = math.exp(np.polyfit(early.step, np.log(early.dist), 1)[0])
    ratio_l2 = float((pf.f_gap / pf.dist**2)[pf.dist > 1e-6].max())
    checks.append(
        check_less("L2 descent lemma along the run: max (f - f*) / dist^2 <= beta / 2", ratio_l2, beta_sq**0.5 / 2, src)
    )
    floors = []
    for n in config.mc_ns:
        mc = run(MonteCarloOracle(problem, n, 1, seed=config.seed + n)).frame
        floors.append(float(mc[mc.step >= config.steps // 2].gap.mean()))
        rows.append({"check": "mc_floor", "n": n, "floor": floors[-1]})
        rows += [
            {"check": "mc_trajectory", "n": n, "step": s, "gap": g} for s, g in mc.groupby("step").gap.median().items()
        ]
    fs = _slope(config.mc_ns, floors)
    checks.append(
        Check(
            f"T2 Monte-Carlo oracle floor ~ 1/n: slope (floors {', '.join(f'{f:.2g}' for f in floors)})",
            -1.0,
            fs,
            "+-0.3",
            abs(fs + 1) <= 0.3,
            src,
        )
    )

    frame = pd.concat([pf.assign(oracle="population")], ignore_index=True)
    table = pd.DataFrame(rows)
    fig = _theory_figure(config, table, pf)
    return ExperimentResult(
        frame=frame,
        checks=checks,
        figures={"theory": fig},
        tables={"measurements": table},
        notes=[
            problem.assumptions().describe(),
            f"T2 local contraction per step of dist: {rate:.4g}, (1 - rate) / (lr sigma_d) = "
            f"{(1 - rate) / (config.lr * s_min):.3g} (spec §9.3 ~2.9)",
        ],
    )


@house_figure
def _theory_figure(config: TheoryConfig, table: pd.DataFrame, pf: pd.DataFrame):
    fig, axes = new_figure(3, width=3.8)
    bias_rows = table[table.check == "bias"]
    axes[0].loglog(bias_rows.n, bias_rows.loss_bias.abs(), "o-", label=r"$|\mathbb{E} L_n - L|$")
    axes[0].loglog(bias_rows.n, bias_rows.grad_bias_sq, "s-", label=r"$\|\mathbb{E} \nabla L_n - \nabla L\|^2$")
    label_axes(axes[0], "$n$", "bias of the empirical loss", "T1.1 / T3 bias")
    sp = table[table.check == "spectral"]
    axes[1].loglog(sp.n, sp.dist, "o-", label=r"$\mathrm{dist}(\theta_0, M)$")
    axes[1].loglog(sp.n, sp.gap, "s-", label=r"$L(\theta_0) - L_{irr}$")
    label_axes(axes[1], "$n$", "at the spectral start", "L3 spectral start")
    plot_band(axes[2], pf, "step", "gap", label="population oracle", logy=True)
    for n in config.mc_ns:
        tr = table[(table.check == "mc_trajectory") & (table.n == n)]
        axes[2].plot(tr.step, tr.gap, label=f"Monte-Carlo oracle $n={n}$")
    log_gap_axis(axes[2], r"$L(\theta_t) - L_{irr}$")
    axes[2].set(xlabel="iteration $t$", title=r"T2: $L - L_{irr}$")
    for ax in axes:
        ax.legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="regression.theory",
        cost=59.0,
        config_type=TheoryConfig,
        run=run_theory,
        quick={
            "bias_ns": (25, 50, 100, 200),
            "bias_samples": 200,
            "spectral_ns": (100, 1000, 10_000),
            "spectral_seeds": 10,
            "directions": 100,
            "steps": 200,
            "mc_ns": (50, 200, 800),
            "mc_runs": 2,
        },
    )
)


# ---- scaling law (Theorem 2): excess loss as a function of n and T ----------------------------------------------


@dataclass(frozen=True)
class ScalingConfig:
    """Algorithm 1 with the Monte-Carlo oracle (fresh samples of size n) on the theory instance, from a start at a
    fixed distance to the manifold, so both terms of ``C1 (1 - c eta)^T + O(1/n)`` (spec §8 T2) are visible."""

    d: int = 3
    k: int = 6
    noise_std: float = 0.1
    singular_values: tuple[float, ...] = (0.25, 0.2, 0.15)
    problem_seed: int = 0
    seed: int = 0
    mu: float = 0.25
    lr: float = 0.5
    steps: int = 300
    ns: tuple[int, ...] = (50, 100, 200, 400, 800, 1600)
    seeds: int = 5
    start_scale: float = 0.05  # entry size of the perturbation of theta_R (spec §9.3)
    record_every: int = 5

    OURS = ("d", "k", "noise_std", "singular_values", "mu", "lr", "ns", "start_scale")


def run_scaling(config: ScalingConfig, ctx: RunContext) -> ExperimentResult:
    """Population excess loss L(theta_T) - L_irr over a grid of n and T; floor ~ 1/n, rate independent of n."""
    problem = make_problem(
        config.d, config.k, noise_std=config.noise_std, singular_values=config.singular_values, seed=config.problem_seed
    )
    V0, Q0 = _perturbed(problem, config.seeds, config.start_scale, config.seed)
    S = problem.Sigma.expand(config.seeds, -1, -1)
    frames = []
    for n in ctx.bar(config.ns, desc="n"):
        result = fit(
            V0,
            Q0,
            MonteCarloOracle(problem, n, 1, seed=config.seed + n),
            lambda ps: PreconditionedGD.for_attention(ps[0], ps[1], S, lr=config.lr),
            steps=config.steps,
            record_every=config.record_every,
            regularizer_weight=config.mu,
            covariance=S,
            metrics=_gap_metrics(problem, "covariates"),
        )
        frames.append(result.frame.assign(n=n, seed=lambda f: config.seed + f.run))
    frame = pd.concat(frames, ignore_index=True)
    tail = frame[frame.step >= config.steps // 2]
    floors = tail.groupby("n").gap.mean()
    slope = _slope(floors.index, floors.values)
    src = f"{SOURCE} §8 T2"
    checks = [
        Check(
            f"floor of L - L_irr ~ 1/n: log-log slope over n = {list(config.ns)}",
            -1.0,
            slope,
            "+-0.4",
            abs(slope + 1) <= 0.4,
            src,
        )
    ]  # few seeds and a correlated tail: the slope is noisy
    # No check that the geometric rate is independent of n: from this start the gap meets its 1/n floor within
    # 5-15 steps, so no window measures a rate free of the floor (docs/experiments/regression.md).
    fig = _scaling_figure(config, frame)
    table = pd.DataFrame({"n": floors.index, "floor": floors.values, "n_times_floor": floors.index * floors.values})
    return ExperimentResult(
        frame=frame,
        checks=checks,
        figures={"scaling": fig},
        tables={"floors": table},
        notes=[problem.assumptions().describe()],
    )


@house_figure
def _scaling_figure(config: ScalingConfig, frame: pd.DataFrame):
    fig, axes = new_figure(2, width=4.4, height=3.4)
    for n in config.ns:
        plot_band(axes[0], frame[frame.n == n], "step", "gap", label=f"$n = {n}$")
    log_gap_axis(axes[0], r"$L(\theta_T) - L_{irr}$")
    axes[0].set_xlabel("iteration $T$")
    axes[0].legend()
    grid = frame.groupby(["n", "step"]).gap.median().unstack("step")
    image = axes[1].imshow(
        np.log10(grid.values),
        aspect="auto",
        origin="lower",
        cmap="viridis",
        extent=(0, config.steps, -0.5, len(config.ns) - 0.5),
    )
    axes[1].set_yticks(range(len(config.ns)), [str(n) for n in config.ns])
    axes[1].set(xlabel="iteration $T$", ylabel="$n$")
    axes[1].grid(False)
    fig.colorbar(image, ax=axes[1], label=r"$\log_{10}$ median $(L - L_{irr})$")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="regression.scaling",
        cost=125.0,
        config_type=ScalingConfig,
        run=run_scaling,
        quick={"ns": (50, 200, 800), "seeds": 2, "steps": 150},
    )
)
