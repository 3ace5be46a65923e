"""The implicit-bias explorer: train one parametrisation with one optimizer, then say which max-margin SVM it found.

Spec: implicit-bias-ngd §5 (W-SVM, Frobenius) and §8.3 (NGD -> W_mm), kq-nuclear-norm §4 (nuclear norm for
``(K, Q)``, l1 for the diagonal) and §7, mirror-descent-lp §5 (l_p-AttSVM, locally optimal selections) and §8.

The candidates are every SVM the three papers name: Frobenius, nuclear, l1-diagonal and l2-diagonal for the default
selection (``data.select``, else the optimal tokens), the entrywise l_p SVM for ``opt="md:<p>"``, and the Frobenius
SVM of each other locally optimal selection. Training is one run of :func:`attnlab.batched.train` that records the
alignment with every candidate in one pass along the same trajectory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_in, check_scalar
from attnlab.batched import PARAMETRIZATIONS
from attnlab.batched import train as batched_train
from attnlab.data import TokenSelectionData
from attnlab.losses import LOSSES
from attnlab.models.functional import token_scores
from attnlab.plotting import STEP, house_figure, label_axes, log_gap_axis, new_figure
from attnlab.svm import InfeasibleProgramError, attention_svm, diagonal_svm, locally_optimal_selections

__all__ = ["Explanation", "explain", "parse_opt"]

_OPT_HELP = 'opt must be "gd", "ngd", "polyak" or "md:<p>" with a number p > 1 (e.g. "md:1.5")'


def parse_opt(opt: str) -> tuple[str, float | None]:
    """Split an optimizer string into the :func:`attnlab.batched.train` name and the mirror-descent exponent.

    Parameters
    ----------
    opt : str
        ``"gd"``, ``"ngd"``, ``"polyak"`` or ``"md:<p>"`` (normalised l_p mirror descent, ``p > 1``).

    Returns
    -------
    name : str
    p : float or None
        The exponent of ``"md:<p>"``, else None.

    Raises
    ------
    ValidationError
        On any other string; the message lists the accepted forms.

    Examples
    --------
    >>> parse_opt("md:1.5")
    ('md', 1.5)
    """
    if not isinstance(opt, str):
        raise ValidationError(f"{_OPT_HELP}, got {opt!r}")
    if opt in ("gd", "ngd", "polyak"):
        return opt, None
    name, _, exponent = opt.partition(":")
    try:
        p = float(exponent)
    except ValueError:
        p = math.nan
    if name != "md" or not p > 1 or math.isinf(p):
        raise ValidationError(f"{_OPT_HELP}, got {opt!r}")
    return "md", p


@dataclass
class Explanation:
    """What :func:`explain` returns.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per candidate SVM: ``candidate``, ``norm``, ``select``, ``one_minus_cos`` (``1 - cos(W_K, W_c)``),
        ``bregman`` (``dB_p(W_c, W_K)`` for ``md:<p>``, else NaN), ``closest`` (bool).
    trajectory : pandas.DataFrame
        One row per (recorded step, candidate): ``step``, ``candidate``, ``loss``, ``norm``, ``alignment``,
        ``one_minus_cos`` and, for ``md:<p>``, ``bregman``.
    closest : str
        The candidate of smallest ``1 - cos`` at the last step.
    figure : matplotlib.figure.Figure
        ``1 - cos`` of every candidate over time, and the final distances.
    skipped : list of str
        Candidates left out (an infeasible program, no head for the local selections) and why.
    W : torch.Tensor, shape (d, d)
        The final combined matrix.
    """

    table: pd.DataFrame
    trajectory: pd.DataFrame
    closest: str
    figure: Any
    skipped: list[str] = field(default_factory=list)
    W: torch.Tensor | None = None


def _candidates(data: TokenSelectionData, p: float | None, max_selections: int, solver: str | None):
    """``{name: AttentionSVMResult}`` of every feasible candidate, and the reasons for the ones left out."""
    programs = {
        "fro": lambda: attention_svm(data, "fro", solver=solver),  # implicit-bias-ngd §5
        "nuc": lambda: attention_svm(data, "nuc", solver=solver),  # kq-nuclear-norm §4 (W*-SVM)
        "l1-diag": lambda: diagonal_svm(data, 1.0, solver=solver),  # kq-nuclear-norm §4 (l1-SVM)
        "l2-diag": lambda: diagonal_svm(data, 2.0, solver=solver),  # kq-nuclear-norm §7.2 (beta trained directly)
    }
    if p is not None:
        programs[f"l{p:g}"] = lambda: attention_svm(data, "fro" if p == 2.0 else p, solver=solver)  # md §5
    found, skipped = {}, []
    for name, solve in programs.items():
        try:
            found[name] = solve()
        except InfeasibleProgramError as err:
            skipped.append(f"{name}: infeasible ({str(err).split(';')[0]})")
    if data.v is None:
        skipped.append("locally optimal selections: the data has no head v")
        return found, skipped
    default = tuple(found["fro"].select.tolist()) if "fro" in found else None
    for report in locally_optimal_selections(data, "fro", max_candidates=max_selections, solver=solver):
        select = tuple(report.select.tolist())
        if select != default:
            found["fro[" + ",".join(map(str, select)) + "]"] = report.svm  # mirror-descent-lp §5 Def. 3
    return found, skipped


def _initial(param: str, d: int, d_e: int, init_scale: float, seed: int) -> dict[str, torch.Tensor]:
    """Initial parameters of the one run: small Gaussian ``W`` or ``(K, Q)``; for the diagonal the kq-nuclear-norm
    initialisation (5), ``xi_k = sqrt(2) init_scale``, ``xi_q = 0``."""
    gen = torch.Generator().manual_seed(seed)

    def gaussian(*shape: int) -> torch.Tensor:
        return init_scale * torch.randn(*shape, generator=gen, dtype=torch.float64)

    if param == "W":
        return {"W0": gaussian(d, d)}
    if param == "KQ":
        return {"K0": gaussian(d, d_e), "Q0": gaussian(d, d_e)}
    ones = torch.ones(d, dtype=torch.float64)
    return {"xi_k0": math.sqrt(2.0) * init_scale * ones, "xi_q0": torch.zeros_like(ones)}  # spec kq §3.1 (5)


def explain(
    data: TokenSelectionData,
    param: str = "W",
    opt: str = "ngd",
    steps: int = 1000,
    lr: float = 0.1,
    *,
    loss: str = "exp",
    record_every: int | None = None,
    init_scale: float = 0.01,
    d_e: int | None = None,
    seed: int = 0,
    max_selections: int = 16,
    solver: str | None = None,
) -> Explanation:
    """Train ``param`` with ``opt`` on ``data`` and rank every candidate SVM by its distance to the final direction.

    Spec: implicit-bias-ngd §5, §8.3; kq-nuclear-norm §4, §7; mirror-descent-lp §5, §8.

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v`` (the head is fixed during training).
    param : {"W", "KQ", "diag"}, default="W"
        Combined ``W``, factored ``W = K Q^T`` (``K, Q`` of shape ``(d, d_e)``), or diagonal ``W = diag(xi_k * xi_q)``.
    opt : str, default="ngd"
        ``"gd"``, ``"ngd"``, ``"polyak"`` or ``"md:<p>"`` (normalised l_p mirror descent).
    steps : int, default=1000
    lr : float, default=0.1
        Step size (for Polyak: the cap on the step).
    loss : {"exp", "logistic"}, default="exp"
    record_every : int, optional
        Default ``max(1, steps // 100)``.
    init_scale : float, default=0.01
        Scale of the Gaussian initialisation of ``W`` or ``(K, Q)``; ``omega_0`` of the diagonal one (ours).
    d_e : int, optional
        Width of ``K, Q`` for ``param="KQ"``; default ``d``.
    seed : int, default=0
        Seed of the initialisation.
    max_selections : int, default=16
        Token selections tried when looking for locally optimal ones (see
        :func:`attnlab.svm.locally_optimal_selections`).
    solver : {"CLARABEL", "SCS"}, optional

    Returns
    -------
    Explanation

    Raises
    ------
    ValidationError
        On a bad ``param``, ``opt``, ``loss`` or size, data without a head, when no candidate is feasible, when
        training diverged (non-finite loss), or when the gradient is zero throughout (every token ties).

    Notes
    -----
    Distances: ``1 - cos(W_K, W_c)`` (Frobenius inner product) for every optimizer, and for ``md:<p>`` also the
    directional Bregman divergence ``dB_p(W_c, W_K)`` (mirror-descent-lp §3). The closest candidate is the one of
    smallest ``1 - cos``.
    """
    if not isinstance(data, TokenSelectionData):
        raise ValidationError(f"data must be a TokenSelectionData, got {type(data).__name__}")
    data.require_head()
    check_in("param", param, PARAMETRIZATIONS)
    name, p = parse_opt(opt)
    check_in("loss", loss, LOSSES)
    check_scalar("steps", steps, kind=int, low=1)
    check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("init_scale", init_scale, low=0.0, low_inclusive=False)
    check_scalar("seed", seed, kind=int, low=0)
    record_every = max(1, steps // 100) if record_every is None else record_every
    check_scalar("record_every", record_every, kind=int, low=1)
    d_e = data.d if d_e is None else d_e
    check_scalar("d_e", d_e, kind=int, low=1)

    gamma = token_scores(data.X, data.y, data.v)
    if bool((gamma.amax(dim=-1) == gamma.amin(dim=-1)).all()):
        raise ValidationError(
            "every token ties in every sequence (the head v gives all tokens one score, e.g. v = 0): the gradient is "
            "zero, training cannot move and no SVM can be named; pass data whose head separates the tokens"
        )
    svms, skipped = _candidates(data, p, max_selections, solver)
    if not svms:
        raise ValidationError(
            f"no candidate SVM is feasible on this data ({'; '.join(skipped)}); the selected tokens "
            "cannot be separated, check attnlab.svm.is_separable(data)"
        )
    names = list(svms)
    options: dict[str, Any] = {"max_step": lr} if name == "polyak" else {}
    if name == "md":
        options.update(p=p, normalized=True, bregman_p=p)
    init = _initial(param, data.d, d_e, init_scale, seed)
    run = batched_train(
        data.X,
        data.Z,
        data.y,
        data.v,
        init.pop("W0", None),
        param=param,
        optimizer=name,
        lr=None if name == "polyak" else lr,
        loss=loss,
        steps=steps,
        record_every=record_every,
        refs={c: svms[c].W for c in names},
        **init,
        **options,
    )
    if run.status[0] != "completed":
        raise ValidationError(
            f"training diverged: the loss became non-finite after step {run.last_step[0]} with opt={opt!r}, "
            f"lr={lr}; no SVM is named for a diverged run. Lower lr (or use ngd or a capped polyak)"
        )
    frame = run.frame
    if not bool((frame["grad_norm"] > 0).any()):
        raise ValidationError(
            "the gradient is zero at every recorded step (every token ties: the head v scores all tokens alike, "
            "e.g. v = 0), so training cannot move and no SVM is named; pass data whose head separates the tokens"
        )
    trajectory = pd.concat(
        [
            frame[["step", "loss", "norm"]].assign(
                candidate=c,
                alignment=frame[f"alignment_{c}"],
                **({"bregman": frame[f"bregman_{c}"]} if p is not None else {}),
            )
            for c in names
        ],
        ignore_index=True,
    )
    trajectory["one_minus_cos"] = 1.0 - trajectory["alignment"]
    final = trajectory[trajectory["step"] == steps].set_index("candidate")
    table = pd.DataFrame(
        {
            "candidate": names,
            "norm": [str(svms[c].norm) for c in names],
            "select": [",".join(map(str, svms[c].select.tolist())) for c in names],
            "one_minus_cos": [float(final.at[c, "one_minus_cos"]) for c in names],
            "bregman": [float(final.at[c, "bregman"]) if p is not None else math.nan for c in names],
        }
    )
    closest = str(table.loc[table["one_minus_cos"].idxmin(), "candidate"])
    table["closest"] = table["candidate"] == closest
    figure = _figure(trajectory, table, param, opt)
    return Explanation(table=table, trajectory=trajectory, closest=closest, figure=figure, skipped=skipped, W=run.W[0])


@house_figure
def _figure(trajectory: pd.DataFrame, table: pd.DataFrame, param: str, opt: str):
    fig, axes = new_figure(2, width=4.2)
    for candidate, rows in trajectory.groupby("candidate", sort=False):
        rows = rows[rows["step"] > 0]
        axes[0].plot(rows["step"], rows["one_minus_cos"].clip(lower=1e-16), label=candidate)
    log_gap_axis(axes[0], r"$1 - \cos(W_t, W_{svm})$")
    axes[0].set_xlabel(STEP)
    axes[0].legend()
    colors = ["C3" if c else "C0" for c in table["closest"]]
    axes[1].barh(table["candidate"], table["one_minus_cos"].clip(lower=1e-16), color=colors)
    axes[1].set_xscale("log")
    label_axes(axes[1], r"final $1 - \cos(W_T, W_{svm})$", "candidate SVM", "closest in red")
    fig.suptitle(f"param={param}, opt={opt}")
    return fig
