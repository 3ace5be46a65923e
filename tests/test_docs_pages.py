"""The theory and experiment pages are written for a reader of the rendered site: every formula is LaTeX (typeset by
KaTeX), never ASCII math in a code span, and every list renders as a list."""

import re
from functools import cache
from pathlib import Path

import markdown
import pytest
from mkdocs.config import load_config

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs" / "theory").glob("*.md")) + sorted((ROOT / "docs" / "experiments").glob("*.md"))
GREEK = (
    "alpha beta gamma delta Delta eta theta Theta lambda mu nu xi rho sigma Sigma tau phi psi omega Omega eps "
    "epsilon kappa".split()
)
# ASCII math that no code span holds unless it quotes a command: a norm, an arrow, a comparison, a LaTeX subscript
STRONG = re.compile(r"\|\||->|<=|>=|_\{")
COMMAND = re.compile(r"^(?:attnlab|make|python|pytest|pip|git)\b|^--")
# ASCII math that a name of code may hold too: a superscript or transpose, a bare Greek letter, a symbol with a
# subscript (W_mm, phi_opt)
WEAK = re.compile(
    r"\^\(|\^\{|\^T\b|\^-"
    rf"|^(?:{'|'.join(GREEK)})$"
    rf"|^(?:[A-Za-z]|{'|'.join(GREEK)})_[A-Za-z0-9]+$"
)
# a span that names code: a command, an option, a file, a dotted name, a call with keyword arguments, a quoted string
CODE = re.compile(
    r"^(?:attnlab|make|python|pytest|pip|git)\b|^--|^\.|^[\w.-]*/[\w./-]*$|\.(?:py|md|csv|parquet|npz|json|png)\b"
    r"|^[A-Za-z_]\w*(?:\.\w+)+|^[A-Za-z_]\w*\(.*\w=|^[\"']"
)


def _prose(text: str) -> str:
    """The page without its generated coverage block and fenced code (both are quoted as they are)."""
    text = re.sub(r"<!-- coverage:start.*?<!-- coverage:end -->", "", text, flags=re.S)
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def formula_spans(text: str) -> list[str]:
    """The code spans of a Markdown page that hold ASCII math rather than code."""
    spans = re.findall(r"(?<!`)`([^`\n]+)`(?!`)", _prose(text))
    spans = [span.strip() for span in spans]
    return [s for s in spans if (STRONG.search(s) and not COMMAND.search(s)) or (WEAK.search(s) and not CODE.search(s))]


@cache
def _markdown() -> markdown.Markdown:
    """A Markdown converter with the site's extensions and their settings (mkdocs.yml)."""
    config = load_config(str(ROOT / "mkdocs.yml"))
    return markdown.Markdown(extensions=config["markdown_extensions"], extension_configs=config["mdx_configs"])


def run_on_lists(text: str) -> list[str]:
    """The paragraphs of the rendered page that hold a list written without the blank line before it."""
    html = _markdown().reset().convert(text)
    paragraphs = re.findall(r"<p>(.*?)</p>", html, flags=re.S)
    return [p[:120] for p in paragraphs if re.search(r"\n\s*(?:\d+\.|[-*+])\s", p)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_page_has_no_formula_in_a_code_span(page):
    spans = formula_spans(page.read_text(encoding="utf-8"))
    assert not spans, f"write these as LaTeX ($...$), not code: {spans}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_page_lists_render_as_lists(page, monkeypatch):
    monkeypatch.chdir(ROOT)  # snippets are included relative to the repository root
    broken = run_on_lists(page.read_text(encoding="utf-8"))
    assert not broken, f"a list with no blank line before it renders as a paragraph: {broken}"


def test_the_checks_find_a_formula_and_a_run_on_list():
    """The two checks above fail on a page written as the theory pages once were."""
    old = "## §8 Predictions\nFixed decoder:\n1. Lemma 7: `||W_t|| / (eta t) -> 1`.\n2. Lemma 6 at every `W_mm`.\n"
    assert formula_spans(old) == ["||W_t|| / (eta t) -> 1", "W_mm"]
    assert len(run_on_lists(old)) == 1
    fixed = (
        "## §8 Predictions\nFixed decoder:\n\n1. Lemma 7: $\\|W_t\\| / (\\eta t) \\to 1$.\n2. See `attnlab.optim`.\n"
    )
    assert formula_spans(fixed) == [] and run_on_lists(fixed) == []
