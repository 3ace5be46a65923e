"""An experiment's settings as a table: every config field with its type, default, quick value, whether the
default is ours or the paper's, and what it means.

The meanings come from the config class's numpydoc docstring, whose ``Attributes`` section has one entry per
field (``name : type`` on one line, the description indented below). ``attnlab show NAME`` prints the table, and
``attnlab run NAME --set ...`` prints it (or the rows concerned) beside an error in a ``--set``.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import shutil
import textwrap
import typing
from dataclasses import dataclass
from typing import Any

__all__ = ["Setting", "attribute_docs", "settings", "settings_table", "undocumented"]

_HEADER = re.compile(r"^-{3,}$")
_ENTRY = re.compile(r"^(?P<names>[A-Za-z_][\w, ]*?)\s*(?::\s*(?P<type>.*))?$")


@dataclass(frozen=True)
class Setting:
    """One row of the settings table."""

    name: str
    type: str
    default: Any
    quick: Any
    ours: bool
    meaning: str


def _sections(doc: str) -> dict[str, list[str]]:
    """The numpydoc sections of ``doc``: a title line underlined with dashes, then its lines."""
    lines = inspect.cleandoc(doc).splitlines()
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and _HEADER.match(lines[i + 1].strip()) and line.strip():
            current = sections.setdefault(line.strip(), [])
        elif current is not None and not _HEADER.match(line.strip()):
            current.append(line)
    return sections


def attribute_docs(config_type: type) -> dict[str, tuple[str, str]]:
    """``{field: (type, meaning)}`` from the ``Attributes`` section of ``config_type``'s docstring.

    An entry reads ``name : type`` (or ``a, b : type`` for several fields) with its description indented on the
    following lines; the description's lines are joined with spaces.

    Examples
    --------
    >>> class C:
    ...     '''Settings.
    ...
    ...     Attributes
    ...     ----------
    ...     n : int
    ...         Sequences.
    ...     lr, momentum : float
    ...         Step size and momentum
    ...         of the optimizer.
    ...     '''
    >>> attribute_docs(C)["momentum"]
    ('float', 'Step size and momentum of the optimizer.')
    """
    docs: dict[str, tuple[str, str]] = {}
    for cls in reversed(config_type.__mro__[:-1]):  # a subclass config inherits its bases' entries and may amend them
        docs.update(_own_attribute_docs(cls))
    return docs


def _own_attribute_docs(config_type: type) -> dict[str, tuple[str, str]]:
    """The entries of the ``Attributes`` section of ``config_type``'s own docstring."""
    lines = _sections(config_type.__dict__.get("__doc__") or "").get("Attributes", [])
    docs: dict[str, tuple[str, str]] = {}
    names: list[str] = []
    kind = ""
    meaning: list[str] = []

    def close() -> None:
        for name in names:
            docs[name] = (kind, " ".join(meaning))

    for line in lines:
        if line and not line[0].isspace():
            close()
            match = _ENTRY.match(line.strip())
            names = [n.strip() for n in match.group("names").split(",")] if match else []
            kind = (match.group("type") or "").strip() if match else ""
            meaning = []
        elif line.strip():
            meaning.append(line.strip())
    close()
    return docs


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def settings(config_type: type, quick: dict[str, Any] | None = None) -> list[Setting]:
    """One :class:`Setting` per field of the dataclass ``config_type``, in field order.

    Parameters
    ----------
    config_type : type
        A dataclass config; its ``OURS`` class attribute lists the fields whose default is ours, not the paper's.
    quick : dict, optional
        The experiment's ``--quick`` overrides.
    """
    quick = quick or {}
    hints = typing.get_type_hints(config_type)
    docs = attribute_docs(config_type)
    ours = set(getattr(config_type, "OURS", ()))
    rows = []
    for f in dataclasses.fields(config_type):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        doc_type, meaning = docs.get(f.name, ("", ""))
        rows.append(
            Setting(
                name=f.name,
                type=_type_name(hints.get(f.name, f.type)) or doc_type,
                default=default,
                quick=quick.get(f.name, default),
                ours=f.name in ours,
                meaning=meaning or "(undocumented)",
            )
        )
    return rows


def undocumented(config_type: type) -> list[str]:
    """Fields of ``config_type`` that its docstring's ``Attributes`` section does not describe."""
    docs = attribute_docs(config_type)
    return [f.name for f in dataclasses.fields(config_type) if not docs.get(f.name, ("", ""))[1]]


def settings_table(rows: list[Setting], width: int | None = None) -> str:
    """``rows`` as an aligned text table, the meaning wrapped to ``width`` (default: the terminal's, >= 100)."""
    width = width or max(100, shutil.get_terminal_size((100, 24)).columns)
    head = ("field", "type", "default", "quick", "default by", "meaning")
    cells = [(r.name, r.type, repr(r.default), repr(r.quick), "ours" if r.ours else "paper") for r in rows]
    sizes = [max(len(c[i]) for c in [head[:5], *cells]) for i in range(5)]
    indent = sum(sizes) + 2 * 5
    out = ["  ".join(h.ljust(s) for h, s in zip(head[:5], sizes)) + "  " + head[5]]
    for row, cell in zip(rows, cells):
        lead = "  ".join(c.ljust(s) for c, s in zip(cell, sizes)) + "  "
        wrapped = textwrap.wrap(row.meaning, max(30, width - indent)) or [""]
        out.append(lead + wrapped[0])
        out += [" " * indent + line for line in wrapped[1:]]
    return "\n".join(out)
