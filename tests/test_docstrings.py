"""Every public name of attnlab (each package's ``__all__``) has a numpydoc docstring: a Parameters section when it
takes arguments and a Returns (or Yields) section when it returns a value; public methods of public classes too.

Names that do not meet this yet are listed, one a line, in tests/docstring_debt.txt: the list may only shrink. A
name that is fixed must leave the list (the test says so), and a new offender fails.
"""

import importlib
import inspect
import re
import typing

import attnlab

SUBPACKAGES = [name for name in attnlab.__all__ if name not in ("ValidationError", "__version__", "train")]


def _section(doc: str, *titles: str) -> bool:
    return any(re.search(rf"^\s*{title}\s*\n\s*-{{3,}}\s*$", doc, re.MULTILINE) for title in titles)


def _arguments(function) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return []
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    named = [name for name, p in parameters.items() if name not in ("self", "cls") and p.kind not in variadic]
    # an inherited object.__init__ or Exception.__init__, or typing.Protocol's placeholder, takes (*args, **kwargs):
    # nothing to document
    if named or not inspect.isfunction(function) or function.__module__ == "typing":
        return named
    return [name for name, p in parameters.items() if p.kind in variadic]


def _returns_value(function) -> bool:
    try:
        annotation = inspect.signature(function).return_annotation
    except (TypeError, ValueError):
        return False
    return annotation not in (inspect.Signature.empty, None, "None")


def _problems(path: str, value) -> list[str]:
    """What the docstring of ``value`` (public as ``path``) lacks, one string a lack."""
    doc = inspect.getdoc(value) or ""
    if inspect.ismodule(value) or not (inspect.isclass(value) or callable(value)):
        return []  # constants and modules: the API page and the module docstring speak for them
    if not doc.strip():
        return [f"{path}: no docstring"]
    lacks = []
    signature_of = value.__init__ if inspect.isclass(value) else value
    # a dataclass documents its generated __init__'s arguments as Attributes
    if _arguments(signature_of) and not _section(doc, "Parameters", "Attributes"):
        lacks.append(f"{path}: no Parameters section")
    if not inspect.isclass(value) and _returns_value(value) and not _section(doc, "Returns", "Yields"):
        lacks.append(f"{path}: no Returns section")
    if inspect.isclass(value):
        for name, member in vars(value).items():
            if name.startswith("_"):
                continue
            function = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
            if not inspect.isfunction(function):
                continue
            # an override of a documented method inherits its docstring
            member_doc = (
                inspect.getdoc(getattr(value, name)) if not isinstance(member, property) else inspect.getdoc(member)
            ) or ""
            if not member_doc.strip():
                lacks.append(f"{path}.{name}: no docstring")
            elif not isinstance(member, property):
                if _arguments(function) and not _section(member_doc, "Parameters"):
                    lacks.append(f"{path}.{name}: no Parameters section")
                if _returns_value(function) and not _section(member_doc, "Returns", "Yields"):
                    lacks.append(f"{path}.{name}: no Returns section")
    return lacks


def offenders() -> set[str]:
    found = set()
    for package in SUBPACKAGES:
        module = importlib.import_module(f"attnlab.{package}")
        for name in module.__all__:
            found.update(_problems(f"attnlab.{package}.{name}", getattr(module, name)))
    for name in ("train", "ValidationError"):
        found.update(_problems(f"attnlab.{name}", getattr(attnlab, name)))
    return found


def test_public_docstrings_have_parameters_and_returns():
    found = sorted(offenders())
    assert not found, "public names whose docstring lacks a section:\n" + "\n".join(found)


def test_the_check_sees_a_missing_section():
    def undocumented(x: int) -> int:
        return x

    def documented(x: int) -> int:
        """Doubles.

        Parameters
        ----------
        x : int
            A number.

        Returns
        -------
        int
            Twice ``x``.
        """
        return 2 * x

    assert _problems("u", undocumented) == ["u: no docstring"]
    undocumented.__doc__ = "Only a summary."
    assert _problems("u", undocumented) == ["u: no Parameters section", "u: no Returns section"]
    assert _problems("d", documented) == []

    class Call(typing.Protocol):
        """A callable type: its signature is its ``__call__``'s, and it has no ``__init__`` to document."""

        def __call__(self, x: int, /) -> int: ...

    assert _problems("c", Call) == []
