"""The optimizer registry: every optimizer attnlab names is one entry, read by every place that names one.

Spec: implicit-bias-ngd §4 (A1-A8), mirror-descent-lp §4, steepest-descent §1 and §5, preconditioned-regression §5.4
(the rules the built-in entries chain; :mod:`attnlab.optim.entries` holds them).

An :class:`OptimizerEntry` is a name, its options (:class:`Option`: type and bounds, checked once, where the string
or the keyword is read), the chain of transforms (:mod:`attnlab.optim.transforms`) built from those options, and
the ``torch.optim`` class built from the same chain. The optimizer grammar (:mod:`attnlab.optim.spec`), the
engine's front doors (:func:`attnlab.train`, :func:`attnlab.training.batched.train`), the real models'
optimizers (:mod:`attnlab.nets.optimizers`), :func:`attnlab.explain.explain`, the command line, sweeps and the
documentation's optimizer list all read this registry, so an optimizer of your own is one transform and one :func:`register` call::

    from attnlab.optim import registry
    from attnlab.optim import transforms as tx

    registry.register(registry.OptimizerEntry(
        name="half-sign",
        summary="sign descent on the larger half of each tensor's entries",
        spec="steepest-descent §1 (ours)",
        options=(registry.Option("lr", registry.positive, 0.1, "step size"),),
        chain=lambda h: tx.Rule((half_sign(), tx.scale_by_lr(h["lr"]))),
    ))
    attnlab.batched.train(X, Z, y, v, optimizer="half-sign:lr=0.05")

Every entry also takes ``schedule`` (``"constant"``, ``"inv_sqrt"`` or ``"poly:<a>"``): the whole step is
multiplied by ``1``, ``(t + 1)^{-1/2}`` or ``(t + 1)^{-a}`` at step ``t`` (:func:`~attnlab.optim.transforms.schedule`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from attnlab._validation import ValidationError, check_bool, check_in, check_scalar
from attnlab.optim import transforms as tx

__all__ = [
    "Alias",
    "Hyperparameters",
    "OptimizerEntry",
    "Option",
    "SCHEDULE",
    "document",
    "entries",
    "get",
    "lookup",
    "names",
    "register",
    "registered",
    "table",
    "unregister",
]

Check = Callable[[str, Any], Any]


# --- option checks: each returns the checked value or raises naming the option ------------------------------------


def number(
    low: float | None = None,
    high: float | None = None,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_inf: bool = False,
    none: bool = False,
) -> Check:
    """The check of a number within bounds (``check_scalar``'s), as a float; ``none``: None passes (not set)."""

    def check(name: str, value: Any) -> float | None:
        if none and value is None:
            return None
        bounds = dict(low_inclusive=low_inclusive, high_inclusive=high_inclusive, allow_inf=allow_inf)
        return float(check_scalar(name, value, low=low, high=high, **bounds))

    return check


positive = number(0.0, low_inclusive=False)  # lr, c, head_lr
nonnegative = number(0.0)  # alpha, eps, weight_decay
fraction = number(0.0, 1.0, high_inclusive=False)  # momentum, beta1
open_fraction = number(0.0, 1.0, low_inclusive=False, high_inclusive=False)  # beta2
cap = number(0.0, low_inclusive=False, allow_inf=True, none=True)  # max_step: None is no cap
exponent = number(1.0, low_inclusive=False, allow_inf=True)  # p of l_p, 1 < p <= inf


def boolean(name: str, value: Any) -> bool:
    """True or False (``normalized``, ``adaptive``)."""
    return check_bool(name, value)


def choice(*values: Any) -> Check:
    """One of ``values`` (``normalization``, ``momentum_variant``, ``normalizer``)."""
    return lambda name, value: check_in(name, value, values)


_SCHEDULE = re.compile(r"poly:(?P<a>.+)")


def schedule(name: str, value: Any) -> str:
    """``"constant"``, ``"inv_sqrt"`` or ``"poly:<a>"`` with ``a > 0``, in its canonical spelling."""
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text in ("constant", "inv_sqrt"):
        return text
    match = _SCHEDULE.fullmatch(text) if isinstance(text, str) else None
    if match is not None:
        try:
            a = float(match["a"])
        except ValueError:
            a = math.nan
        if math.isfinite(a) and a > 0:
            return f"poly:{a:g}"
    raise ValidationError(
        f"{name} == {value!r}, must be 'constant', 'inv_sqrt' or 'poly:<a>' with a > 0 (the step times "
        "(t + 1)^-a at step t), e.g. schedule=poly:0.5"
    )


def schedule_exponent(kind: str) -> float:
    """The exponent ``a`` of a checked schedule: the step is multiplied by ``(t + 1)^{-a}`` (0 for constant)."""
    return {"constant": 0.0, "inv_sqrt": 0.5}.get(kind) if not kind.startswith("poly:") else float(kind[5:])


@dataclass(frozen=True)
class Option:
    """One option of an optimizer: its name, its check (type and bounds), its default and what it means.

    Attributes
    ----------
    name : str
    check : callable
        ``check(name, value) -> value``: the checked value (converted), or :class:`ValidationError` naming it.
    default : Any
        The value when the option is not given (None: not set).
    doc : str
        One line for the documentation's optimizer list.
    string : bool, default=True
        Whether it can be written in an optimizer string (False for tensors, given by keyword).
    group : bool, default=True
        Whether the ``torch.optim`` class keeps it per parameter group (False: an argument of the class only).
    shared : bool, default=False
        Whether every parameter group must hold the same value (one norm or one buffer scale over all tensors).
    engine_only : bool, default=False
        Whether only the engine's rule reads it (the torch class refuses it, with ``doc`` as the reason).
    """

    name: str
    check: Check
    default: Any = None
    doc: str = ""
    string: bool = True
    group: bool = True
    shared: bool = False
    engine_only: bool = False


#: The option every entry takes: a step-size schedule multiplying the whole step.
SCHEDULE = Option(
    "schedule",
    schedule,
    "constant",
    "'constant', 'inv_sqrt' or 'poly:<a>': the whole step times (t + 1)^-a at step t",
)


@dataclass(frozen=True)
class Hyperparameters:
    """What a chain is built from: each option's value for each tensor, and where the tensors belong.

    Attributes
    ----------
    values : dict of str to list
        One value per tensor for every option of the entry (defaults filled in).
    groups : list of hashable or None
        The ``torch.optim`` parameter group of each tensor; None in the engine (no parameter groups).
    names : tuple of str or None
        The engine's tensor names (``"W"``; ``"K", "Q"``; ``"xi_k", "xi_q"``; ``"v"`` for a trained head); None for
        a ``torch.optim`` class.
    """

    values: dict[str, list]
    groups: list[Hashable] | None = None
    names: tuple[str, ...] | None = None

    def __getitem__(self, key: str) -> list:
        return self.values[key]

    def shared(self, key: str) -> Any:
        """The one value of ``key`` over all tensors (refused when parameter groups set different ones)."""
        values = self.values[key]
        for value in values[1:]:
            if value != values[0]:
                raise ValidationError(
                    f"{key} == {value!r} in a parameter group, but the optimizer's {key} is {values[0]!r}: it is one "
                    f"value over all parameters; drop {key} from the group or build one optimizer per setting"
                )
        return values[0]

    @property
    def engine(self) -> bool:
        """Whether the chain is built for the engine (tensor names, no parameter groups)."""
        return self.groups is None


@dataclass(frozen=True)
class Alias:
    """Another name of an entry, with options it implies (overridable) and options it fixes (refused if written).

    Attributes
    ----------
    target : str
        The entry's name.
    implied : mapping of str to Any
        Options the alias sets, e.g. ``sps`` sets ``c = 0.5``.
    fixed : tuple of str
        Implied options that define the alias and cannot be written again (``sign`` fixes ``p = inf``).
    doc : str
        One line for the documentation.
    """

    target: str
    implied: Mapping[str, Any] = field(default_factory=dict)
    fixed: tuple[str, ...] = ()
    doc: str = ""


@dataclass(frozen=True, eq=False)
class OptimizerEntry:
    """One optimizer: its name, options, transform chain and ``torch.optim`` class.

    Attributes
    ----------
    name : str
        The canonical name in the optimizer grammar (lower case, no ``:`` or ``,``).
    summary : str
        One line for the documentation's optimizer list.
    spec : str
        The theory section of its formula (``"implicit-bias-ngd §4 A2"``).
    options : tuple of Option
        Its own options (:data:`SCHEDULE` is added to every entry).
    chain : callable
        ``chain(Hyperparameters) -> Rule``: the transforms of the update, from the options' values per tensor.
    torch_class : type, optional
        A ``torch.optim.Optimizer`` subclass whose rule is ``chain`` (a
        :class:`~attnlab.optim._base.FunctionalOptimizer`); None generates one from the entry.
    aliases : mapping of str to Alias
        Other names (``"sgd"``, ``"sign"``).
    positional : str, optional
        The option written without a key after the colon (``p`` of ``"md:1.5"``).
    family : callable, optional
        ``family(options) -> tuple of norms``: the SVM norms of the optimizer's geometry (``"fro"``, a float ``p``),
        the candidates :func:`attnlab.explain.explain` adds for it.
    validate : callable, optional
        ``validate(options, text)``: checks across options of one string (raise :class:`ValidationError`).
    refusals : mapping of str to str
        Options the entry does not take although others do, with the reason (Polyak takes no ``lr``).
    potential : callable, optional
        ``potential(options) -> p``: the exponent of the optimizer's l_p mirror map, whose Bregman divergences
        :func:`attnlab.explain.explain` reports (mirror descent only).
    class_name : str, optional
        The name of the generated ``torch.optim`` class (default: the name in CamelCase).
    """

    name: str
    summary: str
    spec: str
    options: tuple[Option, ...]
    chain: Callable[[Hyperparameters], tx.Rule]
    torch_class: type | None = None
    aliases: Mapping[str, Alias] = field(default_factory=dict)
    positional: str | None = None
    family: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = None
    validate: Callable[[Mapping[str, Any], str], None] | None = None
    refusals: Mapping[str, str] = field(default_factory=dict)
    potential: Callable[[Mapping[str, Any]], float | None] | None = None
    class_name: str | None = None

    @property
    def all_options(self) -> dict[str, Option]:
        """Every option by name, :data:`SCHEDULE` included."""
        return {o.name: o for o in (*self.options, SCHEDULE)}

    @property
    def takes_lr(self) -> bool:
        """Whether the step size ``lr`` is one of its options (Polyak's is not)."""
        return "lr" in self.all_options

    def defaults(self) -> dict[str, Any]:
        """Every option's default value."""
        return {name: option.default for name, option in self.all_options.items()}

    def rule(self, hyper: Hyperparameters) -> tx.Rule:
        """The chain of this entry for ``hyper``, with the schedule transform last when a tensor has one."""
        rule = self.chain(hyper)
        exponents = [schedule_exponent(kind) for kind in hyper["schedule"]]
        if not any(exponents):
            return rule
        return tx.Rule(rule.transforms + (tx.schedule(exponents),), rule.mirror_p)

    def optimizer_class(self) -> type:
        """The ``torch.optim`` class of this entry (generated from the chain when the entry names none)."""
        if self.torch_class is not None:
            return self.torch_class
        if self.name not in _GENERATED:
            from attnlab.optim._base import generated_class  # the base imports this module: import here

            _GENERATED[self.name] = generated_class(self)
        return _GENERATED[self.name]


_REGISTRY: dict[str, OptimizerEntry] = {}
_ALIASES: dict[str, Alias] = {}
_GENERATED: dict[str, type] = {}
_NAME = re.compile(r"[a-z][a-z0-9_-]*")


def register(entry: OptimizerEntry) -> OptimizerEntry:
    """Add ``entry`` (and its aliases) to the registry; every front door then knows its name.

    Parameters
    ----------
    entry : OptimizerEntry
        The optimizer; its name and aliases must be new.

    Returns
    -------
    OptimizerEntry
        ``entry``, so that a module can keep it.

    Raises
    ------
    ValidationError
        When a name is taken, is not lower-case letters, digits, ``-`` and ``_``, or an option repeats.
    """
    for name in (entry.name, *entry.aliases):
        if not _NAME.fullmatch(name):
            raise ValidationError(f"optimizer name {name!r} must be lower-case letters, digits, '-' and '_'")
        if name in _REGISTRY or name in _ALIASES:
            raise ValidationError(f"optimizer name {name!r} is registered already; pick another name")
    names = [o.name for o in entry.options]
    if len(set(names)) != len(names) or SCHEDULE.name in names:
        raise ValidationError(f"optimizer {entry.name!r} lists an option twice (schedule is added to every entry)")
    _REGISTRY[entry.name] = entry
    _ALIASES.update(entry.aliases)
    return entry


def unregister(name: str) -> None:
    """Remove the entry ``name`` and its aliases (a test's own optimizer, when it is done).

    Parameters
    ----------
    name : str
        A registered canonical name.
    """
    entry = _REGISTRY.pop(name)
    for alias in entry.aliases:
        _ALIASES.pop(alias, None)
    _GENERATED.pop(name, None)


class registered:  # noqa: N801 (used as a function: `with registered(entry):`)
    """Context manager: ``entry`` is registered inside the block and removed after it.

    Parameters
    ----------
    entry : OptimizerEntry
        The optimizer to register for the block.
    """

    def __init__(self, entry: OptimizerEntry) -> None:
        self.entry = entry

    def __enter__(self) -> OptimizerEntry:
        return register(self.entry)

    def __exit__(self, *exc: object) -> None:
        unregister(self.entry.name)


def get(name: str) -> OptimizerEntry:
    """The entry of a canonical name.

    Parameters
    ----------
    name : str
        A registered canonical name (``"ngd"``).

    Returns
    -------
    OptimizerEntry

    Raises
    ------
    ValidationError
        For a name that is not registered (the message lists the registered ones).
    """
    if name not in _REGISTRY:
        raise ValidationError(f"unknown optimizer {name!r}; registered: {', '.join(names())}")
    return _REGISTRY[name]


def lookup(name: str) -> tuple[OptimizerEntry, Alias | None] | None:
    """The entry a name or alias refers to, with the alias (None for a canonical name); None when unknown.

    Parameters
    ----------
    name : str
        A canonical name or an alias, lower case.

    Returns
    -------
    tuple of (OptimizerEntry, Alias or None), or None
    """
    if name in _REGISTRY:
        return _REGISTRY[name], None
    if name in _ALIASES:
        return _REGISTRY[_ALIASES[name].target], _ALIASES[name]
    return None


def entries() -> tuple[OptimizerEntry, ...]:
    """Every registered entry, in registration order.

    Returns
    -------
    tuple of OptimizerEntry
    """
    return tuple(_REGISTRY.values())


def names(aliases: bool = False) -> tuple[str, ...]:
    """The registered canonical names (and their aliases with ``aliases=True``).

    Parameters
    ----------
    aliases : bool, default=False

    Returns
    -------
    tuple of str
    """
    return tuple(_REGISTRY) + (tuple(_ALIASES) if aliases else ())


def _option_text(option: Option) -> str:
    value = option.default
    shown = f"{value:.4g}" if isinstance(value, float) else repr(value)
    default = "" if value is None else f", default {shown}"
    where = "" if option.string else " (keyword only)"
    return f"``{option.name}`` ({option.doc}{default}){where}"


def table() -> str:
    """The optimizer list of the documentation, one reStructuredText bullet per entry, generated from the registry.

    Returns
    -------
    str
        ``- ``name`` (aliases): summary; options: ...`` lines.
    """
    lines = []
    for entry in entries():
        aliases = [f"``{a}`` ({alias.doc})" if alias.doc else f"``{a}``" for a, alias in entry.aliases.items()]
        head = f"- ``{entry.name}``" + (f" (also {', '.join(aliases)})" if aliases else "")
        options = "; ".join(_option_text(o) for o in entry.options)
        lines.append(f"{head}: {entry.summary} [{entry.spec}]. Options: {options or 'none'}.")
    lines.append(f"- every name also takes {_option_text(SCHEDULE)}.")
    return "\n".join(lines)


_MARKER = re.compile(r"^(?P<indent>[ \t]*)\.\. optimizers::[ \t]*$", re.MULTILINE)


def document(text: str) -> str:
    """``text`` with each ``.. optimizers::`` line replaced by :func:`table`, at that line's indent.

    The docstrings of :func:`attnlab.train`, :func:`attnlab.training.batched.train` and
    :func:`attnlab.explain.explain` hold the marker; it is filled at import and by the site's build (``tools/docs/griffe_rst.py``), so the list they
    show is the registry's.

    Parameters
    ----------
    text : str
        A docstring.

    Returns
    -------
    str
    """
    return _MARKER.sub(lambda m: "\n".join(m["indent"] + line for line in table().split("\n")), text)


def documented(function: Callable) -> Callable:
    """Decorator: fill the ``.. optimizers::`` marker of ``function``'s docstring (:func:`document`)."""
    if function.__doc__:
        function.__doc__ = document(function.__doc__)
    return function


def per_tensor_hyper(entry: OptimizerEntry, options: Mapping[str, Any], n: int, **common: Any) -> Hyperparameters:
    """The engine's :class:`Hyperparameters`: every option of ``entry`` (``options``, else its default) for ``n``
    tensors; ``common`` sets ``groups`` or ``names``."""
    values = {name: [options.get(name, o.default)] * n for name, o in entry.all_options.items()}
    return Hyperparameters(values, **common)


def group_hyper(
    entry: OptimizerEntry, groups: Sequence[dict], group_ids: Sequence[int], **extra: Any
) -> Hyperparameters:
    """A ``torch.optim`` class's :class:`Hyperparameters`: each tensor's group values; ``extra`` are the class's own
    arguments (not group keys), the same for every tensor."""
    values = {}
    for name, option in entry.all_options.items():
        if name in extra:
            values[name] = [extra[name]] * len(groups)
        elif option.group and not option.engine_only:
            values[name] = [group.get(name, option.default) for group in groups]
        else:
            values[name] = [option.default] * len(groups)
    return Hyperparameters(values, groups=list(group_ids))
