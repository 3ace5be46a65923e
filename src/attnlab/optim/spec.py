"""One grammar for naming an optimizer in a string, parsed once into an :class:`OptimizerSpec`.

Spec: implicit-bias-ngd §4 (A1 GD, A2/A4/A7 NGD with cap and momentum, A3/A8 Polyak and SPS, A6 joint rule) and
§9 (SGD, SNGD, SPS, Adam on real data), mirror-descent-lp §4 (l_p mirror descent).

A spec reads ``name[:p][,key=value...]``::

    "ngd"                          normalised GD, lr 0.1
    "ngd:momentum=0.9,max_step=5"  with momentum and a cap on the step size
    "polyak:max_step=5"            the Polyak step, capped
    "md:1.5"                       l_p mirror descent with p = 1.5 (p is the one positional argument)
    "md:3,normalized=false,lr=0.01"
    "sign"                         sign descent (steepest descent in l_inf), lr 0.1
    "sd:1.5"                       normalised steepest descent in l_1.5 (p positional, inf allowed)
    "adam-noeps:beta1=0"           Adam without epsilon in the log domain (beta1 = 0: RMSProp-style)

Names and their options (every rule but Polyak also takes ``lr``, default :data:`DEFAULT_LR`):

========== =======================================================================================================
gd         ``momentum`` (A1, A4)
ngd        ``max_step``, ``momentum``, ``momentum_variant``, ``normalization`` (A2, A4, A7)
polyak     ``max_step``, ``optimal_loss`` (a number, or ``infimum``: ``L - L_*`` from the margins), ``c``; no ``lr``
           (A3, A8)
md         ``p`` (default 2, or positional), ``normalized`` (default true), ``eps`` (mirror-descent-lp §4)
joint      ``alpha``, ``normalizer``, ``head_lr`` (A6)
sd         ``p`` (positional, ``1 < p <= inf``; default 2): ``-lr`` times the unit-l_p steepest-descent direction
adam-noeps ``beta1`` (default 0.9), ``beta2`` (default 0.999): Adam with ``epsilon = 0``, log-domain buffers
adam       ``torch.optim.Adam`` (real-data baselines; no engine rule)
========== =======================================================================================================

The paper's names ``sgd``, ``sngd`` (NGD on mini-batches) and ``sps`` (Polyak with ``c = 0.5`` and
``optimal_loss = 0``, spec A8) are aliases, and so is ``sign`` (``sd:inf``).
``sd`` and ``adam-noeps`` run in the engine (:func:`attnlab.train`, :func:`attnlab.training.batched.train`, sweeps) on the
gradient's mantissa, so their directions stay exact after the true gradient underflows, and build the
``torch.optim`` classes :class:`~attnlab.optim.SteepestDescent` and :class:`~attnlab.optim.AdamNoEps`; ``adam`` stays
``torch.optim.Adam`` (with its epsilon), as the real-data experiments use it. The cap is ``max_step`` everywhere. Retired spellings still parse, with
a :class:`DeprecationWarning` naming the new one: ``max_lr=`` (now ``max_step=``) and ``"md-<p>"`` (the real-data
experiments' unnormalised mirror descent, now ``"md:<p>,normalized=false"``).

A spec turns into a rule of the training engine (:meth:`OptimizerSpec.rule`, what :func:`attnlab.training.fit`
runs) or into a ``torch.optim.Optimizer`` (:meth:`OptimizerSpec.build`); both are made of the same transforms.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar, check_tensor
from attnlab.optim import transforms as tx
from attnlab.optim.adam_noeps import AdamNoEps, adam_noeps_rule
from attnlab.optim.joint_adaptive import NORMALIZERS, JointAdaptive, joint_rule
from attnlab.optim.mirror_descent import FLOAT64_EPS, MirrorDescent, md_rule
from attnlab.optim.normalized_gd import MOMENTUM_VARIANTS, NORMALIZATIONS, NormalizedGD, ngd_rule
from attnlab.optim.polyak import PolyakStep, polyak_rule
from attnlab.optim.steepest_descent import SteepestDescent, sd_rule

__all__ = ["DEFAULT_LR", "NAMES", "OPTIONS", "RULES", "OptimizerSpec", "named_rule", "parse_optimizer"]

DEFAULT_LR = 0.1
#: Every name and the options it takes.
NAMES: dict[str, tuple[str, ...]] = {
    "gd": ("lr", "momentum"),
    "ngd": ("lr", "max_step", "momentum", "momentum_variant", "normalization"),
    "polyak": ("max_step", "optimal_loss", "c"),
    "md": ("lr", "p", "normalized", "eps"),
    "joint": ("lr", "alpha", "normalizer", "head_lr"),
    "sd": ("lr", "p"),
    "adam-noeps": ("lr", "beta1", "beta2"),
    "adam": ("lr",),
}
#: The names the training engine runs as a rule (``adam`` runs as a torch optimizer only).
RULES = ("gd", "ngd", "polyak", "md", "joint", "sd", "adam-noeps")
#: Options of each rule beyond ``lr``: what :func:`attnlab.training.batched.train` takes as keywords.
OPTIONS: dict[str, set[str]] = {name: set(NAMES[name]) - {"lr"} for name in RULES}
_ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "sgd": ("gd", {}),
    "sngd": ("ngd", {}),  # spec A8: NGD on mini-batches, one global norm
    "sps": ("polyak", {"c": 0.5, "optimal_loss": 0.0}),  # spec A8: SPS_max, L_B* = 0 for cross-entropy
    "sign": ("sd", {"p": math.inf}),  # steepest descent in l_inf
}
_POSITIONAL = {"md": "p", "sd": "p"}
_RETIRED_OPTIONS = {"max_lr": "max_step"}
_FORMS = (
    'name[:p][,key=value...] with name one of "gd", "ngd", "polyak", "md", "joint", "sd", "adam-noeps", "adam" '
    '(aliases "sgd", "sngd", "sps", "sign"), e.g. "ngd:momentum=0.9", "polyak:max_step=5", "md:1.5", "sd:inf"'
)


def _positive(name: str, value: Any) -> float:
    return float(check_scalar(name, value, low=0.0, low_inclusive=False))


def _cap(name: str, value: Any) -> float | None:
    return None if value is None else float(check_scalar(name, value, low=0.0, low_inclusive=False, allow_inf=True))


_CHECKS = {
    "lr": _positive,
    "momentum": lambda k, v: float(check_scalar(k, v, low=0.0, high=1.0, high_inclusive=False)),
    "max_step": _cap,
    "momentum_variant": lambda k, v: check_in(k, v, MOMENTUM_VARIANTS),
    "normalization": lambda k, v: check_in(k, v, NORMALIZATIONS),
    "optimal_loss": lambda k, v: None if v is None else _optimal_loss(v),
    "c": _positive,
    "p": lambda k, v: float(check_scalar(k, v, low=1.0, low_inclusive=False, allow_inf=True)),
    "beta1": lambda k, v: float(check_scalar(k, v, low=0.0, high=1.0, high_inclusive=False)),
    "beta2": lambda k, v: float(check_scalar(k, v, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)),
    "normalized": lambda k, v: check_bool(k, v),
    "eps": lambda k, v: float(check_scalar(k, v, low=0.0)),
    "alpha": lambda k, v: float(check_scalar(k, v, low=0.0)),
    "normalizer": lambda k, v: check_in(k, v, NORMALIZERS),
    "head_lr": _positive,
}


@dataclass(frozen=True)
class OptimizerSpec:
    """A parsed optimizer name: the canonical name and the options written (defaults are applied when built).

    Attributes
    ----------
    name : {"gd", "ngd", "polyak", "md", "joint", "sd", "adam-noeps", "adam"}
    options : tuple of (str, value) pairs
        The options given, checked, sorted by key.

    Examples
    --------
    >>> spec = OptimizerSpec.parse("ngd:momentum=0.9")
    >>> spec.name, spec.get("momentum"), spec.get("max_step")
    ('ngd', 0.9, None)
    >>> str(OptimizerSpec.parse("sps"))
    'polyak:c=0.5,optimal_loss=0.0'
    """

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, text: str | OptimizerSpec) -> OptimizerSpec:
        """Parse ``text`` (a spec passes through).

        Parameters
        ----------
        text : str or OptimizerSpec
            An optimizer string of the grammar (``"ngd:momentum=0.9"``, ``"md:1.5"``), or a parsed spec.

        Returns
        -------
        OptimizerSpec
            The canonical name and the options written, checked and sorted by key.

        Raises
        ------
        ValidationError
            Naming the bad part and listing what is accepted.
        """
        if isinstance(text, OptimizerSpec):
            return text
        if not isinstance(text, str):
            raise ValidationError(f"optimizer must be a string such as 'ngd', got {text!r}; the form is {_FORMS}")
        head, _, tail = text.strip().partition(":")
        name = head.strip().lower()
        options: dict[str, Any] = {}
        retired = re.fullmatch(r"md-(.+)", name)
        if retired:
            warnings.warn(
                f"optimizer {text!r}: the spelling 'md-<p>' is deprecated; write 'md:{retired.group(1)},normalized=false'",
                DeprecationWarning,
                stacklevel=2,
            )
            name, options = "md", {"p": _value(retired.group(1)), "normalized": False}
        name, implied = _ALIASES.get(name, (name, {}))
        if name not in NAMES:
            raise ValidationError(f"optimizer {text!r}: unknown name {head!r}; the form is {_FORMS}")
        options = {**implied, **options}
        parts = [p.strip() for p in tail.split(",")] if tail.strip() else []
        written: set[str] = set()
        for index, part in enumerate(parts):
            key, eq, raw = part.partition("=")
            key = key.strip()
            if not eq:
                if index > 0 or name not in _POSITIONAL:
                    raise ValidationError(
                        f"optimizer {text!r}: {part!r} is not key=value; only md and sd take a positional argument "
                        f"(p, as in 'md:1.5' or 'sd:inf')"
                    )
                key, raw = _POSITIONAL[name], part
            if key in written:
                raise ValidationError(f"optimizer {text!r}: {key} is given twice; give each option once")
            written.add(key)
            options[key] = _value(raw)
        return cls(name)._with(options, text)

    def get(self, key: str, default: Any = None) -> Any:
        """The option ``key`` as written, else ``default``.

        Parameters
        ----------
        key : str
            An option name (``"momentum"``, ``"max_step"``, ...).
        default : optional
            What to return when the string does not set ``key``.

        Returns
        -------
        Any
            The option's checked value, or ``default``.
        """
        return dict(self.options).get(key, default)

    def with_options(self, **options: Any) -> OptimizerSpec:
        """A spec with ``options`` added (checked as if written in the string); an option given twice is refused.

        Parameters
        ----------
        **options
            Options of this optimizer by name, as they would be written in the string.

        Returns
        -------
        OptimizerSpec
            A new spec; this one is unchanged.

        Raises
        ------
        ValidationError
            For an option the string sets already, or one the optimizer does not take.
        """
        twice = sorted(k for k in options if k in dict(self.options))
        if twice:
            raise ValidationError(
                f"optimizer {str(self)!r} already sets {twice}; pass each option once, in the string or as a keyword"
            )
        return OptimizerSpec(self.name)._with({**dict(self.options), **options}, str(self))

    def _with(self, options: Mapping[str, Any], text: str) -> OptimizerSpec:
        checked = {}
        for key, value in options.items():
            if key in _RETIRED_OPTIONS:
                new = _RETIRED_OPTIONS[key]
                warnings.warn(
                    f"optimizer {text!r}: the option {key!r} is deprecated; write {new!r}",
                    DeprecationWarning,
                    stacklevel=3,
                )
                key = new
            if key == "lr" and self.name == "polyak":
                raise ValidationError(
                    f"optimizer {text!r}: polyak takes no lr, its step size is (L - L*) / (c ||g||^2); pass max_step to "
                    "cap it, c to scale it, or optimal_loss for L*"
                )
            if key not in NAMES[self.name]:
                raise ValidationError(
                    f"optimizer {text!r}: unknown option {key!r} for {self.name}; {self.name} takes "
                    f"{', '.join(NAMES[self.name])}"
                )
            try:
                checked[key] = _CHECKS[key](key, value)
            except ValidationError as err:
                raise ValidationError(f"optimizer {text!r}: {err}") from None
            if key == "p" and self.name == "md" and checked[key] == math.inf:
                raise ValidationError(
                    f"optimizer {text!r}: p == inf has no l_p mirror map; pass a finite p > 1, or 'sd:inf' (sign "
                    "descent) for steepest descent in l_inf"
                )
        return OptimizerSpec(self.name, tuple(sorted(checked.items())))

    def __str__(self) -> str:
        """The canonical spelling (md's ``p`` positional first, then the other options by key)."""
        positional = _POSITIONAL.get(self.name)
        parts = [_text(v) for k, v in self.options if k == positional]
        parts += [f"{k}={_text(v)}" for k, v in self.options if k != positional]
        return f"{self.name}:{','.join(parts)}" if parts else self.name

    def rule(
        self,
        names: Sequence[str],
        *,
        lr: float | torch.Tensor | None = None,
        optimal_loss: float | torch.Tensor | None = None,
    ) -> tx.Rule:
        """The engine rule for the tensors ``names`` (a parametrisation's, then ``"v"`` when the head trains).

        Parameters
        ----------
        names : sequence of str
            The names of the tensors the rule updates, in the engine's order.
        lr : float or torch.Tensor of shape (R,), optional
            Step size given outside the string (per run); refused when the string sets ``lr`` too.
        optimal_loss : float or torch.Tensor of shape (R,), optional
            Polyak's ``L*`` when the string does not set it (the front doors pass the data's optimal loss).

        Returns
        -------
        Rule
            The engine rule (``attnlab.optim.transforms.Rule``): one chain of transforms per tensor of ``names``.

        Raises
        ------
        ValidationError
            For ``adam`` (no engine rule), ``lr`` given twice or to Polyak, ``normalization="group"`` (the engine has
            no parameter groups), ``head_lr`` without a trained head, or Polyak without an optimal loss.
        """
        n, o = len(names), dict(self.options)
        if self.name == "adam":
            raise ValidationError(
                "optimizer 'adam' has no engine rule; train with attnlab.train(model, 'adam:lr=...', data) or a "
                "torch.optim.Adam, or pick one of " + ", ".join(RULES)
            )
        lr = self._lr(lr)
        if self.name == "polyak":
            target = o.get("optimal_loss", optimal_loss)
            if target is None:
                raise ValidationError(f"optimizer {str(self)!r} needs L*: pass optimal_loss (0 is a lower bound)")
            cap = o.get("max_step")
            return polyak_rule(target, [o.get("c", 1.0)] * n, [math.inf if cap is None else cap] * n)  # spec A3, A8
        if self.name == "gd":
            beta = o.get("momentum", 0.0)
            return tx.Rule(tuple(([tx.momentum(beta)] if beta else []) + [tx.scale_by_lr(lr)]))  # spec A1 (A4)
        if self.name == "ngd":
            normalization = o.get("normalization", "global")
            if normalization == "group":
                raise ValidationError(
                    f"optimizer {str(self)!r}: the engine has no parameter groups; pass normalization=global or tensor"
                )
            hyper = [o.get(k, default) for k, default in _NGD_DEFAULTS]
            return ngd_rule([lr] * n, *([h] * n for h in hyper), blocks=normalization)  # spec A2, A4, A7
        if self.name == "md":
            p, normalized, eps = o.get("p", 2.0), o.get("normalized", True), o.get("eps", FLOAT64_EPS)
            return md_rule([lr] * n, [p] * n, [normalized] * n, [eps] * n)  # spec md §4
        if self.name == "sd":
            return sd_rule(lr, o.get("p", 2.0))  # steepest-descent §1: -lr d, ||d||_p = 1
        if self.name == "adam-noeps":
            return adam_noeps_rule(lr, *(o.get(k, default) for k, default in _ADAM_DEFAULTS))  # steepest-descent §5
        lrs = [lr] * n
        if "head_lr" in o:
            if "v" not in names:
                raise ValidationError("head_lr sets the step of a trained head; pass train_head=True or drop head_lr")
            lrs[list(names).index("v")] = o["head_lr"]
        blocks = ["v" if k == "v" else "W" for k in names]  # the paper's two blocks: the head u and the attention W
        alpha, normalizer = o.get("alpha", 2.0 / 3.0), o.get("normalizer", "loss")
        return joint_rule(lrs, [alpha] * n, [normalizer] * n, [True] * n, blocks)  # spec ngd A6, A7

    def build(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        *,
        lr: float | None = None,
        optimal_loss: float | None = None,
    ) -> torch.optim.Optimizer:
        """The ``torch.optim.Optimizer`` of this spec over ``params`` (same transforms as :meth:`rule`).

        ``gd`` is ``torch.optim.SGD`` (bit for bit the rule's update), ``adam`` ``torch.optim.Adam``, the others the
        classes of :mod:`attnlab.optim`. ``lr`` and ``optimal_loss`` play the same part as in :meth:`rule`;
        Polyak's ``L*`` defaults to 0 here (a lower bound of every loss attnlab trains with).

        Parameters
        ----------
        params : iterable of torch.Tensor or of dict
            The parameters, or parameter groups, as ``torch.optim`` takes them.
        lr : float, optional
            Step size given outside the string; refused when the string sets ``lr`` too.
        optimal_loss : float, optional
            Polyak's ``L*`` when the string does not set it.

        Returns
        -------
        torch.optim.Optimizer
            The optimizer over ``params``.
        """
        o, params = dict(self.options), list(params)
        if self.name == "polyak":
            self._lr(lr)
            target = o.get("optimal_loss", 0.0 if optimal_loss is None else optimal_loss)
            cap = o.get("max_step")
            return PolyakStep(params, max_step=math.inf if cap is None else cap, optimal_loss=target, c=o.get("c", 1.0))
        lr = self._lr(lr)
        if self.name == "gd":
            return torch.optim.SGD(params, lr=lr, momentum=o.get("momentum", 0.0))
        if self.name == "adam":
            return torch.optim.Adam(params, lr=lr)
        if self.name == "ngd":
            hyper = {k: o.get(k, default) for k, default in _NGD_DEFAULTS}
            return NormalizedGD(params, lr=lr, normalization=o.get("normalization", "global"), **hyper)
        if self.name == "sd":
            return SteepestDescent(params, lr=lr, p=o.get("p", 2.0))
        if self.name == "adam-noeps":
            return AdamNoEps(params, lr=lr, **{k: o.get(k, default) for k, default in _ADAM_DEFAULTS})
        if self.name == "md":
            return MirrorDescent(
                params, lr=lr, p=o.get("p", 2.0), normalized=o.get("normalized", True), eps=o.get("eps", FLOAT64_EPS)
            )
        if "head_lr" in o:
            raise ValidationError(
                "head_lr needs the head in its own parameter group; build JointAdaptive with groups and an lr per group"
            )
        return JointAdaptive(params, lr=lr, alpha=o.get("alpha", 2.0 / 3.0), normalizer=o.get("normalizer", "loss"))

    def _lr(self, lr: float | torch.Tensor | None) -> float | torch.Tensor:
        if lr is not None and self.name == "polyak":
            raise ValidationError(
                "optimizer 'polyak' takes no lr: its step size is (L - L*) / (c ||g||^2); pass max_step to cap it, "
                "c to scale it, or optimal_loss for L*"
            )
        if lr is not None and "lr" in dict(self.options):
            raise ValidationError(f"optimizer {str(self)!r} sets lr, and lr is given again; pass it once")
        return dict(self.options).get("lr", DEFAULT_LR) if lr is None else lr


_NGD_DEFAULTS = (("max_step", None), ("momentum", 0.0), ("momentum_variant", "heavy_ball"))
_ADAM_DEFAULTS = (("beta1", 0.9), ("beta2", 0.999))


def _optimal_loss(value: Any) -> float | torch.Tensor | str:
    """Polyak's target ``L*`` as given: a finite number ``>= 0``, one per run (shape (R,)), or ``"infimum"``."""
    if isinstance(value, str) and value == tx.INFIMUM:
        return tx.INFIMUM  # the fixed-head infimum, L - L_* from the margins (engine only)
    target = check_tensor("optimal_loss", value)
    if target.dim() > 1:
        raise ValidationError(f"optimal_loss has shape {tuple(target.shape)}, expected a number or one value per run")
    if not bool(torch.isfinite(target).all()) or bool((target < 0).any()):
        raise ValidationError(
            f"optimal_loss == {value!r}, must be finite and >= 0 (a loss is never negative); leave it out for L*"
        )
    return float(target) if target.dim() == 0 else target


def _value(raw: str) -> Any:
    """An option's value from its text: a bool, None, an int, a float, else the string."""
    text = raw.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) or value is None else str(value)


def parse_optimizer(text: str | OptimizerSpec) -> OptimizerSpec:
    """Parse an optimizer string (see the module docstring); ``OptimizerSpec.parse`` under a verb's name.

    Parameters
    ----------
    text : str or OptimizerSpec
        An optimizer string (``"ngd:momentum=0.9"``, ``"polyak:max_step=5"``, ``"md:1.5"``), or a parsed spec.

    Returns
    -------
    OptimizerSpec
        The canonical name and the options written.

    Examples
    --------
    >>> str(parse_optimizer("md:1.5"))
    'md:1.5'
    """
    return OptimizerSpec.parse(text)


def named_rule(
    optimizer: str | OptimizerSpec,
    lr: float | torch.Tensor | None,
    options: Mapping[str, Any],
    names: list[str],
    l_star: torch.Tensor,
) -> tx.Rule:
    """The engine rule of ``optimizer`` with keyword ``options`` added: ``parse(optimizer).with_options(...).rule``.

    Parameters
    ----------
    optimizer : str or OptimizerSpec
        An optimizer string (``"ngd:momentum=0.9"``) or a parsed spec.
    lr : float or torch.Tensor of shape (R,) or None
        Step size given outside the string (per run); None leaves it to the string or the optimizer's default.
    options : mapping of str to Any
        Options added to those of the string, by name (:meth:`OptimizerSpec.with_options`).
    names : list of str
        The names of the tensors the rule updates, in the engine's order.
    l_star : torch.Tensor of shape (R,)
        Polyak's ``L*`` when the string does not set it (the data's optimal loss).

    Returns
    -------
    Rule
        The engine rule (``attnlab.optim.transforms.Rule``): one chain of transforms per tensor of ``names``.

    Raises
    ------
    ValidationError
        When the string does not parse, an option is given twice or is not the optimizer's, or the optimizer has
        no engine rule for these arguments (see :meth:`OptimizerSpec.rule`).
    """
    return OptimizerSpec.parse(optimizer).with_options(**options).rule(names, lr=lr, optimal_loss=l_star)
