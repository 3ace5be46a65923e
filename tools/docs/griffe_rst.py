"""Griffe extension for the site: the reStructuredText bits of attnlab's numpydoc docstrings, as Markdown.

The docstrings are written for ``help()`` and numpydoc; mkdocstrings renders their text as Markdown. This turns
``.. math::`` blocks and ``:math:`` roles into the ``$$ $$`` and ``$ $`` that pymdownx.arithmatex hands to KaTeX,
and Sphinx cross-reference roles (``:class:`~attnlab.optim.NormalizedGD```) into inline code. A ``.. optimizers::``
line becomes the optimizer registry's list (``attnlab.optim.registry.document``, which fills the same marker in
the imported docstrings), so the site's optimizer lists are generated from the registry.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import griffe

_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_XREF_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|ref):`~?([^`]+)`")
_MATH_DIRECTIVE = re.compile(r"^(?P<indent>[ \t]*)\.\. math::[ \t]*(?P<inline>.*)$")


def _math_blocks(text: str) -> str:
    """Each ``.. math::`` directive (inline or with an indented body) as a ``$$`` display block."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _MATH_DIRECTIVE.match(lines[i])
        if match is None:
            out.append(lines[i])
            i += 1
            continue
        indent = match["indent"]
        body = [match["inline"]] if match["inline"].strip() else []
        i += 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            body.append(lines[i])
            i += 1
        latex = textwrap.dedent("\n".join(body)).strip()
        if "&" in latex or "\\\\" in latex:
            latex = "\\begin{aligned}\n" + latex + "\n\\end{aligned}"
        out.extend([f"{indent}$$", *(indent + line for line in latex.split("\n")), f"{indent}$$", ""])
    return "\n".join(out)


def rst_to_markdown(text: str) -> str:
    """The docstring ``text`` with its math and cross-reference roles in the site's Markdown."""
    if ".. optimizers::" in text:
        from attnlab.optim.registry import document  # imports torch: only for the docstrings that list optimizers

        text = document(text)
    text = _math_blocks(text)
    text = _MATH_ROLE.sub(lambda m: f"${m[1]}$", text)
    return _XREF_ROLE.sub(lambda m: f"`{m[1].rsplit('.', 1)[-1] if m[0].count('~') else m[1]}`", text)


class RstToMarkdown(griffe.Extension):
    """Rewrites every docstring griffe loads (see :func:`rst_to_markdown`)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rst_to_markdown(obj.docstring.value)
