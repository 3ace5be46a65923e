"""Many independent token-selection runs as one batched tensor program: arrays in, a rule named by a string.

Spec: implicit-bias-ngd §4 (A1 GD, A2 NGD with cap, A3 Polyak, A4 momentum, A6 joint rule), mirror-descent-lp §4
(l_p mirror descent, plain and dual-norm normalised), kq-nuclear-norm §3 (the same rules on (K, Q) and on the
diagonal).

A front door to :func:`attnlab.training.fit`: a sweep over seeds, initialisations, step sizes or data sets is a
leading runs axis ``R`` on every array; step sizes and normalisations are computed per run, so runs never
interact, and a run that diverges stops alone. The rule named here is built from the same transforms as its
:mod:`attnlab.optim` class (``"ngd"`` is :class:`~attnlab.optim.NormalizedGD`, ``"md"`` is
:class:`~attnlab.optim.MirrorDescent`, ...), with the registry's defaults, which are the papers' and can differ from
the class's: ``"md"`` normalises by the dual norm (``MirrorDescent``'s default is plain), and ``"polyak"`` takes a
fixed head's ``L*`` as its infimum (``PolyakStep``'s default is 0). ``OptimizerSpec.build`` makes the class with the
string's defaults.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attnlab._validation import (
    ValidationError,
    check_bool,
    check_device,
    check_in,
    check_labels,
    check_nonzero,
    check_scalar,
    check_select,
    check_shape,
    check_tensor,
)
from attnlab.losses import LOSSES
from attnlab.metrics import as_metrics
from attnlab.models.functional import token_scores
from attnlab.models.heads import AttentionHeads, Head, as_head
from attnlab.optim import registry
from attnlab.optim.spec import OptimizerSpec
from attnlab.optim.transforms import Rule
from attnlab.training.engine import fit
from attnlab.training.recording import Recorder
from attnlab.training.result import TrainingResult
from attnlab.training.spaces import Problem, check_optimal_loss, default_optimal_loss

__all__ = ["Options", "PARAMETRIZATIONS", "parse_options", "train", "train_parsed"]

PARAMETRIZATIONS = ("W", "KQ", "diag")
_INITS = ("K0", "Q0", "xi_k0", "xi_q0")
_COMMON = {
    "record_every",
    "W_ref",
    "refs",
    "select",
    "bregman_p",
    "progress",
    "callbacks",
    "keep_iterates",
    "train_head",
    "device",
    "trainable",
    "metrics",
}


def _runs_tensor(name: str, value: Any, axes: str, R: int | None, sizes: dict[str, int]) -> torch.Tensor:
    """A tensor with axes ``axes`` or ``"R" + axes``; broadcast to R runs if given without the runs axis."""
    t = check_tensor(name, value)
    if t.dim() == len(axes):
        check_shape(name, t, axes, sizes)
        return t if R is None else t.expand((R,) + tuple(t.shape))
    if t.dim() == len(axes) + 1:
        sizes_r = dict(sizes, R=R) if R is not None else dict(sizes)
        check_shape(name, t, "R" + axes, sizes_r)
        sizes.update({k: v for k, v in sizes_r.items() if k != "R"})
        return t
    raise ValidationError(f"{name} has shape {tuple(t.shape)}, expected ({', '.join(axes)}) or (R, {', '.join(axes)})")


@registry.documented
def train(
    X: Any,
    Z: Any,
    y: Any,
    v: Any,
    W0: Any = None,
    param: str = "W",
    optimizer: str | OptimizerSpec | Rule = "ngd",
    lr: float | Any | None = None,
    loss: str = "exp",
    steps: int = 1000,
    **options: Any,
) -> TrainingResult:
    """Train R independent runs of token-selection attention at once.

    Parameters
    ----------
    X : array-like, shape ([R,] n, T, d)
        ``T >= 2``. Every array is copied to float64 (float32 and integer input is converted).
    Z : array-like, shape ([R,] n, d_q)
        Query tokens; ``d_q != d`` is cross-attention (multi-token §8), for ``param="W"`` and ``"KQ"``.
    y : array-like, shape ([R,] n)
        Labels in {-1, +1}.
    v : array-like of shape ([R,] d), Head or torch.nn.Module
        The head: fixed, or the initial head with ``train_head=True``; or a fixed nonlinear head
        (:class:`~attnlab.models.heads.ReluHead`, any module mapping ``(..., d)`` to ``(...)``, its parameters
        converted to float64 in place as the models' are; multi-token §1).
    W0 : array-like, shape ([R,] d, d_q), optional
        Initial combined matrix for ``param="W"`` (default zeros); refused for the other parametrisations. For a sum
        of heads (``v`` a :class:`~attnlab.models.SummedHeads`, multi-token §9) the heads side by side, shape
        ``([R,] d, H d_q)``.
    param : {"W", "KQ", "diag"}
        Combined matrix; separate key and query ``K0`` of shape ``([R,] d, d_e)`` and ``Q0`` of shape
        ``([R,] d_q, d_e)`` (options, required); diagonal ``xi_k0, xi_q0`` of shape ``([R,] d)`` (options, required).
    optimizer : str, OptimizerSpec or Rule
        An optimizer string of the one grammar (:mod:`attnlab.optim.spec`: ``"ngd"``, ``"ngd:momentum=0.9"``,
        ``"polyak:max_step=5"``, ``"md:1.5"``, ``"sign:schedule=inv_sqrt"``), its parsed spec (options a string
        cannot hold, such as a per-run ``optimal_loss`` of shape (R,), go in with
        :meth:`~attnlab.optim.OptimizerSpec.with_options`), or a rule of your own transforms
        (:mod:`attnlab.optim.transforms`). Polyak's ``optimal_loss`` defaults to ``"infimum"``, the fixed head's
        ``L*`` with ``L - L*`` read from the margins, exact at every norm (0 with ``train_head``: the ``L*`` of the
        initial head bounds nothing once the head moves); in the engine
        ``ngd``'s ``normalization`` is ``global`` or ``tensor`` (K and Q together or apart) and mirror descent
        normalises each tensor by its own dual norm. The names of the registry
        (:mod:`attnlab.optim.registry`):

        .. optimizers::
    lr : float or array-like of shape (R,), optional
        Step size, per run if an array; default the string's, else 0.1. Polyak refuses it (its step is
        ``(L - L*)/||g||^2``).
    loss : {"exp", "logistic"}
        ``"exp"``: ``l(z) = e^{-z}`` of the margin ``z = y f``; ``"logistic"``: ``log(1 + e^{-z})``.
    steps : int
        Number of update steps (0: only the initial point is recorded).
    **options
        Initial parameters, and: ``record_every`` (int), ``W_ref`` (``([R,] d, d_q)``: adds
        ``alignment`` and, with ``bregman_p``, ``bregman``), ``refs`` (mapping name -> ``([R,] d, d_q)``: adds
        ``alignment_<name>`` for each, in one pass), ``select`` (``([R,] n)`` token indices, adds ``opt_softmax``
        and ``margin``; default the optimal tokens), ``keep_iterates`` (bool), ``train_head`` (bool), ``trainable`` (dict of tensor name to
        ``False`` or a boolean mask of the tensor's shape: those entries stay fixed, e.g. ``{"Q": False}``),
        ``metrics`` (functions of the state, :class:`attnlab.metrics.Metric`: one column each),
        ``callbacks`` (see :mod:`attnlab.training.callbacks`), ``progress`` (bool; default a bar only on a terminal),
        ``device`` (default that of ``X``; ``"cuda"`` when asked for and present).

    Returns
    -------
    TrainingResult
        ``frame`` (``run, step, loss, log_loss, grad_norm, norm`` and, when asked, ``alignment`` or
        ``alignment_<name>``, ``opt_softmax``, ``margin``, ``bregman``; the first and last steps unless
        ``record_every`` is given), ``status`` (per run ``"completed"``, ``"diverged"``: stopped alone at a
        non-finite loss, or ``"stopped"``: a callback) and ``last_step`` per run, ``params`` (the final tensors of
        the parametrisation: ``W``; ``K, Q``; ``xi_k, xi_q``; and ``v`` with a trained head), ``W`` (the final
        combined matrices, shape (R, d, d): a diverged run's last finite iterate), ``iterates`` (with
        ``keep_iterates=True``: ``"step"`` (S,), ``"W"`` (S, R, d, d) and each parameter at the recorded steps).

    Raises
    ------
    ValidationError
        On bad shapes, an unknown option or one the rule cannot use (the message lists the valid ones), ``lr``
        for Polyak, ``lr <= 0`` or boolean, ``p < 1.001``, a cap ``<= 0``, momentum outside [0, 1), or non-finite
        initial values. Every argument is checked once, here (:func:`parse_options` for the options);
        :func:`train_parsed` runs already-typed arguments without checking them again.

    Warns
    -----
    DeprecationWarning
        For an option of the optimizer passed as a keyword (``momentum=0.9``): the one spelling is the string
        (``"ngd:momentum=0.9"``) or the spec's ``with_options``; the keyword still works, as before.

    Notes
    -----
    The one divergence policy (:mod:`attnlab.training.loop`): a run whose loss becomes non-finite stops alone; it
    keeps its last iterate with a finite loss, its ``status`` is ``"diverged"``, and the other runs go on.
    """
    check_in("param", param, PARAMETRIZATIONS)
    check_in("loss", loss, LOSSES)
    steps = check_scalar("steps", steps, kind=int, low=0)
    inits = {k: options.pop(k) for k in _INITS if k in options}
    (Xr, Zr, yr, vr), params, sizes = _arrays(X, Z, y, v, W0, param, inits)
    parsed = parse_options(options, optimizer, sizes=sizes, params=params, head=vr)
    lr_t = None
    if lr is not None:
        if parsed.rule is not None:
            raise ValidationError("lr sets the step of a named optimizer; a Rule carries its own, drop lr")
        if _booleans(lr):
            raise ValidationError(f"lr == {lr!r} holds booleans, must be a number > 0 or one per run; pass e.g. lr=0.1")
        lr_t = check_tensor("lr", lr).to(Xr.device)
        if lr_t.dim() == 0:
            lr_t = lr_t.expand(sizes["R"]).clone()
        elif lr_t.dim() == 1 and lr_t.shape[0] != sizes["R"]:
            raise ValidationError(
                f"lr has {lr_t.shape[0]} values, one per run, but the arrays and initial tensors hold "
                f"{sizes['R']} run(s); give the runs a leading axis of length {lr_t.shape[0]}, e.g. "
                f"W0=torch.zeros({lr_t.shape[0]}, d, d_q) for one data set, or pass one lr"
            )
        else:
            check_shape("lr", lr_t, "R", {"R": sizes["R"]})
        if bool((lr_t <= 0).any()):
            raise ValidationError(f"lr must be > 0 for every run, got min {float(lr_t.min()):g}")
    return train_parsed(Problem(Xr, Zr, yr, vr, loss), params, parsed, param=param, lr=lr_t, steps=steps)


@dataclass(frozen=True)
class Options:
    """The keyword options of :func:`train`, parsed once by :func:`parse_options`: checked, typed values.

    Attributes
    ----------
    spec, rule : OptimizerSpec or None, Rule or None
        The named optimizer with its rule options, or a rule of the caller's own transforms (one of them is None).
    record_every, refs, select, bregman_p, metrics, keep_iterates, train_head, trainable, callbacks, progress, device
        :func:`train`'s options of these names (``refs`` holds ``W_ref`` as ``""``; ``select`` None records the
        optimal tokens; ``trainable`` holds boolean masks).
    """

    spec: OptimizerSpec | None
    rule: Rule | None
    record_every: int | None = None
    refs: dict[str, torch.Tensor] = field(default_factory=dict)
    select: torch.Tensor | None = None
    bregman_p: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    keep_iterates: bool = False
    train_head: bool = False
    trainable: dict[str, torch.Tensor] = field(default_factory=dict)
    callbacks: tuple = ()
    progress: bool | None = None
    device: torch.device | None = None


def parse_options(
    options: dict[str, Any],
    optimizer: str | OptimizerSpec | Rule,
    *,
    sizes: dict[str, int],
    params: dict[str, torch.Tensor],
    head: Any,
) -> Options:
    """Check the keyword options of :func:`train` once, against the data's sizes, and type them.

    Parameters
    ----------
    options : dict of str to object
        :func:`train`'s keywords past its named arguments and the initial tensors.
    optimizer : str, OptimizerSpec or Rule
        As :func:`train` takes it.
    sizes : dict of str to int
        ``"n"``, ``"T"``, ``"d"``, ``"q"`` (the queries' width), ``"columns"`` (``W``'s) and, when known, ``"R"``.
    params : dict of str to torch.Tensor
        The initial tensors, runs axis first (they bound the masks of ``trainable``).
    head : torch.Tensor, Head or torch.nn.Module
        The data's head (a nonlinear one refuses ``train_head`` and needs Polyak's ``optimal_loss``).

    Returns
    -------
    Options

    Raises
    ------
    ValidationError
        On an unknown option or one the rule cannot use, or a value out of its range or of the wrong shape.
    """
    own_rule = isinstance(optimizer, Rule)
    spec = None if own_rule else OptimizerSpec.parse(optimizer)
    rule_keys = set() if own_rule else set(spec.entry.all_options) - {"lr"}  # the optimizer's options beyond lr
    allowed = rule_keys | _COMMON
    unknown = set(options) - allowed
    if unknown:
        raise ValidationError(
            f"unknown option(s) {sorted(unknown)} for optimizer {str(optimizer if spec is None else spec)!r}; "
            f"valid: {sorted(allowed)}"
        )
    nonlinear = isinstance(head, (Head, torch.nn.Module))
    train_head = check_bool("train_head", options.get("train_head", False))
    if train_head and nonlinear:
        raise ValidationError("train_head=True trains a linear head; a nonlinear head v is fixed: drop train_head")
    if (
        nonlinear
        and spec is not None
        and spec.name == "polyak"
        and spec.get("optimal_loss", options.get("optimal_loss")) is None
    ):
        raise ValidationError(
            "optimizer='polyak' with a nonlinear head needs optimal_loss (L* has no closed form there); pass it"
        )
    rule_options = {k: v for k, v in options.items() if k in rule_keys}
    if rule_options:
        spec = spec.with_options(**rule_options)
        warnings.warn(
            f"batched.train({', '.join(f'{k}=...' for k in rule_options)}) is deprecated: write the options in "
            f"the optimizer string ({str(spec)!r}), or pass parse_optimizer(...).with_options(...) for values "
            "a string cannot hold",
            DeprecationWarning,
            stacklevel=3,
        )
    if spec is not None and "R" in sizes:  # a per-run L* against the runs, before any step
        check_optimal_loss(spec.get("optimal_loss"), sizes["R"])
    record_every, progress, select = options.get("record_every"), options.get("progress"), options.get("select")
    if select is not None and isinstance(head, AttentionHeads) and head.columns(sizes["q"]) != sizes["q"]:
        raise ValidationError(
            f"select adds opt_softmax and margin, which read one head's W (d, d_q), but a {type(head).__name__} "
            "trains several heads side by side in W (d, H d_q); drop select, or record each head with a Metric of your "
            "own (metrics=[Metric(name, fn)], with attnlab.models.head_matrices(state['W'], H) giving the heads)"
        )
    return Options(
        spec=spec,
        rule=optimizer if own_rule else None,
        record_every=None if record_every is None else check_scalar("record_every", record_every, kind=int, low=1),
        refs=_refs(options, sizes),
        select=None if select is None else check_select("select", select, sizes["n"], sizes["T"], runs=sizes.get("R")),
        bregman_p=_bregman_p(options),
        metrics=as_metrics(options.get("metrics")),
        keep_iterates=check_bool("keep_iterates", options.get("keep_iterates", False)),
        train_head=train_head,
        trainable=_trainable(options.get("trainable"), params),
        callbacks=tuple(options.get("callbacks") or ()),
        progress=None if progress is None else check_bool("progress", progress),  # None: a bar only on a terminal
        device=None if options.get("device") is None else _device(options["device"]),
    )


def _booleans(value: object) -> bool:
    """Whether ``value`` is a boolean or an array of them (as numbers they would read as 1 and 0)."""
    if isinstance(value, torch.Tensor):
        return value.dtype == torch.bool
    try:
        return np.asarray(value).dtype == np.bool_
    except (TypeError, ValueError):  # ragged or not numbers: check_tensor says so
        return False


def train_parsed(
    problem: Problem, init: dict[str, torch.Tensor], options: Options, *, param: str, lr: Any, steps: int
) -> TrainingResult:
    """Train runs whose arguments are typed already: what :func:`train` runs after checking its own, checking nothing
    again (a caller that holds checked values, such as the ``batched-train`` sweep task, calls it directly).

    Parameters
    ----------
    problem : Problem
        The runs' data (``X`` (R, n, T, d), ``Z``, ``y``, the head ``v``) and loss, checked where they were built.
    init : dict of str to torch.Tensor
        The initial tensors of ``param`` by name (``W``; ``K``, ``Q``; ``xi_k``, ``xi_q``), runs axis first.
    options : Options
        From :func:`parse_options`.
    param : {"W", "KQ", "diag"}
    lr : torch.Tensor of shape (R,), positive, or None
        Step sizes per run (None: the optimizer's own).
    steps : int

    Returns
    -------
    TrainingResult
        As :func:`train` returns.
    """
    params, opts, R = dict(init), options, problem.X.shape[0]
    if opts.train_head:
        params["v"], problem = problem.v.clone(), problem._replace(v=None)
    if opts.device is not None:
        X, Z, y = (t.to(opts.device) for t in problem[:3])
        v = problem.v if isinstance(problem.v, Head) or problem.v is None else problem.v.to(opts.device)
        problem, params = Problem(X, Z, y, v, problem.loss), {k: t.to(opts.device) for k, t in params.items()}
    rule = opts.rule
    if rule is None:
        head = params["v"] if opts.train_head else problem.v
        rule = opts.spec.rule(list(params), lr=lr, optimal_loss=default_optimal_loss(problem, head, opts.train_head))
    scores = None if isinstance(problem.v, Head) else (params["v"] if opts.train_head else problem.v)
    select = opts.select
    if select is None and scores is not None:
        select = _optimal_tokens(problem, scores, fixed=not opts.train_head)
    recorder = Recorder(
        refs={k: t.to(problem.X.device).expand((R,) + tuple(t.shape[-2:])) for k, t in opts.refs.items()},
        select=None if select is None else select.to(problem.X.device).expand(R, problem.X.shape[-3]),
        bregman_p=opts.bregman_p,
        metrics=opts.metrics,
        keep_iterates=opts.keep_iterates,
    )
    return fit(
        problem,
        param,
        params,
        steps,
        rule,
        record_every=opts.record_every,
        recorder=recorder,
        callbacks=opts.callbacks,
        progress=opts.progress,
        trainable={k: m.to(problem.X.device) for k, m in opts.trainable.items()},
        desc=f"batched {'rule' if opts.spec is None else opts.spec.name}",
    )


def _optimal_tokens(problem: Problem, head: torch.Tensor, fixed: bool) -> torch.Tensor:
    """The optimal tokens ``argmax_t y_i v^T x_it`` per run and sequence (implicit-bias-ngd §1), shape (R, n); a fixed
    head that scores every token of a run 0 selects none and is refused (what the recorded columns read)."""
    scores = token_scores(problem.X, problem.y, head)  # (R, n, T)
    blank = torch.nonzero(~(scores != 0).flatten(1).any(dim=1)).flatten().tolist()
    if fixed and blank:
        raise ValidationError(
            f"every token score y_i v^T x_it of run(s) {blank[:5]} is 0 (the head v is zero or orthogonal to every "
            "token), so no token is optimal; pass select=(n,) token indices or a head v that tells the tokens apart"
        )
    return scores.argmax(dim=-1)


def _arrays(
    X: Any, Z: Any, y: Any, v: Any, W0: Any, param: str, inits: dict[str, Any]
) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any], dict[str, torch.Tensor], dict[str, int]]:
    """``(X, Z, y, v)`` on a runs axis (checked, float64), the initial tensors, and the sizes ``R, n, T, d, q`` and
    ``columns`` (the width of ``W``: ``q``, or ``H q`` for a sum of ``H`` heads)."""
    sizes: dict[str, int] = {}
    R = _infer_runs(W0, inits, param)
    Xr = _runs_tensor("X", X, "ntd", R, sizes)
    R = Xr.shape[0] if R is None and Xr.dim() == 4 else R
    if R is None:
        R = 1
        Xr = Xr.expand((1,) + tuple(Xr.shape))
    if Xr.shape[-3] < 1:
        raise ValidationError("X holds no sequences (n == 0); pass at least one sequence of tokens")
    if Xr.shape[-2] < 2:
        raise ValidationError(
            f"X has {Xr.shape[-2]} entries along axis 'T', needs at least 2: attention selects among T >= 2 tokens"
        )
    Zr = _runs_tensor("Z", Z, "nq", R, sizes)  # multi-token §8: queries of their own width d_q
    if 0 in (Xr.shape[-1], Zr.shape[-1]):
        raise ValidationError(
            f"X has width d = {Xr.shape[-1]} and Z width d_q = {Zr.shape[-1]}: tokens need d, d_q >= 1"
        )
    yr = check_labels("y", _runs_tensor("y", y, "n", R, sizes))
    nonlinear = isinstance(v, (Head, torch.nn.Module))
    vr = as_head(v, sizes["d"]) if nonlinear else _runs_tensor("v", v, "d", R, sizes)
    if nonlinear:
        _check_head_runs(vr, R)
    sizes.update(R=R, n=Xr.shape[-3], T=Xr.shape[-2])
    if param == "diag" and sizes["q"] != sizes["d"]:
        raise ValidationError(
            f"param='diag' needs queries of the tokens' width (W = diag(xi_k * xi_q) is square), but Z has width "
            f"{sizes['q']} and X width {sizes['d']}; use param='W' or 'KQ' for cross-attention"
        )
    for name, t in (("Z", Zr), ("y", yr), *(() if nonlinear else (("v", vr),))):
        check_device(name, t, Xr.device)
    if isinstance(vr, AttentionHeads) and param != "W":
        raise ValidationError(f"a sum of heads trains its heads side by side with param='W', got param={param!r}")
    columns = vr.columns(sizes["q"]) if isinstance(vr, AttentionHeads) else sizes["q"]  # multi-token §9: [W_1, ...]
    params = _initial_params(param, W0, inits, R, sizes["d"], columns)
    for name, t in params.items():
        check_device(f"the initial {name}", t, Xr.device)
    if W0 is not None and param != "W":
        raise ValidationError(f"W0 sets the initial W of param='W'; for param={param!r} pass its initial tensors only")
    return (Xr, Zr, yr, vr), params, {**sizes, "columns": columns}


def _check_head_runs(head: Head, R: int) -> None:
    """Refuse a per-run head (:attr:`Head.runs`: a :class:`ReluHead`'s ``V (R, m, d)``, a :class:`SummedHeads`'
    ``values (R, H, d)``) whose runs axis is not the data's ``R`` runs (from ``X``, else ``W0``, else 1)."""
    if head.runs is not None and head.runs != R:
        raise ValidationError(
            f"the head {head!r} holds its tensors for a runs axis of {head.runs} runs, but the data has R = {R} "
            f"run(s); give the head one set of tensors per run (a leading axis of {R}), one set shared by every run "
            f"(no runs axis), or X (or W0) with a runs axis of {head.runs}"
        )


def _device(value: Any) -> torch.device:
    """A torch device that exists here; CUDA asked for on a machine without it is refused by name."""
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError) as err:
        raise ValidationError(f"device == {value!r} is not a torch device; pass 'cpu' or 'cuda'") from err
    if device.type == "meta":
        raise ValidationError(
            f"device == {value!r} holds shapes without values, so nothing can train there; pass 'cpu' or 'cuda'"
        )
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValidationError(f"device == {value!r}, but CUDA is not available on this machine; pass device='cpu'")
    return device


def _refs(options: dict[str, Any], sizes: dict[str, int]) -> dict[str, torch.Tensor]:
    """``W_ref`` (as ``""``) and the named ``refs``, each ``([R,] d, d_q)`` (the runs axis as given)."""
    shape = {"d": sizes["d"], "q": sizes["columns"], **({"R": sizes["R"]} if "R" in sizes else {})}
    refs = {}
    if options.get("W_ref") is not None:
        refs[""] = _ref("W_ref", options["W_ref"], shape)
    for name, ref in (options.get("refs") or {}).items():
        refs[str(name)] = _ref(f"refs[{name!r}]", ref, shape)
    for name, ref in refs.items():
        check_nonzero(f"refs[{name!r}]" if name else "W_ref", ref, 2)
    return refs


def _ref(name: str, value: Any, sizes: dict[str, int]) -> torch.Tensor:
    t = check_tensor(name, value)
    check_shape(name, t, "dq" if t.dim() == 2 else "Rdq", dict(sizes))
    return t


def _bregman_p(options: dict[str, Any]) -> float | None:
    """The exponent ``p > 1`` of the ``bregman`` columns (mirror-descent-lp §3), which need ``W_ref`` or ``refs``."""
    p = options.get("bregman_p")
    if p is None:
        return None
    p = float(check_scalar("bregman_p", p, low=1.0, low_inclusive=False))  # finite: the l_p potential
    if options.get("W_ref") is None and not options.get("refs"):
        raise ValidationError(
            "bregman_p adds the Bregman divergence to the references' directions, but no W_ref or refs was given; "
            "pass W_ref=..."
        )
    return p


def _trainable(value: Any, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Masks of the entries that move, by tensor name: ``False`` (or a boolean array of the tensor's shape, with or
    without the runs axis) freezes; names not given are trained in full."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(
            f"trainable must be a dict of tensor name to bool or boolean mask (e.g. {{'Q': False}}), got {value!r}"
        )
    unknown = sorted(set(value) - set(params))
    if unknown:
        raise ValidationError(f"trainable names {unknown} are not tensors of this run; valid: {sorted(params)}")
    masks = {}
    for name, mask in value.items():
        shape = tuple(params[name].shape)
        if isinstance(mask, (bool, np.bool_)):
            masks[name] = torch.tensor(bool(mask))
            continue
        m = np.asarray(mask.cpu() if isinstance(mask, torch.Tensor) else mask)
        if m.dtype != np.bool_ or tuple(m.shape) not in (shape, shape[1:]):
            raise ValidationError(
                f"trainable[{name!r}] must be a bool or a boolean mask of shape {shape[1:]} or {shape}, got "
                f"{m.dtype} of shape {tuple(m.shape)}"
            )
        masks[name] = torch.as_tensor(m)
    if all(not bool(m.any()) for m in masks.values()) and set(masks) == set(params):
        raise ValidationError("trainable freezes every tensor; nothing would move. Leave at least one trainable")
    return masks


def _infer_runs(W0: Any, inits: dict[str, Any], param: str) -> int | None:
    name = {"W": "W0", "KQ": "K0", "diag": "xi_k0"}[param]
    first = {"W": W0, "KQ": inits.get("K0"), "diag": inits.get("xi_k0")}[param]
    if first is None:
        return None
    if isinstance(first, str):
        raise ValidationError(f"{name} == {first!r} is a string; pass an array of the initial values (W0=None: zeros)")
    # only its shape is read here (a tensor's or an array's without a copy); _initial_params validates the values
    shape = first.shape if isinstance(first, (torch.Tensor, np.ndarray)) else check_tensor(name, first).shape
    expected = 2 if param != "diag" else 1
    return int(shape[0]) if len(shape) == expected + 1 else None


def _initial_params(param: str, W0: Any, inits: dict[str, Any], R: int, d: int, d_q: int) -> dict[str, torch.Tensor]:
    if param == "W":
        if W0 is None:
            return {"W": torch.zeros(R, d, d_q, dtype=torch.float64)}
        return {"W": _runs_tensor("W0", W0, "dq", R, {"d": d, "q": d_q}).contiguous()}  # a copy, expanded runs laid out
    names = ("K0", "Q0") if param == "KQ" else ("xi_k0", "xi_q0")
    missing = [k for k in names if inits.get(k) is None]
    if missing:
        raise ValidationError(f"param={param!r} needs initial values {list(names)}; missing {missing}")
    axes = ("de", "qe") if param == "KQ" else ("d", "d")  # K (d, d_e), Q (d_q, d_e): W = K Q^T is (d, d_q)
    sizes = {"d": d, "q": d_q}
    return {k[:-1]: _runs_tensor(k, inits[k], a, R, sizes).contiguous() for k, a in zip(names, axes)}
