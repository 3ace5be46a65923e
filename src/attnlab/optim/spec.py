"""One grammar for naming an optimizer in a string, parsed once into an :class:`OptimizerSpec`.

Spec: implicit-bias-ngd §4 (A1 GD, A2/A4/A7 NGD with cap and momentum, A3/A8 Polyak and SPS, A6 joint rule) and
§9 (SGD, SNGD, SPS, Adam on real data), mirror-descent-lp §4 (l_p mirror descent), steepest-descent §1, §5.

A spec reads ``name[:options]``, the options comma-separated ``key=value`` pairs after one colon (``md`` and
``sd`` take ``p`` first, unnamed)::

    "ngd"                          normalised GD, lr 0.1
    "ngd:momentum=0.9,max_step=5"  with momentum and a cap on the step size
    "ngd:eps=1e-8"                 divided by ||g|| + eps, as peer code does
    "polyak:max_step=5"            the Polyak step, capped
    "md:1.5"                       l_p mirror descent with p = 1.5 (p is the one positional argument)
    "md:3,normalized=false,lr=0.01"
    "sign:lr=0.1,schedule=inv_sqrt"  sign descent (steepest descent in l_inf) with step 0.1 / sqrt(t + 1)
    "sd:1.5"                       normalised steepest descent in l_1.5 (p positional, inf allowed)
    "adam:eps=1e-8,weight_decay=0.01"  Adam with AdamW's decoupled decay
    "ngd:schedule=poly:0.5"        any rule with a decaying step (t + 1)^-0.5

The names, their aliases and options are the optimizer registry's (:mod:`attnlab.optim.registry`, the built-in
entries in :mod:`attnlab.optim.entries`); every name but Polyak takes ``lr`` (default 0.1) and every name takes
``schedule``. The names:

.. optimizers::

An alias that fixes an option refuses it written again (``"sign:p=2"`` is refused: write ``"sd:2"``); an unknown
option is refused by name with the list of the known ones.

A spec turns into a rule of the training engine (:meth:`OptimizerSpec.rule`, what :func:`attnlab.training.fit`
runs) or into a ``torch.optim.Optimizer`` (:meth:`OptimizerSpec.build`); both are the entry's chain of transforms.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from attnlab._validation import ValidationError
from attnlab.optim import entries as _builtins
from attnlab.optim import registry
from attnlab.optim import transforms as tx

__all__ = ["DEFAULT_LR", "OptimizerSpec", "parse_optimizer"]

DEFAULT_LR = _builtins.DEFAULT_LR


def _forms() -> str:
    aliases = ", ".join(f'"{a}"' for a in registry.names(aliases=True)[len(registry.names()) :])
    return (
        f"name[:options], the options comma-separated key=value pairs after one colon (md and sd take p first, "
        f"as in 'md:1.5,lr=0.1'), with name one of {', '.join(repr(n) for n in registry.names())} (aliases "
        f'{aliases}), e.g. "ngd:momentum=0.9", "polyak:max_step=5", "md:1.5", "sign:schedule=inv_sqrt"'
    )


@dataclass(frozen=True)
class OptimizerSpec:
    """A parsed optimizer name: the canonical name and the options written (defaults are applied when built).

    Attributes
    ----------
    name : str
        A registered name (:mod:`attnlab.optim.registry`).
    options : tuple of (str, value) pairs
        The options given, checked, sorted by key.
    implied : tuple of str
        The options among them that an alias implies rather than the string writes (``"sps"``: ``c`` and
        ``optimal_loss``); not part of the spec's identity (equality, hash).

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
    implied: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def entry(self) -> registry.OptimizerEntry:
        """The registry entry of this optimizer."""
        return registry.get(self.name)

    @classmethod
    def parse(cls, text: str | OptimizerSpec) -> OptimizerSpec:
        """Parse ``text`` (a spec passes through: it is checked already).

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
            raise ValidationError(f"optimizer must be a string such as 'ngd', got {text!r}; the form is {_forms()}")
        head, _, tail = text.strip().partition(":")
        name = head.strip().lower()
        written: dict[str, Any] = {}
        found = registry.lookup(name)
        if found is None:
            first, comma, rest = (part.strip() for part in head.partition(","))
            if comma and registry.lookup(first.lower()) is not None:
                suggested = f"{first}:{rest}" if rest else first
                raise ValidationError(
                    f"optimizer {text!r}: the options follow a colon, not a comma; write {suggested!r}"
                )
            raise ValidationError(f"optimizer {text!r}: unknown name {head!r}; the form is {_forms()}")
        entry, alias = found
        parts = [p.strip() for p in tail.split(",")] if tail.strip() else []
        for index, part in enumerate(parts):
            key, eq, raw = part.partition("=")
            key = key.strip()
            if not eq:
                if index > 0 or entry.positional is None:
                    positional = [e.name for e in registry.entries() if e.positional]
                    raise ValidationError(
                        f"optimizer {text!r}: {part!r} is not key=value; only {' and '.join(positional)} take a "
                        "positional argument (p, as in 'md:1.5' or 'sd:inf')"
                    )
                key, raw = entry.positional, part
            if key in written:
                raise ValidationError(f"optimizer {text!r}: {key} is given twice; give each option once")
            if alias is not None and key in alias.fixed:
                raise ValidationError(
                    f"optimizer {text!r}: {head.strip()!r} fixes {key} = {alias.implied[key]!r} ({alias.doc}); "
                    f"write '{entry.name}:{key}=...' for another {key}"
                )
            written[key] = _value(raw)
            if written[key] in (math.inf, -math.inf) and raw.strip().lower().lstrip("+-") not in ("inf", "infinity"):
                infinite = f"{entry.name}:inf" if key == entry.positional else f"{key}=inf"
                raise ValidationError(
                    f"optimizer {text!r}: {key} = {raw.strip()!r} overflows a float64 (it would be read as inf); "
                    f"write '{infinite}' if you mean infinity, else a number below 1.8e308"
                )
        implied = {} if alias is None else dict(alias.implied)
        spec = cls(entry.name)._with({**implied, **written}, text)
        return OptimizerSpec(spec.name, spec.options, tuple(sorted(k for k in implied if k not in written)))

    @property
    def written(self) -> frozenset[str]:
        """The options the string (or a keyword) sets itself, not those its alias implies.

        Returns
        -------
        frozenset of str
        """
        return frozenset(k for k, _ in self.options if k not in self.implied)

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
            Options of this optimizer by name, as they would be written in the string (tensors too, for options
            a string cannot hold: a per-run ``optimal_loss``, a covariance).

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
        return self._with(options, str(self))

    def replace(self, **options: Any) -> OptimizerSpec:
        """A spec with ``options`` set, replacing those the string sets (checked as if written in the string).

        Parameters
        ----------
        **options
            Options of this optimizer by name.

        Returns
        -------
        OptimizerSpec
            A new spec; this one is unchanged.
        """
        kept = OptimizerSpec(self.name, tuple((k, v) for k, v in self.options if k not in options), self.implied)
        return kept._with(options, str(self))

    def _with(self, options: Mapping[str, Any], text: str) -> OptimizerSpec:
        """This spec with ``options`` checked and added (the options it holds are checked already)."""
        entry, checked = self.entry, dict(self.options)
        known = entry.all_options
        for key, value in options.items():
            if key in entry.refusals:
                raise ValidationError(f"optimizer {text!r}: {entry.name} takes no {key}, {entry.refusals[key]}")
            if key not in known:
                raise ValidationError(
                    f"optimizer {text!r}: unknown option {key!r} for {entry.name}; {entry.name} takes "
                    f"{', '.join(known)}"
                )
            try:
                checked[key] = known[key].check(key, value)
            except ValidationError as err:
                raise ValidationError(f"optimizer {text!r}: {err}") from None
        if entry.validate is not None:
            entry.validate(checked, text)
        implied = tuple(k for k in self.implied if k not in options)  # an option set now is written
        return OptimizerSpec(self.name, tuple(sorted(checked.items())), implied)

    def __str__(self) -> str:
        """The canonical spelling (the positional option first, then the other options by key)."""
        positional = self.entry.positional
        parts = [_text(v) for k, v in self.options if k == positional]
        parts += [f"{k}={_text(v)}" for k, v in self.options if k != positional]
        return f"{self.name}:{','.join(parts)}" if parts else self.name

    def resolved(self, *, lr: Any = None, optimal_loss: Any = None) -> dict[str, Any]:
        """Every option of this spec, with ``lr`` and ``optimal_loss`` given outside the string added.

        Parameters
        ----------
        lr : float or torch.Tensor of shape (R,), optional
            Step size given outside the string (per run); refused when the string sets ``lr`` too or the optimizer
            takes none.
        optimal_loss : float or torch.Tensor of shape (R,), optional
            Polyak's ``L*`` when the string does not set it.

        Returns
        -------
        dict of str to Any
            The options written, plus ``lr`` and ``optimal_loss`` where given.
        """
        entry, options = self.entry, dict(self.options)
        if lr is not None:
            if not entry.takes_lr:
                raise ValidationError(f"optimizer {self.name!r} takes no lr: {entry.refusals.get('lr', '')}")
            if "lr" in options:
                raise ValidationError(f"optimizer {str(self)!r} sets lr, and lr is given again; pass it once")
            options["lr"] = lr
        if optimal_loss is not None and "optimal_loss" in entry.all_options and options.get("optimal_loss") is None:
            options["optimal_loss"] = optimal_loss
        return options

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
            The engine rule (``attnlab.optim.transforms.Rule``): the entry's chain over the tensors of ``names``.

        Raises
        ------
        ValidationError
            For ``lr`` given twice or to Polyak, what the entry's chain refuses in the engine (``normalization="group"``,
            ``head_lr`` without a trained head, Polyak without an optimal loss).
        """
        options = self.resolved(lr=lr, optimal_loss=optimal_loss)
        entry = self.entry
        return entry.rule(registry.per_tensor_hyper(entry, options, len(names), names=tuple(names)))

    def build(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        *,
        lr: float | None = None,
        optimal_loss: float | None = None,
    ) -> torch.optim.Optimizer:
        """The ``torch.optim.Optimizer`` of this spec over ``params``: the entry's class, the same chain as
        :meth:`rule`.

        ``lr`` and ``optimal_loss`` play the same part as in :meth:`rule`; an option left out takes the registry's
        default, the string's (``"md:1.5"`` builds ``MirrorDescent(p=1.5, normalized=True)``, where the class alone
        defaults to ``normalized=False``), or the class's where the registry has none (Polyak's ``L*`` is then 0, a
        lower bound of every loss attnlab trains with, where the engine takes a fixed head's infimum). A rule that
        works by blocks (``joint``'s ``block_grad_norm`` normaliser) takes each parameter group as one block: the
        engine's two blocks, the head and the attention, are two groups (``[{"params": head}, {"params":
        attention}]``); a flat ``model.parameters()`` is one block, another rule.

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
        entry, options = self.entry, self.resolved(lr=lr, optimal_loss=optimal_loss)
        kwargs = {}
        for name, option in entry.all_options.items():
            value = options.get(name, option.default)
            if option.engine_only and options.get(name) is not None:
                raise ValidationError(f"optimizer {str(self)!r}: {name} is the engine's only; {option.doc}")
            if value is not None and not option.engine_only:
                kwargs[name] = value
        return entry.optimizer_class()(list(params), **kwargs)


def _value(raw: str) -> Any:
    """An option's value from its text: a bool, None, an int, a float, else the string."""
    text = raw.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float) if "_" not in text else ():  # Python reads 1_0 as 10; the grammar does not
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


__doc__ = registry.document(__doc__)
