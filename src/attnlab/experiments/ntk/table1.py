"""``ntk.table1``: the width and iterations needed against n, for the softmax, ReLU and exp networks (P7).

Spec: docs/theory/softmax-ntk-diffusion.md §9 P7, §5.1 (Table 1), §4.2 (limit kernels), §5 Lemma 5.3 (envelope).
Config, build, measure, declared checks, figure.

Two conditions make up Table 1's width, and each is found on its own along the width grid:

- *concentration*: ``||H* - I (x) K||_2 <= lambda^inf / 2``, so that ``lambda_min(H*) >= lambda^inf / 2`` (the
  kernel concentration behind Theorem 4.2's width);
- *training*: GD with the practical step stays under the Lemma 5.3 envelope ``(1 - s lr (lambda^inf / 2) / 2)^t
  ||Y||^2`` until ``||F - Y||^2 <= eps ||Y||^2``.

The width needed is the first concentrated width of the grid at which GD also trains; the run reports which condition
bound there, and the width training needs on its own (searched from ``m = 2``, below the grid), as its own row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from attnlab._validation import ValidationError, check_count, check_grid, check_in, check_scalar
from attnlab.experiments.ntk._shared import (
    ACTIVATIONS,
    log_factor_allowance,
)
from attnlab.experiments.ntk.table1_claims import (
    CLAIMS,
    COMPARABLE,
    COMPARABLE_READING,
    FALSIFIERS,
    IDENTIFIED,
    WIDTH,
)
from attnlab.experiments.registry import register
from attnlab.ntk import contraction_bound, gram, infinite_width_gram, practical_step, unit_rows
from attnlab.ntk.network import TwoLayerNet
from attnlab.plotting import house_figure, label_ours, new_figure
from attnlab.training.ntk import gradient_descent
from attnlab.verify import Claim, Experiment, ExperimentResult, RunContext, fit_slope

__all__ = ["Table1Config", "run_table1"]


@dataclass(frozen=True)
class Table1Config:
    """P7: width and iterations needed versus n, for the softmax, ReLU and exp networks (scalar output).

    Attributes
    ----------
    ns : tuple of int
        Training-set sizes (spec §9 P7 adds 128: softmax and exp need m > 131072 there): distinct, each >= 2, at
        least two (P7's exponents are slopes in n).
    seeds : int
        Data sets and initializations per (activation, n) (spec §9 P7: 5); from 2 (the comparison's bootstrap SE is a
        spread over seeds) to 100 (ours: a bound on the run's time, which grows linearly in it).
    d_in : int
        Input dimension; with 5 the kernel of 128 unit vectors is too ill-conditioned to train.
    sigma_w : float
        Init standard deviation; at 1 the softmax Gram concentrates slower than m^-1/2 below m = 65536.
    c : float
        Practical step ``c / (s lambda_max(H*))`` (spec §8).
    eps : float
        Target ``||F - Y||^2 <= eps ||Y||^2``.
    widths : tuple of int
        The width grid searched, smallest first: even, distinct, increasing (the width needed is the first of the
        grid that concentrates and trains).
    max_steps : int
        GD steps allowed at one width.
    record_every : int
        Steps between checks of the envelope.
    activations : tuple of str
        Networks compared: ``"softmax"``, ``"relu"``, ``"exp"``; at least one, each once.
    """

    OURS = ("ns", "seeds", "d_in", "sigma_w", "c", "eps", "widths", "max_steps", "record_every", "activations")

    ns: tuple[int, ...] = (8, 16, 32, 64)  # spec §9 P7 adds 128: softmax and exp need m > 131072 there (docs)
    seeds: int = 5  # spec §9 P7
    d_in: int = 16  # ours: with d_in = 5 the kernel of 128 unit vectors is too ill-conditioned to train
    sigma_w: float = 0.5  # ours: at 1 the softmax Gram concentrates slower than m^-1/2 below m = 65536 (docs)
    c: float = 0.5  # practical step c / (s lambda_max(H*)), spec §8
    eps: float = 1e-3  # target ||F - Y||^2 <= eps ||Y||^2
    widths: tuple[int, ...] = tuple(2**k for k in range(4, 19))  # 16 ... 262144: exp at n = 64 needs > 131072
    max_steps: int = 20000
    record_every: int = 5
    activations: tuple[str, ...] = ("softmax", "relu", "exp")

    def __post_init__(self) -> None:
        check_grid("ns", self.ns, 2, points=2, why="P7's exponents are slopes in n", example="8,16,32")
        check_grid("widths", self.widths, 2, even=True)
        if list(self.widths) != sorted(self.widths):
            raise ValidationError(
                f"widths == {tuple(self.widths)}, must be increasing: the width needed is the first width of the grid "
                f"that concentrates and trains; pass widths={','.join(map(str, sorted(self.widths)))}"
            )
        for name in ("d_in", "max_steps", "record_every"):
            check_scalar(name, getattr(self, name), kind=int, low=1)
        check_count("seeds", self.seeds, 2, MAX_SEEDS, "ours: a bound on the run's time, which grows linearly in it")
        check_scalar("sigma_w", self.sigma_w, low=0.0, low_inclusive=False)
        check_scalar("c", self.c, low=0.0, high=1.0, low_inclusive=False)
        check_scalar("eps", self.eps, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
        if not self.activations:
            raise ValidationError("activations is empty; pass at least one of " + ", ".join(ACTIVATIONS))
        for act in self.activations:
            check_in("activations entry", act, tuple(ACTIVATIONS))
        if len(set(self.activations)) < len(self.activations):
            raise ValidationError(f"activations == {tuple(self.activations)} repeats a network; name each once")


MAX_SEEDS = 100


# ---- build and measure ----------------------------------------------------------------------------------------
def _follows_envelope(net: TwoLayerNet, X, Y, lam_inf: float, config: Table1Config) -> float:
    """Steps GD takes to ``eps`` under the Lemma 5.3 envelope built from ``lambda^inf / 2``; NaN if it leaves it."""
    y_sq = float(Y.pow(2).sum())
    lr = practical_step(net, X, config.c)
    factor = contraction_bound(lr, net.kernel_scale, lam_inf / 2)  # spec §5 Lemma 5.3, lambda >= lambda^inf/2

    def outside(row: dict[str, float]) -> bool:
        return row["sq_error"] > factor ** row["step"] * y_sq

    tol = config.eps * y_sq
    result = gradient_descent(
        net, X, Y, lr=lr, steps=config.max_steps, record_every=config.record_every, tol=tol, stop=outside
    )
    last = result.frame.iloc[-1]
    return float(last["step"]) if last["sq_error"] <= tol and not outside(last.to_dict()) else math.nan


def _needed(config: Table1Config, activation: str, n: int, seed: int) -> dict[str, float]:
    """The first width of the grid that concentrates and trains, which condition bound there, and the width that
    training alone needs (searched on its own from ``m = 2``)."""
    gen = torch.Generator().manual_seed(1000 * seed + n)
    X = unit_rows(n, config.d_in, gen)
    Y = (2.0 * torch.randint(0, 2, (n, 1), generator=gen) - 1.0).to(torch.float64)  # labels +-1, ||y_i|| = 1
    cls = ACTIVATIONS[activation]
    H_inf = infinite_width_gram(cls(config.d_in, 1, 2, config.sigma_w), X)
    lam_inf = float(torch.linalg.eigvalsh(H_inf)[0])  # spec §4.2: deterministic stand-in for lambda
    nan = math.nan
    out = {"activation": activation, "n": n, "seed": seed, "lambda_inf": lam_inf, "width_concentration": nan}
    out |= {"width_needed": nan, "steps_needed": nan, "binds": "none"}
    for width in config.widths:
        net = cls(config.d_in, 1, width, config.sigma_w, seed=seed)
        if float(torch.linalg.matrix_norm(gram(net, X) - H_inf, ord=2)) > lam_inf / 2:
            continue  # not concentrated: H* is not yet within lambda^inf / 2 of I (x) K
        if math.isnan(out["width_concentration"]):
            out["width_concentration"] = float(width)
        steps = _follows_envelope(net, X, Y, lam_inf, config)
        if not math.isnan(steps):
            binds = "concentration" if width == out["width_concentration"] else "training"
            out.update(width_needed=float(width), steps_needed=steps, binds=binds)
            break
    return out | _training_width(config, cls, X, Y, lam_inf, seed)


def _training_width(config: Table1Config, cls, X, Y, lam_inf: float, seed: int) -> dict[str, float]:
    """The first width of ``2, 4, 8, ...`` (up to the grid's largest) at which GD follows the envelope to eps."""
    width = 2
    while width <= max(config.widths):
        steps = _follows_envelope(cls(config.d_in, 1, width, config.sigma_w, seed=seed), X, Y, lam_inf, config)
        if not math.isnan(steps):
            return {"width_training": float(width), "steps_training": steps}
        width *= 2
    return {"width_training": math.nan, "steps_training": math.nan}


def run_table1(config: Table1Config, ctx: RunContext) -> ExperimentResult:
    jobs = [(act, n, seed) for act in config.activations for n in config.ns for seed in range(config.seeds)]
    frame = pd.DataFrame([_needed(config, act, n, seed) for act, n, seed in ctx.bar(jobs, desc="ntk.table1 runs")])
    slope_names = {  # column -> its slope's name in slopes.parquet (the first three as before the falsifier audit)
        "width_needed": "width_slope",
        "steps_needed": "steps_slope",
        "lambda_inf": "lambda_inf_slope",
        "width_concentration": "concentration_width_slope",
        "width_training": "training_width_slope",
    }
    columns = list(slope_names)
    censored = frame.fillna({c: math.inf for c in columns})  # no width in the grid: wider than the grid
    medians = censored.groupby(["activation", "n"], as_index=False)[columns].median()
    binding = _binding_table(frame)
    slopes = pd.DataFrame(
        [
            {"activation": act, **{slope_names[c]: fit_slope(part["n"], part[c])[0] for c in columns}}
            for act, part in medians.groupby("activation")
        ]
    )
    notes = [
        "Table 1 predicts sufficient widths and iterations lambda^-2 n^(2+o(1)) log^2 for every activation; the "
        "measured exponents must not exceed 2 - 2 x (slope of lambda^inf), and softmax's and exp's widths, each "
        "over its own lambda^-2 n^2, must grow like ReLU's ('comparable up to n^o(1)'), within 3 bootstrap SE.",
        f"Censored runs (no width in the grid) count as wider than {max(config.widths)} in the medians, and as "
        f"{2 * max(config.widths)} (the next width, a lower bound) in the comparison's exponents.",
        "What binds (binding.parquet): the width needed is the first concentrated width at which GD also follows "
        "the envelope ('concentration' binds) or a wider one ('training' binds); "
        + "; ".join(f"{r.activation} n={r.n}: {r.binds}" for r in binding.itertuples()),
    ]
    return ExperimentResult(
        frame,
        _table1_checks(frame, config),
        {"table1": _table1_figure(medians, config)},
        {"medians": medians, "slopes": slopes, "binding": binding},
        notes,
    )


def _binding_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (activation, n): the median concentration, training-alone and needed widths, and what bound how often."""
    rows = []
    for (act, n), cell in frame.groupby(["activation", "n"]):
        counts = cell["binds"].value_counts()
        rows.append(
            {
                "activation": act,
                "n": n,
                "width_concentration": float(cell["width_concentration"].fillna(math.inf).median()),
                "width_training": float(cell["width_training"].fillna(math.inf).median()),
                "width_needed": float(cell["width_needed"].fillna(math.inf).median()),
                "binds": ", ".join(f"{kind} {count}/{len(cell)}" for kind, count in counts.items()),
            }
        )
    return pd.DataFrame(rows)


# ---- checks -------------------------------------------------------------------------------------------------------
def _table1_checks(frame: pd.DataFrame, config: Table1Config) -> list:
    """P7 against Table 1: medians identified, exponents within the theorem's, softmax and exp comparable to ReLU."""
    censored = frame.groupby(["activation", "n"])["width_needed"].apply(lambda w: float(w.isna().mean()))
    checks = [
        IDENTIFIED.less(
            float(censored.max()),
            IDENTIFIED.param("bound"),
            strict=True,
            spread="a median needs fewer than half the seeds censored",
        )
    ]
    lam = {act: fit_slope(part["n"], part["lambda_inf"])[0] for act, part in frame.groupby("activation")}
    for act, part in frame.groupby("activation"):
        if act not in WIDTH:
            continue
        found = part[part["binds"] != "none"]
        fields = {
            "conc": int((found["binds"] == "concentration").sum()),
            "runs": len(found),
            "lo": f"{part['width_training'].min():g}",
            "hi": f"{part['width_training'].max():g}",
            "lam": f"{lam[act]:.3g}",
        }
        medians = part.fillna({"width_concentration": math.inf}).groupby("n")["width_concentration"].median()
        for claim in (WIDTH[act], WIDTH[act].revised(2)):  # revision 2: the old text (Cor 4.3), the same reading
            checks.append(_rate_check(claim.format(**fields), medians, lam[act], config))
    if "relu" in lam:
        reading = COMPARABLE_READING
        cells = _width_cells(frame, reading.param("censored_as") * max(config.widths))
        draws = _bootstrap_exponents(cells, lam, reading.param("resamples"), reading.param("bootstrap_seed"))
        relative = _relative_exponents(cells, lam)
        for act, claim in COMPARABLE.items():
            if act not in lam:
                continue
            gaps = np.array([d[act] - d["relu"] for d in draws])
            gaps = gaps[np.isfinite(gaps)]
            se = float(gaps.std(ddof=1))
            mine, relu = f"{relative[act]:.3g}", f"{relative['relu']:.3g}"
            checks.append(
                claim.format(act=act, mine=mine, relu=relu).close(
                    0.0,
                    relative[act] - relative["relu"],
                    atol=reading.param("se_multiple") * se,
                    spread=f"3 bootstrap SE over seeds ({len(gaps)} resamples of the seeds of every (activation, n); "
                    f"SE {se:.3g}); predicted: the same exponent (Table 1: both lambda^-2 n^(2+o(1)))",
                )
            )
    return checks


def _rate_check(claim: Claim, medians: pd.Series, lam_slope: float, config: Table1Config):
    """The fitted exponent in n of ``medians`` is at most Table 1's ``2 - 2 slope(lambda^inf)`` plus the log^2
    allowance. A median beyond the grid counts as ``censored_as`` x the grid's largest width, so the exponent is then a
    lower bound: the row fails with its (negative) margin when that lower bound exceeds the bound, and as "none in the
    grid" (no margin: the theorem promises a width we did not find) when it does not."""
    beyond = claim.param("censored_as") * max(config.widths)
    missing = [int(n) for n, v in medians.items() if not math.isfinite(v)]
    bound = 2.0 - 2.0 * lam_slope  # spec §5.1 Table 1: lambda^-2 n^2 (log factors below)
    logs = log_factor_allowance(list(config.ns), claim.param("log_power"))
    why = f"the log^2 factor moves the exponent by {logs:.3g} over n in [{min(config.ns)}, {max(config.ns)}]"
    if not missing:
        return claim.slope(medians.index.tolist(), medians.tolist(), bound, logs, side="at_most", spread=why)
    lower = fit_slope(medians.index.tolist(), medians.clip(upper=beyond).tolist())[0]
    margin = bound + logs - lower
    censored = f"none in the grid at n = {', '.join(map(str, missing))} (median over seeds), counted as {beyond:g}"
    return claim.holds(
        f"<= {bound + logs:.3g}",
        float(lower),
        f"{why}; {censored}: the measured exponent is a lower bound",
        False,
        margin=margin if margin < 0 else None,
    )


def _width_cells(frame: pd.DataFrame, beyond: float) -> dict[str, dict[int, np.ndarray]]:
    """The widths needed per activation and n, one entry per seed; a censored run (no width in the grid) counts as
    ``beyond``, the first width past the grid: a lower bound that keeps every exponent finite."""
    widths = frame.fillna({"width_needed": beyond})
    return {
        act: {int(n): cell["width_needed"].to_numpy() for n, cell in part.groupby("n")}
        for act, part in widths.groupby("activation")
    }


def _relative_exponents(
    cells: dict[str, dict[int, np.ndarray]], lam: dict[str, float], resample=None
) -> dict[str, float]:
    """Per activation, the fitted exponent in n of the median width needed over Table 1's bound ``lambda^-2 n^2``
    (spec §5.1): ``slope(median width) - (2 - 2 slope(lambda^inf))``. ``resample`` maps each cell's seeds to a
    bootstrap draw of them."""
    out = {}
    for act, by_n in cells.items():
        medians = [float(np.median(w if resample is None else resample(w))) for w in by_n.values()]
        out[act] = fit_slope(list(by_n), medians)[0] - (2.0 - 2.0 * lam[act])
    return out


def _bootstrap_exponents(
    cells: dict[str, dict[int, np.ndarray]], lam: dict[str, float], resamples: int = 2000, seed: int = 0
) -> list[dict[str, float]]:
    """:func:`_relative_exponents` on ``resamples`` draws of the seeds, with replacement, within every (act, n)."""
    rng = np.random.default_rng(seed)
    return [_relative_exponents(cells, lam, lambda w: w[rng.integers(0, len(w), len(w))]) for _ in range(resamples)]


# ---- figure -------------------------------------------------------------------------------------------------------
@house_figure
def _table1_figure(medians: pd.DataFrame, config: Table1Config):
    fig, axes = new_figure(3, width=3.4)
    for act, part in medians.groupby("activation"):
        (line,) = axes[0].loglog(part["n"], part["width_needed"], "o-", label=act)
        axes[0].loglog(part["n"], part["width_training"], "x:", color=line.get_color())
        axes[1].loglog(part["n"], part["steps_needed"], "o-", label=act)
        axes[2].loglog(part["n"], part["lambda_inf"], "o-", label=act)
    axes[0].plot([], [], "x:", color="0.4", label="training alone")
    axes[0].set(xlabel="$n$", ylabel="width needed (median)")
    axes[1].set(xlabel="$n$", ylabel=r"iterations to $\epsilon$ (median)")
    axes[2].set(xlabel="$n$", ylabel=r"$\lambda_{min}$ of the limit kernel")
    axes[0].legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="ntk.table1",
        cost=858.0,
        config_type=Table1Config,
        run=run_table1,
        quick={"ns": (8, 16, 32), "seeds": 3, "widths": tuple(2**k for k in range(6, 19)), "max_steps": 5000},
        claims=CLAIMS,
        falsifiers=FALSIFIERS,
    )
)
