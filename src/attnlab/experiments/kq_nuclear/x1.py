"""X1: the RK4 flow on diagonal ``(xi_k, xi_q)`` against the closed form of Lemma A.1 and Lemma 4.1's ``(w_+, w_-)`` flow.

Spec: kq-nuclear-norm §9 X1 (n=3, T=3, d=5, RK4, dt=1e-3, t <= 20, expect <= 1e-12), §3.1 (Lemma 4.1, Lemma A.1,
the conserved ``xi_k^2 - xi_q^2``, Lemma 4.2's loss decrease).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from attnlab.data import scores_equal
from attnlab.experiments.kq_nuclear.common import (
    SOURCE,
    ScoresConfig,
    check_omegas,
    diagonal_init,
    factor_gradient_swapped,
    k_gradient_halved,
    q_gradient_reversed,
)
from attnlab.experiments.registry import register
from attnlab.models import Diagonal, SignedSquares
from attnlab.models.functional import loss_gradients
from attnlab.plotting import house_figure, label_axes, label_ours, log_gap_axis, new_figure, theory_hline
from attnlab.training.flow import closed_form_beta, constraint_vectors, gradient_flow
from attnlab.verify import Claim, Experiment, ExperimentResult, Reading, Revision, RunContext, size_change

__all__ = ["X1Config", "run_x1"]


@dataclass(frozen=True)
class X1Config(ScoresConfig):
    """X1: the RK4 flow on diagonal ``(xi_k, xi_q)`` against ``beta = omega_0^2 sinh(B phi)`` and the ``w`` flow.

    Spec: kq-nuclear-norm §9 X1, §3.1 (Lemma 4.1, Lemma A.1). All values are ours (the paper has no experiments;
    those marked "spec" are the spec's [X] proposals).

    Attributes
    ----------
    gap : float
        Score gap of the optimal token in ``scores_equal`` (ours).
    omegas : tuple of float
        Initialisation scales ``omega_0``, one run per value and initialisation (ours).
    dt : float
        RK4 time step (spec: 1e-3).
    t_max : float
        Flow time integrated (spec: 20).
    record_every : int
        Steps between recorded states (ours).
    tolerance : float
        Largest relative error allowed between two forms of the same flow (spec: 1e-12 at ``dt = 1e-3``).
    seed : int
        Data seed (ours).
    """

    n: int = 3
    d: int = 5
    gap: float = 3.0
    omegas: tuple[float, ...] = (0.1, 0.5, 1.0)
    dt: float = 1e-3
    t_max: float = 20.0
    record_every: int = 200
    tolerance: float = 1e-12
    seed: int = 0

    # the paper has no experiments: n, T, d, dt, t_max and tolerance are the spec's [X] proposals, the rest ours
    OURS = ("n", "T", "d", "gap", "omegas", "dt", "t_max", "record_every", "tolerance", "seed")
    INTS = ("n", "T", "d", "record_every", "seed")
    POSITIVE = ("gap", "dt", "t_max", "tolerance")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_omegas(self.omegas)


HALVED, REVERSED, SWAPPED = k_gradient_halved("x1"), q_gradient_reversed("x1"), factor_gradient_swapped("x1")
FALSIFIERS = (HALVED, REVERSED, SWAPPED)
_SIZES = ("n", "T", "d", "gap", "omegas", "dt", "t_max", "record_every", "tolerance", "seed")
_WINDOW = "every recorded time t = 0, record_every dt, ..., t_max of the RK4 flow"
_BOTH = (
    "both initialisations (5) for each omega0 of omegas: canonical (xi_k = sqrt(2) omega0, xi_q = 0) and "
    "alternating per entry; the one scores_equal data set of the config's seed"
)
_CANONICAL = (
    "the canonical initialisation (5) (xi_k = sqrt(2) omega0, xi_q = 0) for each omega0 of omegas; the one "
    "scores_equal data set of the config's seed"
)
_RK4_BEFORE = (
    "<= config.tolerance: 1e-12 at the spec's dt = 1e-3 (spec §9 X1); RK4's O(dt^4) error sets the quick size's "
    "1e-9 at dt = 1e-2"
)
_RK4 = (
    "<= config.tolerance: 1e-12 at the spec's dt = 1e-3 (spec §9 X1), carried to the quick step dt = 1e-2 by RK4's "
    "global error O(dt^4): 1e-12 x 10^4 = 1e-8"
)
# the sizes of the first commit (2026-11-22): the quick run integrated to t = 2, recording every 20 steps
_QUICK_T2 = {
    "n": {"full": 3, "quick": 3}, "T": {"full": 3, "quick": 3}, "d": {"full": 5, "quick": 5},
    "gap": {"full": 3.0, "quick": 3.0}, "omegas": {"full": [0.1, 0.5, 1.0], "quick": [0.1, 0.5, 1.0]},
    "dt": {"full": 0.001, "quick": 0.01}, "t_max": {"full": 20.0, "quick": 2.0},
    "record_every": {"full": 200, "quick": 20}, "tolerance": {"full": 1e-12, "quick": 1e-9},
    "seed": {"full": 0, "quick": 0},
}  # fmt: skip
# every field's full and quick value before 2026-11-29, when the quick tolerance became the spec's carried by dt^4
_QUICK_1E9 = {**_QUICK_T2, "t_max": {"full": 20.0, "quick": 1.0}, "record_every": {"full": 200, "quick": 10}}
_CARRIED = (
    "the quick tolerance was said to be the spec's 1e-12 at dt = 1e-3 carried to dt = 1e-2 by RK4's O(dt^4) error, "
    "which is 1e-12 x 10^4 = 1e-8, not the 1e-9 it was: ten times tighter than its own derivation, it failed at "
    "seeds 4 and 6 (conservation drift 1.35e-9 and 2.5e-9, the closed form 1.3e-9 at seed 6), which pass at the full "
    "size, and the default seed's drift sat at 9.2e-10. The falsifier's errors are 0.04 to 0.35"
)
_CI_BUDGET = (
    "the quick size was halved for the CI budget (t_max 2 -> 1, record_every 20 -> 10; the full size unchanged), "
    "in 12fefa3 with the quick settings of every experiment; the row passed before and after"
)
_SECOND_INIT = (
    "a second initialisation (5), alternating per entry, joined the canonical one (02eeba0), so that Lemma 4.1's "
    "(w_+, w_-) flow is not one rotation of the (xi_k, xi_q) flow; the row passed before and after"
)


def _history(
    reading: Reading,
    statistic: str,
    outcomes: tuple[tuple[str, str], ...],
    claim: str,
    why: str = _CARRIED,
    text: str = "",
) -> tuple[Revision, ...]:
    """The readings a row of the first commit had before both initialisations (5) entered (git history), and the
    reading before the quick tolerance of 2026-11-29 (``reading``, ``outcomes[2]``: its quick outcome; ``text``: the
    claim's text then, where it has changed since)."""
    old = dataclasses.replace(reading, statistic=statistic, subset=_CANONICAL)
    (quick1, full1), (quick2, full2), (quick3,) = outcomes
    return (
        Revision(old, "2026-11-22", _CI_BUDGET, quick1, full1, claim=claim, sizes=_QUICK_T2),
        Revision(old, "2026-11-25", _SECOND_INIT, quick2, full2, claim=claim, sizes=_QUICK_1E9),
        size_change(reading, _QUICK_1E9, "2026-11-29", why, quick3, claim=text),
    )


_CLOSED_BEFORE = Reading(
    "max over records, runs and entries of |beta_flow - omega0^2 sinh(B phi)| / max(1, |beta_flow|): beta_flow = "
    "xi_k xi_q of the RK4 flow (2), phi integrated alongside by the same scheme (Lemma A.1's closed form)",
    _WINDOW,
    _BOTH,
    _RK4_BEFORE,
    sizes=_SIZES,
)
CLOSED_FORM = Claim(
    "max_t |beta_flow - omega0^2 sinh(B phi)| / max(1, |beta|) over both initialisations (5) (Lemma A.1, RK4)",
    "003:LemA.1",
    f"{SOURCE} §3.1, §9 X1",
    HALVED.name,
    id="closed-form",
    reading=dataclasses.replace(_CLOSED_BEFORE, tolerance=_RK4),
    revisions=_history(
        _CLOSED_BEFORE,
        _CLOSED_BEFORE.statistic,
        (
            ("pass: 3.4e-10 (<= 1e-9; recomputed at the old sizes with the current code)", "pass: 6.3e-14 (<= 1e-12)"),
            ("pass: 2.4e-10 (<= 1e-9)", "pass: 6.3e-14 (<= 1e-12)"),
            ("pass: 2.4e-10 (<= 1e-9) (cb3f4e7)",),
        ),
        "max_t |beta_flow - omega0^2 sinh(B phi)| / max(1, |beta|) (Lemma A.1, RK4)",
    ),
)
_CONSERVED_BEFORE = Reading(
    "max over records, runs and entries of |I(t) - I(0)| / max(1, xi_k^2 + xi_q^2), I = xi_k^2 - xi_q^2 of the RK4 "
    "flow (2)",
    _WINDOW,
    _BOTH,
    _RK4_BEFORE,
    sizes=_SIZES,
)
CONSERVED = Claim(
    "conservation of xi_k^2 - xi_q^2 along the flow (max drift / max(1, xi_k^2 + xi_q^2))",
    "003:LemA.1",
    f"{SOURCE} §3.1",
    HALVED.name,
    id="conserved",
    reading=dataclasses.replace(_CONSERVED_BEFORE, tolerance=_RK4),
    revisions=_history(
        _CONSERVED_BEFORE,
        "max over records, runs and entries of |xi_k^2 - xi_q^2 - 2 omega0^2| / max(1, xi_k^2 + xi_q^2) of the RK4 "
        "flow (2) (2 omega0^2 is I(0) of the canonical initialisation)",
        (
            ("pass: 9.2e-10 (<= 1e-9; recomputed at the old sizes with the current code)", "pass: 9.1e-14 (<= 1e-12)"),
            ("pass: 9.2e-10 (<= 1e-9)", "pass: 9.1e-14 (<= 1e-12)"),
            ("pass: 9.2e-10 (<= 1e-9) (cb3f4e7)",),
        ),
        "conservation of xi_k^2 - xi_q^2 along the flow (max drift / max(1, xi_k^2 + xi_q^2))",
    ),
)
_EQUIVALENT_BEFORE = Reading(
    "max over records, runs and entries of |beta(t) - w(t)| / max(1, |beta(t)|): beta = xi_k xi_q of the RK4 "
    "flow (2), w = (w_+^2 - w_-^2) / 2 of the RK4 flow (3) from w_+ = w_- = omega0 (so (4) holds at t = 0)",
    _WINDOW,
    _BOTH,
    _RK4_BEFORE,
    sizes=_SIZES,
)
EQUIVALENT = Claim(
    "the flows (2) on (xi_k, xi_q) and (3) on (w_+, w_-) give one beta(t) = w(t) when (4) holds at t = 0 "
    "(Lemma 4.1; max relative difference over time, both initialisations)",
    "003:Lem4.1",
    f"{SOURCE} §3.1",
    HALVED.name,
    id="lemma41-equivalence",
    reading=dataclasses.replace(_EQUIVALENT_BEFORE, tolerance=_RK4),
    revisions=(
        size_change(_EQUIVALENT_BEFORE, _QUICK_1E9, "2026-11-29", _CARRIED, "pass: 2.5e-15 (<= 1e-9) (cb3f4e7)"),
    ),
)
_DECREASING_READING = Reading(
    "max over runs and consecutive records of L(t_(k+1)) - L(t_k) along the RK4 flow (2)",
    _WINDOW,
    _BOTH,
    "<= 0 exactly: any increase of the loss between records violates the monotone loss of the lemma's proof",
    sizes=_SIZES,
)
_MONOTONE_SIZES = tuple(f for f in _SIZES if f != "tolerance")
_OLD_DECREASING = "the loss decreases monotonically along the flow (Lemma 4.2): max increase between records"
_RATE_WHY = (
    "a generic descent property, not the lemma: any gradient flow decreases its loss, and the wrong flow with xi_k's "
    "gradient halved passed it (max increase -4.5e-4); its one falsifier turned descent into ascent. The lemma's "
    "proof states a rate, dL/dt <= -(2 w_min^2 / n) ||grad_beta L||^2 (spec §3.1), which no row read; the row now "
    "reads it at every record, and the plain decrease is the property row loss-monotone (the same reading)"
)
DECREASING = Claim(
    "the loss falls at the proof's rate, dL/dt <= -(2 w_min^2 / n) ||grad_beta L||^2 at every record (Lemma 4.2; "
    "min ratio of the two sides)",
    "003:Lem4.2",
    f"{SOURCE} §3.1, §7.1",
    (REVERSED.name, SWAPPED.name),
    id="loss-decreasing",
    reading=Reading(
        "min over runs and records of r = -(dL/dt) / ((2 w_min^2 / n) ||grad_beta L||_2^2): dL/dt = <grad_beta L, "
        "beta_dot> at the recorded state, beta_dot = xi_k_dot xi_q + xi_k xi_q_dot with (xi_k_dot, xi_q_dot) the "
        "velocity the flow integrates (minus the model's chain rule of grad_W L there), grad_beta L = diag(grad_W L), "
        "w_min = min_j |omega0_j| of the run, n the number of sequences",
        _WINDOW,
        _BOTH,
        "r >= 1: the proof's rate inequality (spec §3.1). Under (5) the proof's own steps give r >= n ([D]: dL/dt = "
        "-sum_j (xi_k^2 + xi_q^2)_j (grad_beta L)_j^2 and xi_k^2 + xi_q^2 = 2 sqrt(beta^2 + omega0^4) >= 2 omega0^2), "
        "so the paper's 1/n is slack; a flow whose factor geometry loses the floor 2 omega0^2 fails it",
        {"bound": 1.0},
        _MONOTONE_SIZES,
    ),
    revisions=(
        *_history(
            _DECREASING_READING,
            _DECREASING_READING.statistic,
            (
                ("pass: -0.0015 (<= 0; recomputed at the old sizes with the current code)", "pass: -0.00027 (<= 0)"),
                ("pass: -0.00076 (<= 0)", "pass: -0.00027 (<= 0)"),
                ("pass: -0.00076 (<= 0) (cb3f4e7)",),
            ),
            "the loss decreases monotonically along the flow (Lemma 4.2): max increase",
            "its sizes named config.tolerance, which it does not read (its tolerance is <= 0 exactly), so the quick "
            "tolerance's change reached it; the statistic, window and tolerance are unchanged",
            _OLD_DECREASING,
        ),
        Revision(
            dataclasses.replace(_DECREASING_READING, sizes=_MONOTONE_SIZES),
            "2026-11-29",
            _RATE_WHY,
            "pass: -0.00076 (<= 0) (8a9b237)",
            "pass: -0.00027 (<= 0) (8a9b237)",
            claim=_OLD_DECREASING,
        ),
    ),
)
MONOTONE = Claim(
    "the loss never increases along the flow (max increase between records; the descent of any gradient flow, "
    "Lemma 4.2's theory row until 2026-11-29)",
    "003:Lem4.2",
    f"{SOURCE} §3.1",
    kind="property",
    id="loss-monotone",
    reading=dataclasses.replace(_DECREASING_READING, sizes=_MONOTONE_SIZES),
)


_RATE_SPREAD = "the proof's steps give r >= n under (5)"


def _rate_ratio(model, data, path: dict, omega0: torch.Tensor) -> torch.Tensor:
    """``r = -(dL/dt) / ((2 w_min^2 / n) ||grad_beta L||^2)`` per record and run, shape (S, R); spec kq §3.1.

    ``dL/dt`` uses the velocity the flow integrates: minus ``model``'s chain rule of ``grad_W L`` (a falsifier's
    wrong one too). The gradients' common scale cancels in the ratio, so their mantissas suffice.
    """
    S, R = path["xi_k"].shape[:2]
    W = path["W"].reshape(S * R, *path["W"].shape[-2:])
    X, Z, y = (t.expand(S * R, *t.shape) for t in (data.X, data.Z, data.y))
    v = data.require_head().expand(S * R, -1)
    grad_W = loss_gradients(X, Z, y, v, W)[0].mantissa
    params = {name: path[name].reshape(S * R, -1) for name in ("xi_k", "xi_q")}
    velocity = {k: -g for k, g in model.parametrization.chain(params, grad_W).items()}
    beta_dot = velocity["xi_k"] * params["xi_q"] + params["xi_k"] * velocity["xi_q"]
    grad_beta = torch.diagonal(grad_W, dim1=-2, dim2=-1)  # spec kq §3.1: W = Diag(beta)
    dL_dt = (grad_beta * beta_dot).sum(-1).reshape(S, R)
    w_min = omega0.abs().amin(-1)  # spec kq §3.1: w_min = min_j |omega0_j|
    n = data.X.shape[-3]
    return -dL_dt / (2 * w_min**2 / n * grad_beta.pow(2).sum(-1).reshape(S, R))


def _inits(config: X1Config) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``omega_0`` and two initialisations (5) per omega: ``(sqrt(2) omega, 0)`` and one alternating per entry.

    Both have ``beta(0) = 0`` and ``xi_k^2 + xi_q^2 = 2 omega_0^2``, so (4) holds against ``w_+ = w_- = omega_0``.
    """
    omega0, xi_k0, xi_q0 = diagonal_init(config.omegas, config.d)
    odd = (torch.arange(config.d) % 2 == 1).to(torch.float64)
    mixed_k, mixed_q = xi_k0 * (1 - odd), xi_k0 * odd  # spec kq §3.1 (5): xi_k xi_q = 0 entrywise
    return omega0.repeat(2, 1), torch.cat([xi_k0, mixed_k]), torch.cat([xi_q0, mixed_q])


def run_x1(config: X1Config, ctx: RunContext) -> ExperimentResult:
    """X1: RK4 flows of ``(xi_k, xi_q)`` (phi tracked) and of ``(w_+, w_-)``; closed form, conservation, Lemma 4.1."""
    data = scores_equal(config.n, config.T, config.d, config.gap, seed=config.seed)
    omega0, xi_k0, xi_q0 = _inits(config)
    steps = max(1, round(config.t_max / config.dt))
    common = {"step": config.dt, "steps": steps, "method": "rk4", "record_every": config.record_every}
    model = Diagonal(config.d, xi_k0=xi_k0, xi_q0=xi_q0)
    flow = gradient_flow(model, data, track_phi=True, progress=ctx.progress, **common)
    k = len(config.omegas)
    w_flow = gradient_flow(SignedSquares(omega0[:k], omega0[:k]), data, progress=ctx.progress, **common)
    path = flow.path
    beta = path["xi_k"] * path["xi_q"]  # (S, R, d)
    closed = closed_form_beta(omega0, constraint_vectors(data.X, data.Z, data.select), path["phi"])  # Lemma A.1
    scale = beta.abs().clamp(min=1.0)
    error = ((beta - closed).abs() / scale).amax(dim=-1)  # (S, R)
    w = torch.diagonal(w_flow.path["W"], dim1=-2, dim2=-1).repeat(1, 2, 1)  # (S, R, d): w(t), spec kq §3.1 (3)
    equivalence = ((beta - w).abs() / scale).amax(dim=-1)  # (S, R)
    invariant = path["xi_k"] ** 2 - path["xi_q"] ** 2  # conserved, spec kq §3.1
    size = (path["xi_k"] ** 2 + path["xi_q"] ** 2).clamp(min=1.0)
    drift = ((invariant - invariant[:1]).abs() / size).amax(dim=-1)
    frame = flow.frame.assign(
        closed_form_error=error.reshape(-1).numpy(),
        lemma41_difference=equivalence.reshape(-1).numpy(),
        conserved_drift=drift.reshape(-1).numpy(),
        omega=np.tile(config.omegas * 2, len(path["step"])),
        init=np.tile(["(5) canonical"] * k + ["(5) alternating"] * k, len(path["step"])),
        rate_ratio=_rate_ratio(model, data, path, omega0).reshape(-1).numpy(),
    )
    increase = float(frame.sort_values("step").groupby("run")["loss"].diff().max())
    checks = [
        CLOSED_FORM.less(float(error.max()), config.tolerance),
        CONSERVED.less(float(drift.max()), config.tolerance),
        EQUIVALENT.less(float(equivalence.max()), config.tolerance),
        DECREASING.greater(float(frame["rate_ratio"].min()), spread=_RATE_SPREAD),
        MONOTONE.less(increase, 0.0),
    ]
    fig = _x1_figure(config, path, beta, closed, error)
    return ExperimentResult(frame=frame, checks=checks, figures={"closed_form": fig})


@house_figure
def _x1_figure(config: X1Config, path: dict, beta: torch.Tensor, closed: torch.Tensor, error: torch.Tensor):
    fig, axes = new_figure(2, width=4.2)
    times = path["log_time"].exp()[:, 0].numpy()
    for r, omega in enumerate(config.omegas):
        for j in range(min(config.d, 3)):
            (line,) = axes[0].plot(times, beta[:, r, j].numpy(), lw=1)
            axes[0].plot(times[::4], closed[::4, r, j].numpy(), "o", ms=3, mfc="none", color=line.get_color())
        axes[1].plot(times[1:], error[1:, r].numpy(), label=f"$\\omega_0={omega:g}$")
    axes[0].plot([], [], color="0.4", lw=1, label="RK4 flow")
    axes[0].plot([], [], "o", ms=3, mfc="none", color="0.4", label=r"closed form $\omega_0^2 \sinh(B\varphi)$")
    label_axes(axes[0], "flow time $t$", r"$\beta_j(t)$", "RK4 flow against the closed form (Lemma A.1)")
    theory_hline(axes[1], config.tolerance, "tolerance")
    log_gap_axis(axes[1], "relative error of the closed form")
    axes[1].set_xlabel("flow time $t$")
    for ax in axes:
        ax.legend()
    label_ours(fig, config)
    return fig


register(
    Experiment(
        name="kq-nuclear.x1",
        cost=82.0,
        config_type=X1Config,
        run=run_x1,
        quick={"dt": 1e-2, "t_max": 1.0, "record_every": 10, "tolerance": 1e-8},
        claims=(CLOSED_FORM, CONSERVED, EQUIVALENT, DECREASING, MONOTONE),
        falsifiers=FALSIFIERS,
    )
)
