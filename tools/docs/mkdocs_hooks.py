"""MkDocs hooks for the site: the repository's root pages as site pages, and links that leave docs/ as text.

README.md (up to its Development section), BENCHMARKS.md and CHANGELOG.md live at the repository root, where
GitHub shows them; the site serves them as index.md, benchmarks.md and changelog.md. Their links, written relative
to the root, are rewritten to the site's pages; a link to a file outside docs/ that the site does not serve (an
example script, the license) becomes its text in code, so that --strict sees no broken link.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

_ROOT = Path(__file__).resolve().parents[2]
# site page -> (root file, the heading before which the page stops; None: the whole file)
_ROOT_PAGES = {
    "index.md": ("README.md", "## Development"),
    "benchmarks.md": ("BENCHMARKS.md", None),
    "changelog.md": ("CHANGELOG.md", None),
}
_SERVED = {root: page for page, (root, _) in _ROOT_PAGES.items()}
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)")


def on_files(files: Files, config) -> Files:
    for page, (root_file, stop) in _ROOT_PAGES.items():
        text = (_ROOT / root_file).read_text(encoding="utf-8")
        if stop is not None:
            text = text.split("\n" + stop + "\n", 1)[0]
        files.append(File.generated(config, page, content=text))
    return files


def _repo_path(page_src: str, target: str) -> str:
    """The link's target as a path from the repository root (pages under docs/, root pages at the root)."""
    base = "" if page_src in _ROOT_PAGES else posixpath.dirname("docs/" + page_src)
    return posixpath.normpath(posixpath.join(base, target))


def _sibling(name: str):
    """A module of tools/docs, beside this file (hooks are loaded by path, not as a package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cli_reference() -> str:
    """The generated command-line reference (tools/docs/cli_reference.py)."""
    return _sibling("cli_reference").cli_reference()


def on_post_build(config) -> None:
    """Links both ways between theory pages and the API reference (tools/docs/crosslinks.py)."""
    _sibling("crosslinks").link_site(Path(config["site_dir"]))


def on_page_markdown(markdown: str, page, config, files: Files) -> str:
    src = page.file.src_uri
    if src == "cli/index.md":  # the command-line reference, generated from the click commands at every build
        if "<!-- cli-reference -->" not in markdown:
            raise ValueError("docs/cli/index.md lost its <!-- cli-reference --> marker: the CLI reference goes there")
        markdown = markdown.replace("<!-- cli-reference -->", _cli_reference())

    def rewrite(match: re.Match) -> str:
        text, target = match["text"], match["target"]
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            return match[0]
        path, _, anchor = target.partition("#")
        repo_path = _repo_path(src, path)
        if repo_path.startswith("docs/"):
            site_path = repo_path.removeprefix("docs/")
        elif repo_path in _SERVED:
            site_path = _SERVED[repo_path]
        else:
            return text if text.startswith("`") else f"`{text}`"
        relative = posixpath.relpath(site_path, posixpath.dirname(src) or ".")
        return f"[{text}]({relative}{'#' + anchor if anchor else ''})"

    return _LINK.sub(rewrite, markdown)


_MD_LINK = re.compile(r'href="(?P<path>[^":#"]+)\.md(?P<anchor>#[^"]*)?"')


def on_post_page(output: str, page, config) -> str:
    """A notebook page (mkdocs-jupyter renders its Markdown cells itself): its links to pages, written to the
    Markdown source as on every other page, go to their HTML (the site has no directory URLs)."""
    if page.file.src_uri.startswith("notebooks/") and page.file.src_uri.endswith(".py"):
        return _MD_LINK.sub(lambda m: f'href="{m["path"]}.html{m["anchor"] or ""}"', output)
    return output
