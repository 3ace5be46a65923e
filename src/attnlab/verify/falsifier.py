"""The wrong mechanism under which a claim's rows must fail (:class:`Falsifier`), applied by patching one name.

A falsifier replaces ``"module:attribute"`` (the name where the experiment looks the mechanism up) for the duration
of a ``with`` block and counts the calls of its replacement, so a falsifier that patches a name nothing reads is
refused rather than "passing". :mod:`attnlab.verify.claim` names falsifiers from the claims it declares.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from attnlab._validation import ValidationError, check_in

__all__ = ["FALSIFIER_KINDS", "Falsifier"]

FALSIFIER_KINDS = ("mechanism", "reference", "gross", "hypothesis")


@dataclass(frozen=True)
class Falsifier:
    """A small, plausible wrong mechanism under which the checks that name it must fail.

    It changes the mechanism a theorem is about (the model, the optimizer, the data model, a closed form, a solver's
    program), never a check's own arithmetic, its threshold or the run's recorded output, and it leaves the run
    finite. It is applied without editing source: :meth:`applied` replaces ``target`` (``"module:attribute"``,
    the name *where the experiment looks it up*) by ``wrap(original)`` for the duration of a ``with`` block.

    Parameters
    ----------
    name : str
        Short id the checks name, e.g. ``"temperature-1.3"``.
    mechanism : str
        What is wrong, in words: ``"softmax temperature 1.3 in the empirical loss"``.
    target : str
        ``"package.module:attribute"`` (dotted attributes allowed after the colon, e.g. ``"mod:Class.method"``).
    wrap : callable
        ``wrap(original) -> replacement`` (for a classmethod, ``original`` is the function of ``cls``).
    kind : {"mechanism", "reference", "gross", "hypothesis"}
        What it changes. ``"mechanism"``: the optimizer, the data model, the model or the algorithm a theorem is
        about, as a real bug could (a halved gradient, a wrong mirror exponent, a temperature); every theory claim
        needs one that fails it numerically. ``"reference"``: the prediction or the reference the run is compared
        with (a closed form, an SVM of another norm), or a rescaled measurement. ``"gross"``: a change no real bug
        would make quietly (the whole model swapped, a divergent step). ``"hypothesis"``: a change that breaks a
        theorem's hypothesis (the selected token no longer optimal, a data set outside the assumptions); a row that
        fails under it depends on the hypothesis, which shows nothing about its mechanism, so it does not count as a
        mechanism falsifier.
    slow : bool, default=False
        The quick run under this falsifier takes long: its test is marked slow.

    Examples
    --------
    >>> import math
    >>> f = Falsifier("sqrt-off", "square root off by 10%", "math:sqrt", lambda sqrt: lambda x: 1.1 * sqrt(x), "mechanism")
    >>> with f.applied():
    ...     round(math.sqrt(4.0), 6)
    2.2
    >>> math.sqrt(4.0)
    2.0
    """

    name: str
    mechanism: str
    target: str
    wrap: Callable[[Any], Any]
    kind: str
    slow: bool = False

    def __post_init__(self) -> None:
        for name in ("name", "mechanism", "target"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValidationError(f"Falsifier.{name} must be a non-empty str, got {getattr(self, name)!r}")
        if "," in self.name:
            raise ValidationError(f"Falsifier.name {self.name!r} holds a comma; claims list their falsifiers by name")
        if not callable(self.wrap):
            raise ValidationError(f"Falsifier.wrap must be a function wrap(original) -> replacement, got {self.wrap!r}")
        check_in("Falsifier.kind", self.kind, FALSIFIER_KINDS)
        if ":" not in self.target or not self.target.partition(":")[2]:
            raise ValidationError(
                f"Falsifier.target must be 'module:attribute', got {self.target!r}; name the attribute where the "
                "experiment looks the mechanism up, e.g. 'attnlab.experiments.flagship:train'"
            )

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        """Replace ``target`` by ``wrap(original)`` inside the block, and restore it after.

        A falsifier that patches a name nothing reads does nothing, and both runs would "pass". So a callable
        replacement (a function, or a class: it is then subclassed) counts its calls, and a block that ends without
        calling it raises. A replacement that is not callable (a constant) cannot be counted.

        A ``staticmethod`` or ``classmethod`` target stays one: ``wrap`` gets the function inside it (for a
        classmethod, the function of ``cls``: ``lambda make: lambda cls, x: make(cls, x) + 1``) and the replacement
        is decorated alike. On leaving, the owner's own attribute is put back as it was (the decorator object
        itself), and an attribute the owner only inherited is deleted from it again.

        Yields
        ------
        None
            Inside the block the target is replaced; the original is put back on leaving it, an exception included.

        Raises
        ------
        ValidationError
            When ``target`` names a module that cannot be imported or an attribute it lacks, or the block ended
            normally and never called a callable replacement: the experiment looks the mechanism up somewhere else
            than ``target``.
        """
        owner, attribute = self._owner()
        saved = _own_value(owner, attribute)
        calls = [0]
        replacement = _install(owner, attribute, self.wrap, calls)
        try:
            yield
        finally:
            if saved is _MISSING:
                delattr(owner, attribute)  # inherited or dynamic: the owner's base (or __getattr__) answers again
            else:
                setattr(owner, attribute, saved)  # the raw value: a staticmethod / classmethod stays one
        if callable(replacement) and calls[0] == 0:
            raise ValidationError(
                f"falsifier {self.name!r} replaced {self.target} but nothing called the replacement while it was "
                "applied, so the run was not falsified: the experiment looks the mechanism up elsewhere (a name "
                "imported under another module, an experiment defined in a script run as __main__ whose module is "
                "imported a second time); set target to the module where the run looks it up"
            )

    def _owner(self) -> tuple[Any, str]:
        """The object that holds the target's last attribute, and that attribute's name."""
        module_name, _, path = self.target.partition(":")
        try:
            owner: Any = importlib.import_module(module_name)
        except ImportError as err:
            raise ValidationError(f"falsifier {self.name!r}: target {self.target!r}: {err}") from None
        *parents, attribute = path.split(".")
        for part in (*parents, attribute):
            if not hasattr(owner, part):
                raise ValidationError(
                    f"falsifier {self.name!r}: target {self.target!r}: {owner!r} has no attribute {part!r}; name the "
                    "attribute where the experiment looks the mechanism up"
                )
            if part != attribute:
                owner = getattr(owner, part)
        return owner, attribute


_MISSING = object()  # the owner had no attribute of its own: it is deleted again on leaving the block


def _own_value(owner: Any, attribute: str) -> Any:
    """What ``applied`` puts back: the raw entry of the owner's own ``__dict__`` (a ``staticmethod`` object, not the
    function it hands out), ``_MISSING`` when the owner only inherits it (or makes it in ``__getattr__``), the plain
    value for an owner without a ``__dict__`` (slots)."""
    own = getattr(owner, "__dict__", None)
    if own is None:
        return getattr(owner, attribute)
    return own.get(attribute, _MISSING)


def _install(owner: Any, attribute: str, wrap: Callable[[Any], Any], calls: list[int]) -> Any:
    """Set ``owner.attribute`` to the counted ``wrap(original)`` and return the counted replacement.

    On a class whose attribute is a ``staticmethod`` or ``classmethod`` (found with ``inspect.getattr_static``, its
    own or inherited), ``wrap`` gets the function inside it (for a classmethod, the function of ``cls``) and the
    replacement is put back in the same decorator, so that calls through the class and its instances bind as before.
    """
    try:
        raw = inspect.getattr_static(owner, attribute)
    except AttributeError:  # made by a module's or a class's __getattr__
        raw = None
    decorator = type(raw) if isinstance(owner, type) and isinstance(raw, staticmethod | classmethod) else None
    made = wrap(getattr(owner, attribute) if decorator is None else raw.__func__)
    if isinstance(made, staticmethod | classmethod):  # wrap re-decorated it itself: count the function inside
        decorator, made = type(made), made.__func__
    replacement = _counting(made, calls)
    setattr(owner, attribute, decorator(replacement) if decorator and callable(replacement) else replacement)
    return replacement


def _counting(replacement: Any, calls: list[int]) -> Any:
    """``replacement`` that adds 1 to ``calls[0]`` on each call; a class is subclassed (isinstance still holds) and
    counts its instantiations and the reads of its public attributes (a classmethod such as ``for_attention``)."""
    if isinstance(replacement, type):

        class Counting(type(replacement)):  # type: ignore[misc]
            def __call__(cls, *args: Any, **kwargs: Any) -> Any:
                calls[0] += 1
                return super().__call__(*args, **kwargs)

            def __getattribute__(cls, name: str) -> Any:  # a classmethod or attribute read uses it too
                if not name.startswith("__"):
                    calls[0] += 1
                return super().__getattribute__(name)

        namespace = {"__module__": replacement.__module__, "__qualname__": replacement.__qualname__}
        return Counting(replacement.__name__, (replacement,), namespace)
    if not callable(replacement):
        return replacement

    @functools.wraps(replacement)
    def counted_call(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return replacement(*args, **kwargs)

    return counted_call
