"""The implicit-bias explorer: train one parametrisation with one optimizer, then say which max-margin SVM it found.

Spec: implicit-bias-ngd §5 (W-SVM, Frobenius) and §8.3 (NGD -> W_mm), kq-nuclear-norm §4 (nuclear norm for
``(K, Q)``, l1 for the diagonal) and §7, mirror-descent-lp §5 (l_p-AttSVM, locally optimal selections) and §8.

The candidates are every SVM the three papers name: Frobenius, nuclear, l1-diagonal and l2-diagonal for the default
selection (``data.select``, else the optimal tokens), the entrywise l_p SVMs of the optimizer's own norm family
(its registry entry's ``family``, :mod:`attnlab.optim.registry`: l_p for ``opt="md:<p>"`` and ``"sd:<p>"``, l_inf
and the nearby l_8 and l_4 for sign descent and Adam; the l_inf SVM is a linear program), the Frobenius SVM of each
other locally optimal selection, and the Frobenius SVM of the selection the trained model itself attends to. With token sets (``select=`` an ``(n, T)`` mask or lists of
indices, multi-token §2) the set-direction programs (Frobenius and nuclear) and the SVM-equivalence direction of
the trained ``W`` join the candidates (multi-token §3); a fixed nonlinear head (``head=``, multi-token §1) trains
in place of the data's linear one. Cross-attention data (``d_q != d``, multi-token §8) train a rectangular ``W``;
the diagonal candidates, square by definition, are left out there. Training is one run of :func:`attnlab.training.batched.train` that
keeps its recorded iterates; every candidate is measured on them afterwards.

A candidate is named only when the run has converged in direction: the nearest candidate within
``direction_tol`` of the final direction (``1 - cos``), and the direction moved less than that over the last tenth
of the steps. Otherwise the result says "not converged in direction" and names none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar, check_seed
from attnlab.data import Selection, TokenSelectionData
from attnlab.data.token_sets import refuse_no_margin
from attnlab.losses import LOSSES
from attnlab.metrics import cosine, directional_bregman
from attnlab.models.functional import token_scores
from attnlab.models.heads import Head, as_head
from attnlab.optim import registry
from attnlab.optim.spec import OptimizerSpec
from attnlab.plotting import STEP, house_figure, label_axes, log_gap_axis, new_figure
from attnlab.probe.capture import attended_tokens
from attnlab.svm import InfeasibleProgramError, attention_svm, diagonal_svm, locally_optimal_selections
from attnlab.svm.multi_token import SetProgramResult, set_direction_svm, svm_equivalence
from attnlab.training.batched import PARAMETRIZATIONS
from attnlab.training.batched import train as batched_train

__all__ = ["Explanation", "explain"]


@dataclass
class Explanation:
    """What :func:`explain` returns.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per candidate SVM: ``candidate``, ``norm``, ``select`` (token indices, or sets written
        ``"{0,1};{2};..."``), ``one_minus_cos`` (``1 - cos(W_K, W_c)``),
        ``bregman`` (``dB_p(W_c, W_K)`` for ``md:<p>``, else NaN), ``closest`` (bool).
    trajectory : pandas.DataFrame
        One row per (recorded step, candidate): ``step``, ``candidate``, ``loss``, ``norm``, ``alignment``,
        ``one_minus_cos`` and, for ``md:<p>``, ``bregman``.
    closest : str or None
        The candidate of smallest ``1 - cos`` at the last step, when the run converged in direction; else None.
    figure : matplotlib.figure.Figure
        ``1 - cos`` of every candidate over time, and the final distances.
    skipped : list of str
        Candidates left out (an infeasible program, no head for the local selections) and why.
    W : torch.Tensor, shape (d, d_q)
        The final combined matrix.
    v : torch.Tensor, shape (d,), or None
        The trained head, with ``train_head=True`` (the candidates are the SVMs of its optimal tokens).
    converged : bool
        Whether the run converged in direction (see :func:`explain`).
    nearest : str
        The candidate of smallest ``1 - cos`` at the last step, converged or not.
    verdict : str
        ``"closest: <candidate>"`` or ``"not converged in direction: ..."`` with the numbers that decided it.
    """

    table: pd.DataFrame
    trajectory: pd.DataFrame
    closest: str | None
    figure: Any
    skipped: list[str] = field(default_factory=list)
    W: torch.Tensor | None = None
    converged: bool = True
    nearest: str = ""
    verdict: str = ""
    v: torch.Tensor | None = None


def _candidates(
    data: TokenSelectionData,
    norms: tuple[float, ...],
    max_selections: int,
    solver: str | None,
    sets: torch.Tensor | None,
    linear: bool,
):
    """``{name: AttentionSVMResult or SetProgramResult}`` of every feasible candidate, and the reasons for the ones
    left out; refuses data on which none is feasible. ``norms``: the l_p exponents of the optimizer's family; ``sets``:
    token sets (multi-token §3.1 adds their direction programs); ``linear``: training uses the data's linear head (the
    one-token selections of the head exist only then)."""
    plain = data if sets is None else data.with_(select=None)  # the one-token programs' data
    one_token = linear or (data.select is not None and data.select.dim() == 1)
    square = data.d_q == data.d
    programs = {}
    if sets is not None:
        programs["sets-fro"] = lambda: set_direction_svm(data, sets, "fro", solver)  # multi-token §3.1
        programs["sets-nuc"] = lambda: set_direction_svm(data, sets, "nuc", solver)  # multi-token §3.1
    if one_token:
        programs["fro"] = lambda: attention_svm(plain, "fro", solver=solver)  # implicit-bias-ngd §5
        programs["nuc"] = lambda: attention_svm(plain, "nuc", solver=solver)  # kq-nuclear-norm §4 (W*-SVM)
        if square:
            programs["l1-diag"] = lambda: diagonal_svm(plain, 1.0, solver=solver)  # kq-nuclear-norm §4 (l1-SVM)
            programs["l2-diag"] = lambda: diagonal_svm(plain, 2.0, solver=solver)  # kq §7.2 (beta trained directly)
        for p in norms:  # md §5, steepest-descent §2: the SVM of the optimizer's own norm
            programs[f"l{p:g}"] = lambda norm=("fro" if p == 2.0 else p): attention_svm(plain, norm, solver=solver)
    found, skipped = {}, []
    if not square:
        skipped.append("l1-diag, l2-diag: a diagonal W is square, the data are cross-attention (d_q != d)")
    for name, solve in programs.items():
        try:
            found[name] = solve()
        except InfeasibleProgramError as err:
            skipped.append(f"{name}: infeasible ({str(err).split(';')[0]})")
        except ValidationError as err:  # an exponent the l_p program cannot solve (p too close to 1, or above 100)
            skipped.append(f"{name}: {err}")
    if not linear or data.v is None:
        skipped.append("locally optimal selections: training has no linear head v")
    else:
        default = tuple(found["fro"].select.tolist()) if "fro" in found else None
        for report in locally_optimal_selections(plain, "fro", max_candidates=max_selections, solver=solver):
            select = tuple(report.select.tolist())
            if select != default:
                found["fro[" + ",".join(map(str, select)) + "]"] = report.svm  # mirror-descent-lp §5 Def. 3
    if not found:
        raise ValidationError(
            f"no candidate SVM is feasible on this data ({'; '.join(skipped)}); the selected tokens "
            "cannot be separated, check attnlab.svm.is_separable(data)"
        )
    return found, skipped


def _selection_label(svm: Any) -> str:
    """The selection of a candidate: ``"0,2,1"`` for one token per sequence, ``"{0,1};{2}"`` for token sets."""
    if isinstance(svm, SetProgramResult):
        return ";".join("{" + ",".join(map(str, torch.nonzero(row).flatten().tolist())) + "}" for row in svm.sets)
    return ",".join(map(str, svm.select.tolist()))


def _attended(
    data: TokenSelectionData, W: torch.Tensor, svms: dict[str, Any], skipped: list[str], solver: str | None
) -> str | None:
    """Add the Frobenius SVM of the tokens ``W`` attends to (largest logit per sequence) to ``svms`` unless one of its
    Frobenius candidates already has that selection; return the candidate's name (None when infeasible)."""
    attended = attended_tokens(data.X, data.Z, W)  # (n,): the model's own selection
    label = ",".join(map(str, attended.tolist()))
    for name, svm in svms.items():
        if (name == "fro" or name.startswith("fro[")) and torch.equal(svm.select, attended):  # one-token SVMs
            return name
    try:
        svms[f"fro[{label}]"] = attention_svm(data, "fro", select=Selection(tokens=attended), solver=solver)
    except InfeasibleProgramError as err:
        skipped.append(f"fro[{label}] (the attended selection): infeasible ({str(err).split(';')[0]})")
        return None
    return f"fro[{label}]"


def _initial(param: str, d: int, d_q: int, d_e: int, init_scale: float, seed: int) -> dict[str, torch.Tensor]:
    """Initial parameters of the one run: small Gaussian ``W`` (``(d, d_q)``) or ``(K, Q)`` (``(d, d_e)``,
    ``(d_q, d_e)``); for the diagonal the kq-nuclear-norm initialisation (5), ``xi_k = sqrt(2) init_scale``,
    ``xi_q = 0``."""
    gen = torch.Generator().manual_seed(seed)

    def gaussian(*shape: int) -> torch.Tensor:
        return init_scale * torch.randn(*shape, generator=gen, dtype=torch.float64)

    if param == "W":
        return {"W0": gaussian(d, d_q)}
    if param == "KQ":
        return {"K0": gaussian(d, d_e), "Q0": gaussian(d_q, d_e)}
    ones = torch.ones(d, dtype=torch.float64)
    return {"xi_k0": math.sqrt(2.0) * init_scale * ones, "xi_q0": torch.zeros_like(ones)}  # spec kq §3.1 (5)


@registry.documented
def explain(
    data: TokenSelectionData,
    param: str = "W",
    opt: str | OptimizerSpec = "ngd",
    steps: int = 1000,
    lr: float | None = None,
    *,
    loss: str = "exp",
    record_every: int | None = None,
    init_scale: float = 0.01,
    d_e: int | None = None,
    seed: int = 0,
    max_selections: int = 16,
    solver: str | None = None,
    direction_tol: float = 1e-2,
    select: object = None,
    head: Head | torch.nn.Module | None = None,
    train_head: bool = False,
) -> Explanation:
    """Train ``param`` with ``opt`` on ``data`` and rank every candidate SVM by its distance to the final direction.

    Spec: implicit-bias-ngd §5, §8.3; kq-nuclear-norm §4, §7; mirror-descent-lp §5, §8.

    Parameters
    ----------
    data : TokenSelectionData
        With a head ``v`` (the head is fixed during training) unless ``head`` is given. Queries ``Z (n, d_q)`` of
        another width than the tokens are cross-attention: ``W`` is ``(d, d_q)`` (multi-token §8).
    param : {"W", "KQ", "diag"}, default="W"
        Combined ``W``, factored ``W = K Q^T`` (``K (d, d_e)``, ``Q (d_q, d_e)``), or diagonal
        ``W = diag(xi_k * xi_q)`` (square data only).
    opt : str or OptimizerSpec, default="ngd"
        An optimizer of the one grammar (:mod:`attnlab.optim.spec`) that :func:`attnlab.training.batched.train`
        runs, e.g. ``"ngd:momentum=0.9"``, ``"polyak:max_step=5"``, ``"md:1.5"`` (l_p mirror descent: adds the l_p
        SVM and the Bregman divergence), ``"sign:schedule=inv_sqrt"`` (adds the l_inf, l_8 and l_4 SVMs). The names
        of the registry (:mod:`attnlab.optim.registry`):

        .. optimizers::
    steps : int, default=1000
    lr : float, optional
        Step size, when the string sets none (default 0.1); Polyak takes none (write ``"polyak:max_step=..."``).
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
    direction_tol : float, default=1e-2
        Largest ``1 - cos`` between the final direction and the nearest candidate, and largest change of the
        direction over the last tenth of the steps, for the run to count as converged in direction (ours).
    select : token sets or array-like of int of shape (n,), optional
        Default ``data.select``. Token sets (an ``(n, T)`` bool mask or ``n`` lists of indices; multi-token §2)
        add the candidates ``sets-fro`` and ``sets-nuc`` (the direction program, :func:`~attnlab.svm.
        set_direction_svm`) and ``equivalence`` (``W_fin + R W_dir`` fitted to the trained ``W``,
        :func:`~attnlab.svm.multi_token.svm_equivalence`, Frobenius). One token per sequence sets the selection of
        the one-token candidates.
    head : Head or torch.nn.Module, optional
        A fixed nonlinear head to train with in place of ``data.v`` (e.g.
        :class:`~attnlab.models.ReluHead`; multi-token §1). The one-token candidates then need ``data.select``
        (or ``select``) of shape ``(n,)``; the locally optimal selections are left out (they are a linear head's).
    train_head : bool, default=False
        Train the linear head ``v`` together with the attention (implicit-bias-ngd §8.11), from ``data.v`` or,
        when the data have none, from ``v = 0``. The candidates are then those of the trained head: the SVMs
        of its optimal tokens, its locally optimal selections and the attended selection.

    Returns
    -------
    Explanation

    Raises
    ------
    ValidationError
        On a bad ``param``, ``opt``, ``loss``, ``select`` or size, data without a head (and no ``head``), a
        ``head`` without a selection (``select`` or ``data.select``),
        ``param="diag"`` on cross-attention data, token sets that are each their whole sequence (no margin for the
        ``equivalence`` candidate; refused before training), when no candidate is feasible, when
        training diverged (non-finite loss), or when the gradient is zero throughout (every token ties). The
        training loop itself never raises on divergence (its one policy, :mod:`attnlab.training.loop`, marks the
        run ``"diverged"``); this function reads that status and raises, since it names no SVM for such a run.

    Notes
    -----
    Distances: ``1 - cos(W_K, W_c)`` (Frobenius inner product) for every optimizer, and for ``md:<p>`` also the
    directional Bregman divergence ``dB_p(W_c, W_K)`` (mirror-descent-lp §3). The closest candidate is the one of
    smallest ``1 - cos``, named only when the run converged in direction (``direction_tol``); else ``closest`` is
    None, ``converged`` False and ``verdict`` says why.
    """
    if not isinstance(data, TokenSelectionData):
        raise ValidationError(f"data must be a TokenSelectionData, got {type(data).__name__}")
    train_head = check_bool("train_head", train_head)
    linear = head is None
    data, training_head, sets = _training_data(data, select, head, train_head)
    check_in("param", param, PARAMETRIZATIONS)
    if param == "diag" and data.d_q != data.d:
        raise ValidationError(
            f"param='diag' trains a square diagonal W, but the queries have width d_q = {data.d_q} and the tokens "
            f"d = {data.d} (cross-attention); use param='W' or 'KQ'"
        )
    spec = OptimizerSpec.parse(opt)
    p = None if spec.entry.potential is None else spec.entry.potential(dict(spec.options))  # the mirror map's p
    family = () if spec.entry.family is None else spec.entry.family(dict(spec.options))  # its own norms' SVMs
    check_in("loss", loss, LOSSES)
    steps = check_scalar("steps", steps, kind=int, low=1)
    check_scalar("direction_tol", direction_tol, low=0.0, low_inclusive=False)
    if lr is not None:
        check_scalar("lr", lr, low=0.0, low_inclusive=False)
    check_scalar("init_scale", init_scale, low=0.0, low_inclusive=False)
    seed = check_seed("seed", seed)
    max_selections = check_scalar("max_selections", max_selections, kind=int, low=1)  # named as the caller wrote it
    record_every = max(1, steps // 100) if record_every is None else record_every
    record_every = check_scalar("record_every", record_every, kind=int, low=1)
    d_e = data.d if d_e is None else d_e
    d_e = check_scalar("d_e", d_e, kind=int, low=1)

    if linear and not train_head:
        _refuse_ties(data)
    if not train_head:  # a trained head's candidates exist only after training
        svms, skipped = _candidates(data, family, max_selections, solver, sets, linear)
    init = _initial(param, data.d, data.d_q, d_e, init_scale, seed)
    run = _train(data, training_head, init, param, spec, lr, loss, steps, record_every, train_head)
    if train_head:  # the candidates of the trained head (implicit-bias-ngd §8.11)
        data = data.with_(v=run.params["v"][0])
        svms, skipped = _candidates(data, family, max_selections, solver, sets, linear)
    attended = _attended(data, run.W[0], svms, skipped, solver)
    if sets is not None:
        try:  # multi-token §3.3: W_fin + R W_dir, R fitted to the trained W
            svms["equivalence"] = svm_equivalence(data, run.W[0], sets, "fro", solver=solver)
        except InfeasibleProgramError as err:
            skipped.append(f"equivalence: infeasible ({str(err).split(';')[0]})")
    path = run.iterates["W"][:, 0]  # (S, d, d) at the recorded steps, the rows of run.frame in order
    trajectory = _trajectory(run.frame, path, svms, p)
    table = _table(svms, trajectory[trajectory["step"] == steps].set_index("candidate"), p, attended)
    nearest = str(table.loc[table["one_minus_cos"].idxmin(), "candidate"])
    converged, verdict = _verdict(table, path, run.iterates["step"], nearest, direction_tol)
    closest = nearest if converged else None
    table["closest"] = table["candidate"] == closest
    figure = _figure(trajectory, table, param, str(spec))
    return Explanation(
        table=table,
        trajectory=trajectory,
        closest=closest,
        figure=figure,
        skipped=skipped,
        W=run.W[0],
        converged=converged,
        nearest=nearest,
        verdict=verdict,
        v=run.params["v"][0] if train_head else None,
    )


def _training_data(
    data: TokenSelectionData, select: object, head: Head | torch.nn.Module | None, train_head: bool
) -> tuple[TokenSelectionData, Any, torch.Tensor | None]:
    """The data :func:`explain` trains on (``select`` and a zero head to train stored), the head it trains with, and
    the token sets (``(n, T)``, multi-token §2; None for one token per sequence); refuses a head it cannot use and
    sets with no margin anywhere (before training: the ``equivalence`` candidate would refuse them after it)."""
    linear = head is None
    if train_head and not linear:
        raise ValidationError("train_head=True trains a linear head v; a nonlinear head= is fixed: pass one of them")
    if train_head and data.v is None:
        data = data.with_(v=torch.zeros(data.d, dtype=torch.float64))  # implicit-bias-ngd §8.11: v trained from 0
    training_head = data.require_head() if linear else as_head(head, data.d)  # multi-token §1
    if select is not None:
        data = data.with_(select=select)  # validated there: (n,) tokens or (n, T) sets
    sets = data.select if data.select is not None and data.select.dim() == 2 else None  # multi-token §2
    if sets is not None:  # multi-token §3.3: svm_equivalence's own refusal, made before training, not after it
        refuse_no_margin(sets, "SVM-equivalence")
    if not linear and data.select is None:
        raise ValidationError(
            "head= trains with a fixed nonlinear head, which has no optimal tokens of its own, so explain has no "
            "selection whose SVMs to compare: pass select= (one token per sequence, shape (n,), or token sets, an "
            "(n, T) mask or n lists of indices, e.g. attnlab.data.sets_from_probabilities of a trained softmax) or "
            "store it in data.select (on the command line: --select 0,2,1 or --select-key KEY)"
        )
    return data, training_head, sets


def _refuse_ties(data: TokenSelectionData) -> None:
    """Refuse data whose fixed linear head scores every token of every sequence alike: no gradient, no SVM."""
    gamma = token_scores(data.X, data.y, data.v)
    if bool((gamma.amax(dim=-1) == gamma.amin(dim=-1)).all()):
        raise ValidationError(
            "every token ties in every sequence (the head v gives all tokens one score, e.g. v = 0): the gradient is "
            "zero, training cannot move and no SVM can be named; pass data whose head separates the tokens, or "
            "train the head with train_head=True (--train-head)"
        )


def _train(
    data: TokenSelectionData,
    training_head: Any,
    init: dict[str, torch.Tensor],
    param: str,
    spec: OptimizerSpec,
    lr: float | None,
    loss: str,
    steps: int,
    record_every: int,
    train_head: bool,
) -> Any:
    """The one run of :func:`attnlab.training.batched.train` that keeps its iterates; refuses a diverged run and one
    whose gradient is zero throughout (explain names no SVM for either)."""
    init = dict(init)
    run = batched_train(
        data.X,
        data.Z,
        data.y,
        training_head,
        init.pop("W0", None),
        param=param,
        optimizer=spec,
        lr=lr,
        loss=loss,
        steps=steps,
        record_every=record_every,
        keep_iterates=True,
        train_head=train_head,
        **init,
    )
    if run.status[0] != "completed":  # the loop's status, read: explain's own API refuses a diverged run
        raise ValidationError(
            f"training diverged: the loss became non-finite after step {run.last_step[0]} with opt={str(spec)!r}, "
            f"lr={lr}; no SVM is named for a diverged run. Lower lr (or use ngd or a capped polyak)"
        )
    if not bool((run.frame["grad_norm"] > 0).any()):
        raise ValidationError(
            "the gradient is zero at every recorded step (every token ties: the head v scores all tokens alike, "
            "e.g. v = 0), so training cannot move and no SVM is named; pass data whose head separates the tokens"
        )
    return run


def _trajectory(frame: pd.DataFrame, path: torch.Tensor, svms: dict[str, Any], p: float | None) -> pd.DataFrame:
    """Each candidate's ``1 - cos`` (and Bregman divergence for a mirror map, ``p``) at every recorded iterate of
    ``path`` (``(S, d, d_q)``, the rows of ``frame`` in order), one block of rows per candidate."""
    trajectory = pd.concat(
        [
            frame[["step", "loss", "norm"]].assign(
                candidate=c,
                alignment=cosine(path, svms[c].W).numpy(),  # spec ngd §5: corr(W_t, W_c)
                **({"bregman": directional_bregman(svms[c].W, path, p).numpy()} if p is not None else {}),  # md §3
            )
            for c in svms
        ],
        ignore_index=True,
    )
    trajectory["one_minus_cos"] = 1.0 - trajectory["alignment"]
    return trajectory


def _table(svms: dict[str, Any], final: pd.DataFrame, p: float | None, attended: str | None) -> pd.DataFrame:
    """One row per candidate: its norm, selection, final ``1 - cos`` and Bregman divergence (``final``: the last
    step's rows of the trajectory, indexed by candidate) and whether it is the attended selection's."""
    names = list(svms)
    return pd.DataFrame(
        {
            "candidate": names,
            "norm": [str(getattr(svms[c], "norm", "fro")) for c in names],
            "select": [_selection_label(svms[c].direction if c == "equivalence" else svms[c]) for c in names],
            "one_minus_cos": [float(final.at[c, "one_minus_cos"]) for c in names],
            "bregman": [float(final.at[c, "bregman"]) if p is not None else math.nan for c in names],
            "attended": [c == attended for c in names],
        }
    )


def _verdict(
    table: pd.DataFrame, path: torch.Tensor, steps: torch.Tensor, nearest: str, tol: float
) -> tuple[bool, str]:
    """Whether the run converged in direction, and the sentence that says so.

    Converged: the nearest candidate within ``tol`` (``1 - cos``) and the direction moved by less than ``tol`` over
    the last tenth of the steps (``1 - cos(W_T, W_s)``, ``s`` the last recorded step at or before ``0.9 T``).
    """
    gap = float(table.set_index("candidate").at[nearest, "one_minus_cos"])
    T = int(steps[-1])
    earlier = int(torch.nonzero(steps <= 0.9 * T).flatten()[-1])
    moved = float(1.0 - cosine(path[-1], path[earlier]))  # spec ngd §5: the direction's own change
    if gap <= tol and moved <= tol:
        return True, f"closest: {nearest}"
    reasons = []
    if gap > tol:
        reasons.append(f"the nearest candidate {nearest} is at 1 - cos = {gap:.3g} > direction_tol = {tol:g}")
    if not moved <= tol:
        reasons.append(
            f"the direction moved by 1 - cos = {moved:.3g} > direction_tol = {tol:g} between steps "
            f"{int(steps[earlier])} and {T}"
        )
    return False, (
        "not converged in direction: " + "; ".join(reasons) + ". Train longer (more --steps), or with a step size "
        "that lets the direction settle, before naming a limit"
    )


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
