"""Typed ``--set key=value`` overrides of a dataclass config, parsed by each field's type annotation.

The lowest layer (no torch, no experiments), so a command that only needs to parse overrides (``attnlab data make``)
does not import every experiment module.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from attnlab._errors import ValidationError

__all__ = ["OverrideError", "parse_overrides"]


class OverrideError(ValidationError):
    """A ``--set`` the config refuses; ``key`` is the field whose value is bad (None: an unknown or malformed key)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _parse_value(key: str, text: str, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if annotation is bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ValidationError(f"--set {key}={text}: expected a boolean (true/false)")
    if annotation in (int, float, str):
        try:
            if annotation is int and not text.strip().lstrip("+-").isdigit():
                as_float = float(text)  # accept 1e4 for an int field when it is a whole number
                if not as_float.is_integer():
                    raise ValueError(text)
                return int(as_float)
            return annotation(text)
        except ValueError:
            raise ValidationError(f"--set {key}={text}: expected {annotation.__name__}") from None
    if origin is tuple:
        args = typing.get_args(annotation)
        inner = args[0] if args else str
        parts = [p for p in text.replace(";", ",").split(",") if p.strip()]
        return tuple(_parse_value(key, p.strip(), inner) for p in parts)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if text.strip().lower() == "none":
            return None
        errors = []
        for arg in args:
            try:
                return _parse_value(key, text, arg)
            except ValidationError as err:
                errors.append(str(err))
        raise ValidationError("; ".join(errors))
    if origin is typing.Literal:
        allowed = typing.get_args(annotation)
        for a in allowed:
            if str(a) == text:
                return a
        raise ValidationError(f"--set {key}={text}: must be one of {', '.join(map(str, allowed))}")
    return text


def parse_overrides(config_type: type, items: Sequence[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``["n=8", "lr=0.1"]`` (or a mapping) into typed field values of ``config_type``.

    Strings are parsed by the field's type annotation; non-strings in a mapping pass through. An unknown key
    raises an :class:`OverrideError` (a :class:`ValidationError`) listing the keys that exist, or, when the config
    lists it in its ``RENAMED`` class attribute (old name -> new name), saying its new name; a value that does
    not parse raises one whose ``key`` names the field.
    """
    hints = typing.get_type_hints(config_type)
    names = [f.name for f in dataclasses.fields(config_type)]
    pairs: list[tuple[str, Any]] = []
    if isinstance(items, Mapping):
        pairs = list(items.items())
    else:
        for item in items:
            if "=" not in item:
                raise OverrideError(f"--set {item!r}: expected key=value")
            key, value = item.split("=", 1)
            pairs.append((key.strip(), value))
    out: dict[str, Any] = {}
    for key, value in pairs:
        renamed = getattr(config_type, "RENAMED", {})
        if key not in names and key in renamed:
            raise OverrideError(
                f"key {key!r} of {config_type.__name__} is now {renamed[key]!r}; write --set {renamed[key]}={value}"
            )
        if key not in names:
            raise OverrideError(f"unknown key {key!r} for {config_type.__name__}; keys: {', '.join(names)}")
        try:
            out[key] = _parse_value(key, value, hints[key]) if isinstance(value, str) else value
        except ValidationError as err:
            raise OverrideError(str(err), key=key) from None
    return out
