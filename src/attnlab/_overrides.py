"""Typed ``--set key=value`` overrides of a dataclass config, parsed by each field's type annotation.

The lowest layer (no torch, no experiments), so a command that only needs to parse overrides (``attnlab data make``)
does not import every experiment module.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from numbers import Integral, Real
from typing import Any

from attnlab._errors import ValidationError

__all__ = ["OverrideError", "parse_overrides"]

# how a list of each element type is written on the command line: bare, and as `attnlab show` prints it
_WRITTEN = {float: ("0.1,0.5", "(0.1, 0.5)"), int: ("4,8", "(4, 8)"), bool: ("true,false", "(true, false)")}
_ENCLOSING = {"(": ")", "[": "]"}
# an element of each type in an example of a bracketed pair
_SAMPLE = {float: "0.1", int: "60", bool: "true", str: "sgd"}


class OverrideError(ValidationError):
    """A ``--set`` the config refuses; ``key`` is the field whose value is bad (None: an unknown or malformed key)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _describe(annotation: Any) -> str:
    """What a value of ``annotation`` is, in words: ``float``, ``a list of float``, ``int or None``."""
    args = typing.get_args(annotation)
    if annotation is bool:
        return "a boolean (true/false)"
    if typing.get_origin(annotation) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            inner = _describe(args[0])
            return f"a list of {'lists' + inner[6:] if inner.startswith('a list') else inner}"
        return f"({', '.join(map(_describe, args))})" if args else "a list"
    if _is_union(annotation):
        named = [_describe(a) for a in args if a is not type(None)]
        return " or ".join(named + (["None"] if type(None) in args else []))
    if typing.get_origin(annotation) is typing.Literal:
        return f"one of {', '.join(map(str, args))}"
    return getattr(annotation, "__name__", str(annotation))


def _scan(text: str) -> Iterator[tuple[int, str, int, str]]:
    """Each character of ``text`` with the bracket depth and the open quote after it: brackets nest, and quotes
    ('...' or "...") hold brackets and commas."""
    depth, quote = 0, ""
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        yield i, char, depth, quote


def _split(label: str, body: str) -> list[str]:
    """``body`` cut at its top-level commas (and ``;``): brackets nest, quotes ('...' or "...") hold commas."""
    parts, depth, quote, start = [], 0, "", 0
    for i, char, depth, quote in _scan(body):
        if char in ",;" and depth == 0 and not quote:
            parts.append(body[start:i])
            start = i + 1
        if depth < 0:
            break
    if depth or quote:
        raise ValidationError(f"{label}: unbalanced {'quote' if quote else 'brackets'}")
    return [p.strip() for p in [*parts, body[start:]] if p.strip()]


def _enclosed(text: str) -> bool:
    """Whether ``text`` is one bracketed list: its first bracket closes at its last character."""
    if text[:1] not in _ENCLOSING or not text.endswith(_ENCLOSING[text[:1]]):
        return False
    for i, char, depth, quote in _scan(text):
        if char in ")]" and depth == 0 and not quote:
            return i == len(text) - 1
    return False


def _written(annotation: Any) -> str:
    """How a list of ``annotation`` is written: ``0.1,0.5 or (0.1, 0.5)``; nested lists and pairs in brackets."""
    args = typing.get_args(annotation)
    inner = args[0] if args else str
    if inner in _WRITTEN:
        return "{} or {}".format(*_WRITTEN[inner])
    quoting = "; quote an entry that holds a comma: sgd,'md:2,normalized=false'"
    if typing.get_origin(inner) is tuple:
        fixed = typing.get_args(inner)
        if len(fixed) == 2 and fixed[1] is Ellipsis:
            return "one bracketed list per entry, ((0.1, 0.5), (0.2,))"
        first = [i for i, a in enumerate(fixed) if a is str][:1]
        one = ", ".join("'md:2,normalized=false'" if i in first else _SAMPLE.get(a, "a") for i, a in enumerate(fixed))
        quoted = " (quoted: it holds a comma)" if first else ""
        return f"one bracketed ({', '.join(map(_describe, fixed))}) per entry, (({one}),){quoted}"
    return "a,b or (a, b)" + (quoting if inner is str else "")


def _element(label: str, text: str, inner: Any) -> Any:
    """One element of a list: a quoted string unquoted; a nested list only in brackets; no stray ``key=value``."""
    nested = typing.get_origin(inner) is tuple
    if nested and not _enclosed(text):
        raise ValidationError(label)
    if inner is str and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if inner is str and "=" in text and ":" not in text:  # an option cut off an optimizer string by a comma
        raise ValidationError(label)
    return _parse_value(label, text, inner)


def _parse_list(label: str, text: str, annotation: Any) -> tuple[Any, ...]:
    """``0.1,0.5``, ``(0.1, 0.5)`` or ``[0.1, 0.5]`` as a tuple, each element parsed by the element type.

    A list of lists takes its inner lists bracketed (``((0.1, 0.2), (0.3,))``); a fixed-length tuple
    (``tuple[str, int]``) needs exactly that many elements; a string element may be quoted to hold commas.
    """
    args = typing.get_args(annotation)
    variadic = not args or (len(args) == 2 and args[1] is Ellipsis)
    body = text.strip()
    if _enclosed(body):
        body = body[1:-1]
    try:
        parts = _split(label, body)
        if not variadic and len(parts) != len(args):
            raise ValidationError(label)
        types_ = [args[0] if args else str] * len(parts) if variadic else list(args)
        return tuple(_element(label, p, t) for p, t in zip(parts, types_))
    except ValidationError:
        if not variadic:
            raise ValidationError(f"{label}: expected {_describe(annotation)}") from None
        raise ValidationError(f"{label}: expected {_describe(annotation)}, written {_written(annotation)}") from None


def _parse_value(label: str, text: str, annotation: Any) -> Any:
    """``text`` parsed by ``annotation``; errors start with ``label`` (``--set key=text`` or ``key=text``)."""
    if annotation is bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValidationError(f"{label}: expected a boolean (true/false)")
    if annotation in (int, float, str):
        try:
            if annotation is int and not text.strip().lstrip("+-").isdigit():
                as_float = float(text)  # accept 1e4 for an int field when it is a whole number
                if not as_float.is_integer():
                    raise ValueError(text)
                return int(as_float)
            return annotation(text)
        except ValueError:
            raise ValidationError(f"{label}: expected {annotation.__name__}") from None
    if typing.get_origin(annotation) is tuple:
        return _parse_list(label, text, annotation)
    if _is_union(annotation):
        if text.strip().lower() == "none":
            return None
        errors = []
        for arg in [a for a in typing.get_args(annotation) if a is not type(None)]:
            try:
                return _parse_value(label, text, arg)
            except ValidationError as err:
                errors.append(str(err))
        raise ValidationError("; ".join(errors))
    if typing.get_origin(annotation) is typing.Literal:
        allowed = typing.get_args(annotation)
        for a in allowed:
            if str(a) == text:
                return a
        raise ValidationError(f"{label}: must be one of {', '.join(map(str, allowed))}")
    return text


def _convert(value: Any, annotation: Any) -> Any:
    """``value`` (from a mapping: YAML, JSON, Python) as a value of ``annotation``; ValidationError if it is not one.

    Strings are parsed as on the command line; a list or tuple for a tuple field becomes a tuple, each element
    converted by its type; a whole float for an int field becomes an int; a boolean is never a number here.
    """
    if isinstance(value, str):
        return _parse_value("", value, annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    number = isinstance(value, Real) and not isinstance(value, bool)
    if annotation is bool and isinstance(value, bool):
        return value
    if annotation is int and number and (isinstance(value, Integral) or float(value).is_integer()):
        return value if isinstance(value, Integral) else int(value)
    if annotation is float and number:
        return value
    if origin is tuple and isinstance(value, (list, tuple)):
        variadic = len(args) == 2 and args[1] is Ellipsis
        if args and not variadic and len(value) != len(args):
            raise ValidationError(f"expected {len(args)} elements, got {len(value)}")
        return tuple(_convert(v, args[0] if variadic else args[i]) if args else v for i, v in enumerate(value))
    if _is_union(annotation):
        if value is None and type(None) in args:
            return None
        for arg in [a for a in args if a is not type(None)]:
            try:
                return _convert(value, arg)
            except ValidationError:
                pass
    elif origin is typing.Literal:
        for allowed in args:
            if type(allowed) is type(value) and allowed == value:
                return allowed
    elif annotation not in (bool, int, float, str) and origin is not tuple:
        return value  # an annotation this parser does not know: the config checks the value itself
    raise ValidationError(f"expected {_describe(annotation)}")


def _pairs(items: Sequence[str] | Mapping[str, Any]) -> list[tuple[str, Any]]:
    if isinstance(items, Mapping):
        return list(items.items())
    if isinstance(items, str):
        raise OverrideError(f"overrides must be a list of key=value strings or a mapping; write [{items!r}]")
    pairs = []
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise OverrideError(f"--set {item!r}: expected key=value")
        key, value = item.split("=", 1)
        pairs.append((key.strip(), value))
    return pairs


def _typed(key: str, value: Any, annotation: Any, listed: bool) -> Any:
    """``value`` of field ``key`` as its type; errors name it as ``--set key=value`` when ``listed``, else ``key``."""
    if isinstance(value, str):
        return _parse_value(f"--set {key}={value}" if listed else f"{key}={value}", value, annotation)
    try:
        return _convert(value, annotation)
    except ValidationError:
        raise ValidationError(f"{key}: expected {_describe(annotation)}, got {value!r}") from None


def parse_overrides(config_type: type, items: Sequence[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``["n=8", "lr=0.1"]`` (or a mapping) into typed field values of ``config_type``.

    Strings are parsed by the field's type annotation (a tuple field takes ``0.1,0.5``, ``(0.1, 0.5)`` or
    ``[0.1, 0.5]``; a list of lists or of pairs one bracketed entry each, ``((0.1, 0.2), (0.3,))``; a string entry
    that holds a comma is quoted, ``sgd,'md:1.1,normalized=false'``, and an unquoted ``key=value`` entry, an
    option cut off the entry before it, is refused). Other values of a mapping (from YAML, JSON or Python) are checked against it: a list for a
    tuple field becomes a tuple, each element checked by its type; an int is a float; a whole float is an int; a
    boolean is neither. Messages name the key as ``--set key=value`` for the list form, ``key=value`` or ``key``
    for a mapping.

    Parameters
    ----------
    config_type : type
        A dataclass; its fields' annotations type the values.
    items : sequence of "key=value" or mapping
        The overrides.

    Returns
    -------
    dict of str to Any
        Field name to typed value.

    Raises
    ------
    OverrideError
        A :class:`ValidationError`. For an unknown key, listing the keys that exist, or, when the config lists it
        in its ``RENAMED`` class attribute (old name -> new name), saying its new name; for a value that does not
        parse or is not of the field's type, with ``key`` naming the field; for a key given twice in the list form.
    """
    hints = typing.get_type_hints(config_type)
    names = [f.name for f in dataclasses.fields(config_type)]
    listed = not isinstance(items, Mapping)
    out: dict[str, Any] = {}
    for key, value in _pairs(items):
        renamed = getattr(config_type, "RENAMED", {})
        if key not in names and key in renamed:
            fix = f"write --set {renamed[key]}={value}" if listed else f"write {renamed[key]}: {value!r}"
            raise OverrideError(f"key {key!r} of {config_type.__name__} is now {renamed[key]!r}; {fix}")
        if key not in names:
            raise OverrideError(f"unknown key {key!r} for {config_type.__name__}; keys: {', '.join(names)}")
        if key in out:  # only the list form can repeat a key: --set seed=1 --set seed=2 is a conflict, not an order
            raise OverrideError(
                f"--set {key} is given twice ({key}={value} after an earlier {key}); give each key once", key=key
            )
        try:
            out[key] = _typed(key, value, hints[key], listed)
        except ValidationError as err:
            raise OverrideError(str(err), key=key) from None
    return out
