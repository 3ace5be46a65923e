"""Links both ways between the theory and the API reference of the built site, added after the build.

- An API entry's citation of its theory section ("Spec: implicit-bias-ngd §4 A2", "docs/theory/kq-nuclear-norm.md §3")
  becomes a link to that section of the rendered theory page (the section's own anchor, read off the built page).
- A prose page's code span naming an ``attnlab`` object (``attnlab.optim.NormalizedGD``) becomes a link to its entry
  in the API reference (the entry's id, read off the built API pages); a module links to its subpackage's page.

It works on the written HTML (mkdocs_hooks.py calls :func:`link_site` after the build), where every page's anchors
are known, and leaves text inside links and code blocks alone.
"""

from __future__ import annotations

import importlib
import posixpath
import re
from pathlib import Path

_TAG = re.compile(r"(<[^>]+>)")
_HEADING = re.compile(r'<h2 id="(?P<id>[^"]+)">§(?P<n>\d+)\b')
_API_ID = re.compile(r'id="(attnlab\.[^"]+)"')
_CODE_NAME = re.compile(r"^attnlab(?:\.[A-Za-z_]\w*)+$")
PROSE = ("theory/", "experiments/", "tutorial/", "cli/", "notebooks/", "sweeps.html", "architecture.html", "index.html")


def theory_anchors(site: Path) -> dict[str, dict[str, str]]:
    """For each theory page (by paper), its section numbers and their anchors: ``{"implicit-bias-ngd": {"4": ...}}``."""
    return {
        page.stem: {m["n"]: m["id"] for m in _HEADING.finditer(page.read_text(encoding="utf-8"))}
        for page in sorted((site / "theory").glob("*.html"))
    }


def api_ids(site: Path) -> dict[str, str]:
    """Every entry of the API reference: its id and the page (relative to the site) that holds it."""
    ids = {}
    for page in sorted((site / "api").glob("*.html")):
        for name in _API_ID.findall(page.read_text(encoding="utf-8")):
            ids.setdefault(name, f"api/{page.name}")
    return ids


def _segments(html: str):
    """The page cut into tags and text, each text with whether it sits inside a link or a code block."""
    in_link = in_pre = 0
    for part in _TAG.split(html):
        if part.startswith("<"):
            tag = re.match(r"</?([a-zA-Z0-9]+)", part)
            name = tag[1].lower() if tag else ""
            closing = part.startswith("</")
            if name == "a":
                in_link += -1 if closing else 1
            elif name == "pre":
                in_pre += -1 if closing else 1
            yield part, True, in_link > 0 or in_pre > 0
        else:
            yield part, False, in_link > 0 or in_pre > 0


def link_citations(html: str, page: str, anchors: dict[str, dict[str, str]]) -> str:
    """Each ``<paper> §N`` (or ``docs/theory/<paper>.md §N``) outside links and code blocks, linked to its section."""
    papers = "|".join(re.escape(p) for p in sorted(anchors, key=len, reverse=True))
    if not papers:
        return html
    citation = re.compile(rf"(?:docs/theory/)?\b(?P<paper>{papers})(?:\.md)? §(?P<n>\d+)(?:\.\d+)?")

    def link(match: re.Match) -> str:
        target = posixpath.relpath(f"theory/{match['paper']}.html", posixpath.dirname(page) or ".")
        anchor = anchors[match["paper"]].get(match["n"])
        return f'<a href="{target}{"#" + anchor if anchor else ""}">{match[0]}</a>'

    return "".join(part if is_tag or inside else citation.sub(link, part) for part, is_tag, inside in _segments(html))


def _resolve(name: str, ids: dict[str, str], site: Path) -> tuple[str, str | None] | None:
    """The API page and anchor that document ``name`` (an ``attnlab`` dotted name), or None."""
    if name in ids:
        return ids[name], name
    parts = name.split(".")
    obj, module = None, None
    for cut in range(len(parts), 1, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        obj = module
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        break
    if obj is None:
        return None
    page = f"api/{parts[1]}.html"
    if obj is module and len(parts) == len(module.__name__.split(".")):  # a module: its subpackage's page
        if not (site / page).is_file():
            return None
        return page, f"attnlab.{parts[1]}" if f"attnlab.{parts[1]}" in ids else None
    canonical = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    if canonical in ids:
        return ids[canonical], canonical
    last = parts[-1]
    same = [i for i in ids if i.startswith(f"attnlab.{parts[1]}.") and i.rsplit(".", 1)[-1] == last]
    return (ids[same[0]], same[0]) if len(same) == 1 else None


def link_api_names(html: str, page: str, ids: dict[str, str], site: Path) -> str:
    """Each ``<code>attnlab.x.y</code>`` outside links and code blocks, linked to its API entry when it has one."""
    out, parts = [], list(_segments(html))
    i = 0
    while i < len(parts):
        part, is_tag, inside = parts[i]
        if (
            is_tag
            and not inside
            and part == "<code>"
            and i + 2 < len(parts)
            and _CODE_NAME.match(parts[i + 1][0])
            and parts[i + 2][0] == "</code>"
        ):
            target = _resolve(parts[i + 1][0], ids, site)
            if target is not None:
                href = posixpath.relpath(target[0], posixpath.dirname(page) or ".")
                anchor = f"#{target[1]}" if target[1] else ""
                out.append(f'<a href="{href}{anchor}"><code>{parts[i + 1][0]}</code></a>')
                i += 3
                continue
        out.append(part)
        i += 1
    return "".join(out)


def link_site(site: Path) -> None:
    """Add both kinds of links to every page of the built site in ``site``."""
    anchors, ids = theory_anchors(site), api_ids(site)
    for path in sorted(site.rglob("*.html")):
        page = path.relative_to(site).as_posix()
        html = path.read_text(encoding="utf-8")
        linked = html
        if page.startswith("api/"):
            linked = link_citations(linked, page, anchors)
        elif page.startswith(PROSE):
            linked = link_api_names(linked, page, ids, site)
        if linked != html:
            path.write_text(linked, encoding="utf-8")
