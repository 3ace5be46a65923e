"""The theory pages inside the report: docs/theory (and the findings' investigations) rendered to HTML with their math
typeset by the vendored KaTeX, so that a check's source link lands on the rendered section it cites.

A check cites ``docs/theory/<page>.md §N`` (or ``§N.k``, an item of section N); :func:`source_href` turns that into
``theory/<page>.html#<anchor of the heading of §N>``. The pages are rendered with the Markdown extensions of the docs
site (tables, a table of contents with heading anchors, arithmatex for ``$...$`` math), links between theory pages
point at their rendered copies, and links to pages the report does not carry (the API reference) are kept as text.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import markdown

__all__ = ["TheoryPages", "render_theory_pages"]

_EXTENSIONS = ["tables", "toc", "attr_list", "admonition", "pymdownx.arithmatex", "pymdownx.superfences"]
_CONFIG = {"pymdownx.arithmatex": {"generic": True}, "toc": {"permalink": False}}
_HEADING = re.compile(r'<h([1-6]) id="([^"]+)">(.*?)</h\1>', re.S)
_SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")
_PAGE_REF = re.compile(r"^(?:docs/theory/)?(?P<page>[\w-]+)(?:\.md)?\s+§\s*(?P<section>\d+(?:\.\d+)*)")
_LINK = re.compile(r'<a href="(?P<href>[^"#:]*?)(?P<anchor>#[^"]*)?">(?P<text>.*?)</a>', re.S)
_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="{up}assets/katex/katex.min.css">
<style>body {{ font-family: system-ui, sans-serif; max-width: 60rem; margin: 1rem auto; padding: 0 1rem;
color: #222; line-height: 1.5; }} table {{ border-collapse: collapse; font-size: 0.9rem; }}
th, td {{ border: 1px solid #ddd; padding: 0.2rem 0.5rem; vertical-align: top; }} code {{ font-size: 0.9em; }}
h2:target, h3:target {{ background: #fff6d5; }}</style>
<script defer src="{up}assets/katex/katex.min.js"></script>
<script defer src="{up}assets/katex/contrib/auto-render.min.js"></script>
<script defer src="{up}assets/render-math.js"></script>
</head><body><p><a href="{up}index.html">back to the report</a></p>
{body}
</body></html>
"""


class TheoryPages:
    """The rendered theory pages of a report: which pages exist and the anchor of each numbered section.

    Parameters
    ----------
    anchors : dict of str to dict of str to str
        Per page stem: section number (``"8"``, ``"8.3"``) -> the id of its heading.
    """

    def __init__(self, anchors: dict[str, dict[str, str]]):
        self.anchors = anchors

    @property
    def pages(self) -> set[str]:
        """The stems of the rendered pages."""
        return set(self.anchors)

    def source_href(self, source: str, paper: str, prefix: str = "") -> str:
        """The link of a check's ``source`` (``"docs/theory/<page>.md §8.3"``; ``"spec §N"`` is ``paper``'s page).

        Parameters
        ----------
        source : str
            The row's source column.
        paper : str
            The experiment's paper (the page ``spec`` means).
        prefix : str, default=""
            What leads from the linking page to the report folder (``"../"`` from an experiment page).

        Returns
        -------
        str
            ``<prefix>theory/<page>.html#<anchor>`` at the section's heading (the most precise one the page has:
            ``§8.3``, else ``§8``), the page's top when no heading carries the number, or ``""`` when the source
            names no page of the report.
        """
        match = _PAGE_REF.match(source.strip().replace("spec ", f"{paper} ", 1))
        if not match or match.group("page") not in self.anchors:
            return ""
        page, section = match.group("page"), match.group("section")
        sections = self.anchors[page]
        parts = section.split(".")
        anchor = next(
            (sections[".".join(parts[:k])] for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in sections), ""
        )
        return f"{prefix}theory/{page}.html" + (f"#{anchor}" if anchor else "")


def _rewrite_links(body: str, pages: set[str]) -> str:
    """Links to sibling theory pages point at their HTML copies; links the report cannot follow become text."""

    def one(match: re.Match[str]) -> str:
        href, anchor, text = match.group("href"), match.group("anchor") or "", match.group("text")
        stem = Path(href).stem if href.endswith(".md") else ""
        if not href:  # a link inside the page
            return match.group(0)
        if stem in pages:
            return f'<a href="{stem}.html{anchor}">{text}</a>'
        return text

    return _LINK.sub(one, body)


def render_theory_pages(docs: Path, root: Path) -> TheoryPages:
    """Render ``docs/theory/*.md`` (and ``docs/findings.md``) into ``root/theory/*.html`` with KaTeX beside them.

    Parameters
    ----------
    docs : pathlib.Path
        The repository's ``docs`` folder (absent in an installed package: then nothing is rendered).
    root : pathlib.Path
        The report folder.

    Returns
    -------
    TheoryPages
        The rendered pages and the anchors of their numbered sections.
    """
    theory = docs / "theory"
    if not theory.is_dir():
        return TheoryPages({})
    (root / "theory").mkdir(exist_ok=True)
    shutil.copytree(docs / "assets" / "katex", root / "assets" / "katex", dirs_exist_ok=True)
    shutil.copyfile(docs / "assets" / "render-math.js", root / "assets" / "render-math.js")
    sources = sorted(theory.glob("*.md")) + ([docs / "findings.md"] if (docs / "findings.md").is_file() else [])
    stems = {page.stem for page in sources}
    anchors: dict[str, dict[str, str]] = {}
    for page in sources:
        body = markdown.markdown(page.read_text(encoding="utf-8"), extensions=_EXTENSIONS, extension_configs=_CONFIG)
        sections = {}
        for _, anchor, heading in _HEADING.findall(body):
            number = _SECTION.search(html.unescape(re.sub(r"<[^>]+>", "", heading)))
            if number and number.group(1) not in sections:
                sections[number.group(1)] = anchor
        anchors[page.stem] = sections
        title = page.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
        text = _TEMPLATE.format(title=html.escape(title), up="../", body=_rewrite_links(body, stems))
        (root / "theory" / f"{page.stem}.html").write_text(text, encoding="utf-8")
    return TheoryPages(anchors)
