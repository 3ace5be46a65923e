"""The wrong mechanism under which a claim's rows must fail (:class:`Falsifier`), applied by patching one name.

A falsifier replaces ``"module:attribute"`` (the name where the experiment looks the mechanism up) for the duration
of a ``with`` block and counts the calls of its replacement, so a falsifier that patches a name nothing reads is
refused rather than "passing". :mod:`attnlab.verify.claim` names falsifiers from the claims it declares.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from attnlab._validation import ValidationError, check_in

__all__ = ["FALSIFIER_KINDS", "Falsifier"]

FALSIFIER_KINDS = ("mechanism", "reference", "gross")


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
        ``wrap(original) -> replacement``.
    kind : {"mechanism", "reference", "gross"}
        What it changes. ``"mechanism"``: the optimizer, the data model, the model or the algorithm a theorem is
        about, as a real bug could (a halved gradient, a wrong mirror exponent, a temperature); every theory claim
        needs one that fails it numerically. ``"reference"``: the prediction or the reference the run is compared
        with (a closed form, an SVM of another norm), or a rescaled measurement. ``"gross"``: a change no real bug
        would make quietly (the whole model swapped, a divergent step).
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
        check_in("Falsifier.kind", self.kind, FALSIFIER_KINDS)
        if ":" not in self.target:
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

        Yields
        ------
        None
            Inside the block the target is replaced; the original is put back on leaving it, an exception included.

        Raises
        ------
        ValidationError
            When the block ended normally and never called a callable replacement: the experiment looks the
            mechanism up somewhere else than ``target``.
        """
        module_name, _, path = self.target.partition(":")
        owner: Any = importlib.import_module(module_name)
        *parents, attribute = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        original = getattr(owner, attribute)
        calls = [0]
        replacement = _counting(self.wrap(original), calls)
        setattr(owner, attribute, replacement)
        try:
            yield
        finally:
            setattr(owner, attribute, original)
        if callable(replacement) and calls[0] == 0:
            raise ValidationError(
                f"falsifier {self.name!r} replaced {self.target} but nothing called the replacement while it was "
                "applied, so the run was not falsified: the experiment looks the mechanism up elsewhere (a name "
                "imported under another module, an experiment defined in a script run as __main__ whose module is "
                "imported a second time); set target to the module where the run looks it up"
            )


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
