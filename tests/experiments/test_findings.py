"""Every finding links to a written investigation: a section of docs/findings.md that exists."""

from pathlib import Path

from markdown.extensions.toc import slugify

from attnlab.experiments import list_experiments

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _anchors(page: Path) -> set[str]:
    return {slugify(line.lstrip("#").strip(), "-") for line in page.read_text().splitlines() if line.startswith("#")}


def _findings():
    for experiment in list_experiments():
        for claim in experiment.claims:
            if claim.finding is not None:
                yield experiment.name, claim


def test_the_findings_page_explains_what_a_finding_is():
    assert "how-a-check-is-declared" in _anchors(DOCS / "findings.md")


def _investigations(page: Path) -> set[str]:
    """The anchors of the sections under the page's "## The findings"."""
    text = page.read_text().split("## The findings", 1)[1]
    return {slugify(line.lstrip("#").strip(), "-") for line in text.splitlines() if line.startswith("### ")}


def test_the_findings_page_has_a_section_for_each_finding_and_no_other():
    linked = {claim.finding.investigation.partition("#")[2] for _, claim in _findings()}
    assert _investigations(DOCS / "findings.md") == linked


def _check_investigation(name, claim):
    page, _, anchor = claim.finding.investigation.partition("#")
    assert page.startswith("docs/"), f"{name}: {claim.finding.investigation} is not a page of docs/"
    path = DOCS.parent / page
    assert path.is_file(), f"{name}: the investigation page {page} does not exist"
    assert anchor in _anchors(path), f"{name}: {page} has no section #{anchor}"
    text = path.read_text()
    section = text[
        text.index(next(line for line in text.splitlines() if slugify(line.lstrip("#").strip(), "-") == anchor)) :
    ]
    assert "ruled out" in section.lower(), f"{name}: the investigation #{anchor} does not say what was ruled out"


def test_each_finding_links_to_its_investigation():
    for name, claim in _findings():
        _check_investigation(name, claim)
