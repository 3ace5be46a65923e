"""Readable text for the report: ASCII math as Unicode with HTML sub- and superscripts, notes without raw dicts.

Claims, tolerances and notes are written in ASCII (``||W_T|| <= eta T``, ``t^(1/3)``, ``phi_opt``) so that
``checks.csv`` reads anywhere. The report shows them as ``‖W<sub>T</sub>‖ ≤ η T``: Unicode letters and symbols
plus ``<sub>``/``<sup>``. That needs no script, font or network (KaTeX or MathJax would need both a script and a
LaTeX source we do not have), the text stays selectable and searchable, and every browser draws it.
"""

from __future__ import annotations

import ast
import html
import re
from typing import Any

__all__ = ["math_html", "note_html"]

_SYMBOLS = {"||": "‖", "<=": "≤", ">=": "≥", "!=": "≠", "->": "→", "+-": "±"}
_GREEK = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ε",
    "eps": "ε",
    "eta": "η",
    "theta": "θ",
    "lambda": "λ",
    "mu": "μ",
    "nabla": "∇",
    "xi": "ξ",
    "rho": "ρ",
    "sigma": "σ",
    "Sigma": "Σ",
    "tau": "τ",
    "phi": "φ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Phi": "Φ",
    "Omega": "Ω",
}
_SYMBOL = re.compile("|".join(re.escape(s) for s in _SYMBOLS))
_GREEK_WORD = re.compile(  # omega0 is omega with subscript 0
    r"(?<![A-Za-z])(" + "|".join(sorted(_GREEK, key=len, reverse=True)) + r")([0-9]*)(?![A-Za-z0-9])"
)
# one pattern, read left to right: a braced or parenthesised superscript, a plain one, a braced or parenthesised
# subscript, a short subscript (W_mm, L_*, phi_opt; never a code name such as patch_embed)
_SCRIPT = re.compile(
    r"\^\{(?P<sup_brace>[^{}]*)\}"
    r"|\^\((?P<sup_paren>[^()]*)\)"
    r"|\^(?P<sup>-?[0-9.]+(?:/[0-9]+)?|-[A-Za-zα-ωΓ-Ω]+(?:_[A-Za-z0-9]{1,4})?|[A-Za-zα-ωΓ-Ω]+)"
    r"|_\{(?P<sub_brace>[^{}]*)\}"
    r"|_\((?P<sub_paren>[^()]*)\)"
    r"|(?<=[A-Za-z0-9α-ωΓ-Ω∇ℓ‖)*])_(?P<sub>[0-9]+\.[0-9]+|[A-Za-z0-9*]{1,4})(?![A-Za-z0-9])"
)
_LONGEST_BASE = 3  # letters before "_": W_t, phi_opt (phi is one Greek letter by then), but not svm_margin


_ELL = re.compile(r"(?<![A-Za-z])l(?=_)")  # l_p, l_1: the norm's script l


def _unicode(text: str) -> str:
    text = _ELL.sub("ℓ", _SYMBOL.sub(lambda m: _SYMBOLS[m.group(0)], text))
    return _GREEK_WORD.sub(lambda m: _GREEK[m.group(1)] + (f"_{m.group(2)}" if m.group(2) else ""), text)


def _base_is_short(text: str, end: int) -> bool:
    """Whether the letters before ``text[end]`` make a formula's base: short, and not a name's part after "." or
    ":" (``config.nuc_rtol``, ``polyak:max_step`` are identifiers, not ``nuc`` with a subscript)."""
    start = end
    while start > 0 and text[start - 1].isascii() and text[start - 1].isalpha():
        start -= 1
    return end - start <= _LONGEST_BASE and (start == 0 or text[start - 1] not in ".:")


def math_html(text: Any) -> str:
    """HTML for an ASCII formula or sentence: Greek letters, ‖, ≤, ≥, →, ± and sub-/superscripts; all else escaped.

    Parameters
    ----------
    text : object
        A claim, a value or a note; ``str(text)`` is rendered.

    Returns
    -------
    str
        Safe HTML: every character that is not one of our tags is escaped.

    Examples
    --------
    >>> math_html("||W_t|| <= eta t^(1/3)")
    '‖W<sub>t</sub>‖ ≤ η t<sup>1/3</sup>'
    >>> math_html("a <b> tag")
    'a &lt;b&gt; tag'
    """
    text = _unicode(str(text))
    out, last = [], 0
    for match in _SCRIPT.finditer(text):
        kind = match.lastgroup
        if kind == "sub" and not _base_is_short(text, match.start()):
            continue
        out.append(html.escape(text[last : match.start()]))
        tag = "sup" if kind.startswith("sup") else "sub"
        inner = match.group(kind)  # an exponent may carry its own subscript: e^-Delta_max (but W^mm_q is W^{mm}_q)
        out.append(f"<{tag}>{math_html(inner) if tag == 'sup' else html.escape(inner)}</{tag}>")
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def _number(value: Any) -> str:
    """A number to four significant digits (``-4.178``, ``2.142e-12``); anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.4g}"


def _literal_html(value: Any) -> str:
    """A dict or list from a note: a small table for a dict of dicts, else ``key = value`` pairs."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        columns = list(dict.fromkeys(k for row in value.values() for k in row))
        head = "".join(f"<th>{math_html(c)}</th>" for c in ["", *columns])
        rows = "".join(
            f"<tr><th>{math_html(_number(key))}</th>"
            + "".join(f"<td>{html.escape(_number(row.get(c, '')))}</td>" for c in columns)
            + "</tr>"
            for key, row in value.items()
        )
        return f'<table class="note-table"><tr>{head}</tr>{rows}</table>'
    if isinstance(value, dict):
        return ", ".join(f"{math_html(_number(k))} = {html.escape(_number(v))}" for k, v in value.items())
    return "[" + ", ".join(html.escape(_number(v)) for v in value) + "]"


def _literals(text: str) -> list[tuple[int, int, Any]]:
    """Spans ``(start, end, value)`` of the Python dict and list literals printed into ``text``."""
    spans, i = [], 0
    while i < len(text):
        if text[i] not in "{[":
            i += 1
            continue
        depth, j = 0, i
        for j in range(i, len(text)):
            depth += text[j] in "{[" and 1 or -(text[j] in "}]")
            if depth == 0:
                break
        try:
            value = ast.literal_eval(text[i : j + 1])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):  # {[1]}: a set of lists
            i += 1
            continue
        if isinstance(value, (dict, list)):
            spans.append((i, j + 1, value))
            i = j + 1
        else:
            i += 1
    return spans


def note_html(note: Any) -> str:
    """HTML for one note of a run: printed dicts and lists become readable pairs or a table; an aligned table of
    text (a printed DataFrame) keeps its columns.

    Examples
    --------
    >>> note_html("final log L per method: {'GD': -4.178435037946123, 'NGD': -70.71039426549262}")
    'final log L per method: GD = -4.178, NGD = -70.71'
    """
    text = str(note)
    if re.search(r"\n.*\S {2,}\S", text):  # a printed table: keep it in columns
        return f'<pre class="note-pre">{html.escape(text)}</pre>'
    out, last = [], 0
    for start, end, value in _literals(text):
        out.append(math_html(text[last:start]))
        out.append(_literal_html(value))
        last = end
    out.append(math_html(text[last:]))
    return "".join(out)
