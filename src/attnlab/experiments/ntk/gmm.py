"""``diffusion.gmm``: softmax-NTK score estimation for a 2-d Gaussian mixture, and reverse-SDE samples (P8).

Spec: docs/theory/softmax-ntk-diffusion.md §9 P8, §7 (forward process, denoising score matching, Theorem 6.6).
Config, build, measure, declared checks, figure.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import torch

from attnlab.experiments.ntk._shared import SOURCE
from attnlab.experiments.ntk.gmm_config import GMMConfig
from attnlab.experiments.ntk.gmm_measures import ASM62_RTOL, baselines, hypothesis_record, measure
from attnlab.experiments.registry import register
from attnlab.nets.chance import binomial_se
from attnlab.ntk import ForwardProcess, SoftmaxMLP, circle_mixture, denoising_set, fit_input_map, reverse_sde_sample
from attnlab.plotting import house_figure, label_ours, new_figure
from attnlab.training.ntk import train_score_model
from attnlab.verify import (
    Claim,
    Experiment,
    ExperimentResult,
    Falsifier,
    Reading,
    Revision,
    RunContext,
    fit_slope,
    spread_tolerance,
)

__all__ = ["GMMConfig", "run_gmm"]


# ---- declared checks ----------------------------------------------------------------------------------------
_SRC = f"{SOURCE} §9 P8, §7.8 Thm 6.6"
# the config fields a trained model's weighted error depends on (not the sampler's)
_FIT_SIZES = (
    "ns", "widths", "sigma_w", "c", "T0", "T", "modes", "radius", "std", "n_val", "n_eval", "max_steps",
    "record_every", "patience", "skip", "input_map", "decay", "times", "time_power", "seed",
)  # fmt: skip
_WEIGHTED = (
    "the weighted score error (theory page §9: uniform t on [T0, T], the denoiser against the closed-form posterior "
    "mean) on n_eval fresh draws in 5 chunks (the same draws for every model), of the GD-trained network "
    "early-stopped on n_val held-out triples"
)
_FALLS_OLD = Reading(
    statistic="mean over the 5 chunks of the evaluation draws of the log-log slope in n of "
    + _WEIGHTED
    + " (each chunk's slope over the ns; the same draws for every n: paired)",
    window="the early-stopped weights (best held-out step, at most max_steps steps)",
    subset="each width, the nested training sets (the first n triples of one pool, seed); one row per width",
    tolerance="mean + se_multiple standard errors of the chunk slopes < 0: the label-mismatch and "
    "early-stopping terms of Theorem 6.6 fall with n (their exponents are lost, so the sign of the rate is what "
    "is tested); training-set randomness is one seed",
    params={"se_multiple": 3.0},
    sizes=_FIT_SIZES,
)
# Assumption 6.2 (theory page §7.8) at our sizes: Definition 3.7's paired neurons give rank(H*) <= d_in m / 2 at init
_OUTSIDE_62 = (
    ". Outside Assumption 6.2 (lambda = lambda_min(H*) > 0): rank(H*) <= d_in m / 2 at init (paired neurons, Def. "
    "3.7), below n d in most cells, and lambda_min(H*) <= asm62_rtol lambda_max(H*) where measured; the summary "
    "table (nd, rank_bound, lambda_min_rel, asm62, capped) and the row's support text give each cell and where "
    "max_steps stopped GD instead of early stopping. So a row tests the sign of the n- or m-dependence of an "
    "early-stopped fit that does not interpolate, not Theorem 6.6's bound under its hypotheses"
)
_WHY_62 = (
    "the reading did not say that the rows run outside Theorem 6.6's Assumption 6.2 (lambda_min(H*) > 0): at init "
    "the paired neurons give rank(H*) <= d_in m / 2 = 192 and 768 (m = 128, 512) against n d = 512 and 2048 at the "
    "quick sizes (8192 at n = 4096, full); the audit measured rank(H*) 189, 350, 191, 405 and |lambda_min| <= 2e-12 "
    "against lambda_max ~ 1e3 in the four quick cells, and GD stopped at the step cap at n = 1024 for both widths "
    "(best_step = steps = 4000; full: n = 4096 both widths and n = 1024, m = 512, at 8000). The pass rule is "
    "unchanged; the subset now states the hypothesis status, which the run reports per cell"
)
FALLS_WITH_N = Claim(
    "Thm 6.6: the weighted score error falls with n beyond the evaluation noise (m={width}; exponent in n: the "
    "measured value)",
    "004:Thm6.6",
    _SRC,
    falsifier="target-is-noisy-sample",
    id="thm66-falls-with-n",
    reading=dataclasses.replace(
        _FALLS_OLD,
        subset=_FALLS_OLD.subset + _OUTSIDE_62,
        params={**_FALLS_OLD.params, "asm62_rtol": ASM62_RTOL},
    ),
    revisions=(
        Revision(
            _FALLS_OLD,
            "2026-11-29",
            _WHY_62,
            "pass: -0.100746 (m=128, < -0.0513) and -0.144473 (m=512, < -0.0202)",
            "pass: -0.312497 (m=128, < -0.0189) and -0.298719 (m=512, < -0.019)",
        ),
    ),
)
_WIDER_OLD = Reading(
    statistic=_WEIGHTED + ", of the widest and of the narrowest width",
    window="the early-stopped weights (best held-out step, at most max_steps steps)",
    subset="the largest n; one training set, one initialization (seed)",
    tolerance="widest <= narrowest + se_multiple standard errors of the paired difference over the 5 chunks of "
    "the evaluation draws (training-set randomness is one seed)",
    params={"se_multiple": 3.0},
    sizes=_FIT_SIZES,
)
WIDER_NOT_WORSE = Claim(
    "P8: coupling: at the largest n, the widest network's error does not exceed the narrowest's "
    "(m = {wide} vs {narrow}; saturates at the RKHS floor)",
    "004:Thm6.6",
    _SRC,
    falsifier=("forward-variance-4x", "target-is-noisy-sample"),
    id="thm66-wider-not-worse",
    reading=Reading(
        statistic=_WIDER_OLD.statistic,
        window=_WIDER_OLD.window,
        subset=_WIDER_OLD.subset + _OUTSIDE_62,
        tolerance=_WIDER_OLD.tolerance + ". A sign-only check: equal errors pass, so it cannot tell whether the "
        "width matters at all, and Theorem 6.6's coupling term (Theorem F.2's, via the kernel drift) is not measured",
        params={**_WIDER_OLD.params, "asm62_rtol": ASM62_RTOL},
        sizes=_WIDER_OLD.sizes,
    ),
    revisions=(
        Revision(
            _WIDER_OLD,
            "2026-11-29",
            _WHY_62 + "; the tolerance now says that the row is a sign-only check",
            "pass: 0.00245403 <= 0.00277728 (m = 512 vs 128, n = 1024)",
            "pass: 0.00148867 <= 0.00172683 (m = 512 vs 128, n = 4096)",
        ),
    ),
)
_SAMPLES = "reverse-SDE samples (Euler-Maruyama, sde_steps steps from T to T0, then E[X_0 | X_T0]) of the model"
_SAMPLE_SIZES = (*_FIT_SIZES, "n_samples", "sde_steps")
COVERAGE = Claim(
    "samples: a majority within 3 std of a mode (largest n, m)",
    "004:Thm6.6",
    f"{SOURCE} §9 (sampling)",
    kind="property",
    id="samples-coverage",
    reading=Reading(
        statistic="share of the " + _SAMPLES + " within 3 std of some mode",
        window="the early-stopped weights",
        subset="the model of the largest n and the largest width; n_samples samples",
        tolerance=">= bound: a majority of the samples",
        params={"bound": 0.5},
        sizes=_SAMPLE_SIZES,
    ),
)
BALANCE = Claim(
    "samples: no mode starved: each holds >= 1/(2K) of the samples near a mode",
    "004:Thm6.6",
    f"{SOURCE} §9 (sampling)",
    kind="property",
    id="samples-balance",
    reading=Reading(
        statistic="the smallest mode's share of the " + _SAMPLES + " that landed within 3 std of some mode",
        window="the early-stopped weights",
        subset="the model of the largest n and the largest width; the samples near some mode",
        tolerance=">= share / K: half the fair share 1/K",
        params={"share": 0.5},
        sizes=_SAMPLE_SIZES,
    ),
)
CLAIMS = (FALLS_WITH_N, WIDER_NOT_WORSE, COVERAGE, BALANCE)


class _NoisierProcess(ForwardProcess):
    """The OU forward process with its noise variance ``h(t)`` four times too large (noise std doubled)."""

    def h(self, t: torch.Tensor) -> torch.Tensor:
        return 4.0 * super().h(t)


def _noisier_training_data(denoising_set):
    """Training and held-out triples drawn from the forward process with variance 4 h(t); evaluation keeps h(t)."""
    return lambda x0, process, *args, **kwargs: denoising_set(x0, _NoisierProcess(1.0), *args, **kwargs)


def _noisy_sample_target(denoising_set):
    """Training and held-out triples whose regression target is the noisy sample x_t instead of the clean x_0."""

    def swapped(*args, **kwargs):
        triples = denoising_set(*args, **kwargs)
        return type(triples)(triples.t, triples.x_t.clone(), triples.x_t)

    return swapped


FALSIFIERS = (
    Falsifier(
        "target-is-noisy-sample",
        "the denoising regression's target is the noisy sample x_t instead of the clean x_0 (a swapped pair in the "
        "training and held-out triples); evaluation keeps the closed-form denoiser",
        "attnlab.experiments.ntk.gmm:denoising_set",
        _noisy_sample_target,
        slow=True,
        kind="mechanism",
    ),
    Falsifier(
        "forward-variance-4x",
        "the training triples' forward process with variance 4 h(t) (noise std doubled); evaluation keeps h(t)",
        "attnlab.experiments.ntk.gmm:denoising_set",
        _noisier_training_data,
        slow=True,
        kind="mechanism",
    ),
)


SPEC_SIZES = {"ns": (256, 1024, 4096), "widths": (512, 2048, 8192), "max_steps": 20000}
SPEC_SETTINGS = {"sigma_w": 1.0, "input_map": "spec", "times": "uniform"}  # spec §9 and §7.5, where ours depart


def _gmm_sets(config: GMMConfig, process: ForwardProcess, target, times: str):
    """Held-out triples and the nested training pool (the first n triples train the size-n run), spec §7.5."""
    gen = torch.Generator().manual_seed(config.seed)
    draw = {"times": times, "power": config.time_power}
    held_out = denoising_set(
        target.sample(config.n_val, gen, 1.0), process, config.T0, config.T, config.seed + 1, **draw
    )
    x0_pool = target.sample(max(config.ns), gen, 1.0)
    return held_out, denoising_set(x0_pool, process, config.T0, config.T, config.seed + 2, **draw)


def _fit(config: GMMConfig, n: int, width: int, sigma_w: float, input_map: str, sets, process):
    """Train the size-``n`` score model of one width on the first ``n`` triples of the pool, early-stopped."""
    held_out, pool = sets
    train = type(pool)(pool.t[:n], pool.x0[:n], pool.x_t[:n])
    net = SoftmaxMLP(3, 2, width, sigma_w, seed=config.seed)
    inputs = fit_input_map(train, process, config.T, config.skip, input_map, config.T0, config.decay)
    hypothesis = hypothesis_record(net, inputs(train.t, train.x_t))  # Assumption 6.2 at init, the inputs GD sees
    model, result = train_score_model(
        net,
        train,
        held_out,
        process,
        config.T,
        c=config.c,
        steps=config.max_steps,
        record_every=config.record_every,
        patience=config.patience,
        skip=config.skip,
        input_map=input_map,
        T0=config.T0,
        decay=config.decay,
    )
    return model, result, hypothesis


def run_gmm(config: GMMConfig, ctx: RunContext) -> ExperimentResult:
    if config.spec_size:
        config = dataclasses.replace(config, **SPEC_SIZES)
    process = ForwardProcess(1.0)  # spec §9: g = 1 (Ornstein-Uhlenbeck)
    target = circle_mixture(config.modes, config.radius, config.std)
    gen = torch.Generator().manual_seed(config.seed + 7)
    reference = target.sample(config.n_samples, gen)  # target draws for the energy distance
    y0 = torch.randn(config.n_samples, 2, generator=gen, dtype=torch.float64)  # Y_0 ~ N(0, I), spec §7.2

    def sample(score, denoise) -> torch.Tensor:  # every sampler through the same function and noise
        return reverse_sde_sample(
            score, process, y0, config.T0, config.T, config.sde_steps, config.seed + 3, denoiser=denoise
        )

    def fit(n, width, sigma_w, input_map, sets) -> tuple[pd.DataFrame, torch.Tensor, dict]:
        model, result, hypothesis = _fit(config, n, width, sigma_w, input_map, sets, process)
        drawn = sample(model.score, model.denoiser)
        return result.frame, drawn, {**measure(model, result, drawn, target, reference, config, n, width), **hypothesis}

    ours = _gmm_sets(config, process, target, config.times)
    frames, summary, samples = [], [], {}
    for width, n in ctx.bar([(m, n) for m in config.widths for n in config.ns], desc="diffusion.gmm runs"):
        frame, samples[(n, width)], row = fit(n, width, config.sigma_w, config.input_map, ours)
        frames.append(frame.assign(n=n, width=width, settings="ours"))
        summary.append(row)
    table = pd.DataFrame(summary)
    references, drawn = baselines(config, process, target, reference, ours, sample)
    tables, notes = {"summary": table, "baselines": references}, [*_gmm_notes(config), _hypothesis_note(table)]
    if config.spec_settings_run:
        n, width = max(config.ns), min(config.widths)
        spec_sets = _gmm_sets(config, process, target, SPEC_SETTINGS["times"])
        frame, _, row = fit(n, width, SPEC_SETTINGS["sigma_w"], SPEC_SETTINGS["input_map"], spec_sets)
        frames.append(frame.assign(n=n, width=width, settings="spec"))
        tables["departure"], note = _departure(table, row, n, width)
        notes.append(note)
    best = samples[(max(config.ns), max(config.widths))]
    figure = _gmm_figure(table, best, drawn["exact"], drawn["linear"], target, config)
    return ExperimentResult(
        pd.concat(frames, ignore_index=True), _gmm_checks(table, config), {"gmm": figure}, tables, notes
    )


def _departure(table: pd.DataFrame, row: dict, n: int, width: int) -> tuple[pd.DataFrame, str]:
    """Our settings against the spec's own at one (n, m): the table and the run's note."""
    mine = table[(table["n"] == n) & (table["width"] == width)].iloc[0].to_dict()
    departure = pd.DataFrame([{"settings": "ours", **mine}, {"settings": "theory page §9 / §7.5", **row}])
    note = (
        f"Departure from the spec (docs/experiments/ntk.md): with the spec's own settings (sigma_w = 1, input map "
        f"u = (t/T, x)/rho, uniform times) at n = {n}, m = {width}, the weighted score error is "
        f"{row['weighted_error']:.4g} (ours {mine['weighted_error']:.4g}) and {row['coverage']:.3g} of the samples "
        f"land within 3 std of a mode (ours {mine['coverage']:.3g}); table departure.parquet."
    )
    return departure, note


# ---- checks -------------------------------------------------------------------------------------------------------
def _gmm_checks(table: pd.DataFrame, config: GMMConfig) -> list:
    chunks = [c for c in table.columns if c.startswith("error_chunk_")]
    checks = [
        _falls_with_n(claim, width, part.sort_values("n"), chunks)
        for width, part in table.groupby("width")
        for claim in (FALLS_WITH_N, FALLS_WITH_N.revised(1))  # the old reading: the same rule, still computed
    ]
    largest = table[table["n"] == max(config.ns)].sort_values("width")
    status = _hypothesis_text(largest)
    if len(largest) >= 2:
        paired = largest[chunks].iloc[-1].to_numpy() - largest[chunks].iloc[0].to_numpy()  # same draws: paired
        se = float(paired.std(ddof=1) / math.sqrt(len(paired)))
        widest, narrowest = float(largest["weighted_error"].iloc[-1]), float(largest["weighted_error"].iloc[0])
        wide, narrow = int(largest["width"].iloc[-1]), int(largest["width"].iloc[0])
        for claim, extra in ((WIDER_NOT_WORSE, f"; {status}"), (WIDER_NOT_WORSE.revised(1), "")):
            checks.append(
                claim.format(wide=wide, narrow=narrow).less(
                    widest,
                    narrowest + claim.param("se_multiple") * se,
                    spread=f"narrowest + 3 SE of the paired difference over {len(paired)} chunks of the evaluation "
                    f"draws (SE {se:.3g}); training-set randomness is one seed{extra}",
                )
            )
    return checks + _sample_checks(table, config)


def _falls_with_n(claim: Claim, width: int, part: pd.DataFrame, chunks: list[str]):
    """Theorem 6.6's n-dependence at one width: the chunk-paired log-log slope in n, mean + k SE below 0."""
    slopes = [fit_slope(part["n"], part[chunk])[0] for chunk in chunks]
    tol, text = spread_tolerance(slopes, claim.param("se_multiple"), what="chunks of the evaluation draws")
    mean = float(sum(slopes) / len(slopes))
    status = f"; {_hypothesis_text(part)}" if claim.kind == "theory" else ""
    return claim.format(width=width).holds(
        f"< {-tol:.3g} (mean slope + {claim.param('se_multiple'):g} SE < 0)",
        mean,
        f"{text}; the chunk slopes over n = {', '.join(str(int(n)) for n in part['n'])}{status}",
        mean + tol < 0,
        margin=-(mean + tol),
    )


def _hypothesis_text(cells: pd.DataFrame) -> str:
    """Assumption 6.2 and the step cap at the given (n, m) cells, in words (the thm66 rows' subset, §7.8)."""
    outside = [f"n={int(r.n)} m={int(r.width)}" for r in cells.itertuples() if not r.asm62]
    capped = [f"n={int(r.n)} m={int(r.width)}" for r in cells.itertuples() if r.capped]
    return (
        f"outside Assumption 6.2 (lambda_min(H*) <= {ASM62_RTOL:g} lambda_max, or rank(H*) <= d_in m/2 < n d) at "
        f"{len(outside)}/{len(cells)} cells ({', '.join(outside) or 'none'}); max_steps bound at "
        f"{', '.join(capped) or 'none'}"
    )


def _hypothesis_note(table: pd.DataFrame) -> str:
    """The run's note on Assumption 6.2 (theory page §7.8) and the step cap per (n, m) cell."""
    cells = [
        f"n={int(r.n)} m={int(r.width)}: rank(H*) <= {int(r.rank_bound)} vs n d = {int(r.nd)}, "
        f"lambda_min/lambda_max = {r.lambda_min_rel:.2g}{' (the rank bound)' if r.rank_bound < r.nd else ''}"
        f"{', max_steps bound' if r.capped else ''}"
        for r in table.itertuples()
    ]
    return (
        "Assumption 6.2 (lambda_min(H*) > 0) per cell, at init on the training inputs (summary columns nd, rank_bound, "
        "lambda_min_rel, asm62, capped): " + "; ".join(cells) + ". Where it fails, GD does not interpolate and the "
        "Theorem 6.6 rows test only the sign of the n- and m-dependence (docs/experiments/ntk.md)."
    )


def _sample_checks(table: pd.DataFrame, config: GMMConfig) -> list:
    """Coverage and balance of the best model's samples against their definitions, with the binomial SE stated."""
    best = table[(table["n"] == max(config.ns)) & (table["width"] == max(config.widths))].iloc[0]
    covered, balance = float(best["coverage"]), float(best["mode_balance"])
    fair = BALANCE.param("share") / config.modes
    near = max(1, round(covered * config.n_samples))  # samples near some mode: the balance's denominator
    se_cov, se_bal = binomial_se(covered, config.n_samples), binomial_se(balance, near)
    return [
        COVERAGE.greater(
            covered,
            COVERAGE.param("bound"),
            spread=f"a majority of the samples, what 'the samples land on the modes' means here; binomial SE "
            f"{se_cov:.2g} over {config.n_samples} samples",
        ),
        BALANCE.greater(
            balance,
            fair,
            spread=f"half the fair share 1/K, what 'no mode starved' means here; binomial SE {se_bal:.2g} over the "
            f"{near} samples near a mode",
        ),
    ]


def _gmm_notes(config: GMMConfig) -> list[str]:
    maps = {
        "spec": "u = (t/T, x)/rho (theory page §7.5)",
        "scaled": "u = (t/T, x/c(t))/rho with c(t) the per-coordinate std of X_t (ours)",
        "sphere": f"u = r(t) P(x/c(t)): P the inverse stereographic projection onto the sphere, c(t) the "
        f"per-coordinate std of X_t, radius r from 1 at T0 to {1 - config.decay:.2g} at T (ours)",
    }
    return [
        f"Network input {maps[config.input_map]}; the theory page's §7.5 leaves the normalization open.",
        f"Denoiser = k(t) x + F(W, u) with the linear (Gaussian) gain k(t) (skip={config.skip}); skip=False is §7.4.",
        "Samples are the final denoising step E[X_0 | X_T0] applied to the reverse-SDE output at T0.",
        f"Training and held-out times: {config.times} on [T0, T]"
        + (f" with power {config.time_power:g} (t = T0 (T/T0)^(U^power))" if config.times == "log-uniform" else "")
        + " (theory page §7.5 draws them uniformly); the weighted score error is always the theory page's uniform-t average.",
        "Mode balance is the smallest mode's share of the samples that landed within 3 std of some mode.",
    ]


@house_figure
def _gmm_figure(table: pd.DataFrame, learned, exact, linear, target, config: GMMConfig):
    fig, axes = new_figure(4, width=3.4)
    for width, part in table.groupby("width"):
        part = part.sort_values("n")
        axes[0].loglog(part["n"], part["weighted_error"], "o-", label=f"$m={width}$")
    axes[0].set(xlabel="$n$", ylabel="weighted score error")
    axes[0].set_xticks(list(config.ns), [str(n) for n in config.ns])
    axes[0].set_xticks([], minor=True)
    axes[0].legend()
    grid = torch.linspace(-1.0, 1.0, 161, dtype=torch.float64)
    gx, gy = torch.meshgrid(grid, grid, indexing="xy")
    dens = target.log_density(torch.stack([gx.reshape(-1), gy.reshape(-1)], 1), 0.0, ForwardProcess(1.0)).exp()
    peak = float(dens.max())
    for ax, pts, title in (
        (axes[1], learned, f"learned ($n={max(config.ns)}$, $m={max(config.widths)}$)"),
        (axes[2], exact, "exact score"),
        (axes[3], linear, "network at init ($F = 0$)"),
    ):
        ax.contour(
            gx.numpy(),
            gy.numpy(),
            dens.reshape(gx.shape).numpy(),
            levels=[peak * 0.011, peak * 0.6],
            colors="0.5",
            linewidths=0.7,
        )  # p_0 at 3 std and 1 std of each mode
        ax.scatter(pts[:, 0].numpy(), pts[:, 1].numpy(), s=3, alpha=0.5, color="C3", zorder=3, label="samples")
        ax.plot([], [], color="0.5", lw=0.7, label="$p_0$ at 1 and 3 std")
        ax.set(xlim=(-1, 1), ylim=(-1, 1), title=title, aspect="equal", xlabel="$x_1$", ylabel="$x_2$")
    axes[1].legend(loc="lower left")
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="diffusion.gmm",
        cost=818.0,
        config_type=GMMConfig,
        run=run_gmm,
        quick={
            "ns": (256, 1024),
            "widths": (128, 512),
            "max_steps": 4000,
            "patience": 25,
            "n_eval": 2000,
            "n_samples": 500,
            "sde_steps": 50,
        },
        claims=CLAIMS,
        falsifiers=FALSIFIERS,
    )
)
