"""Every experiment has its figures on the site (docs/experiments/figures, from `make site-figures`) and one of them
in the gallery."""

import re
from pathlib import Path

from attnlab.experiments import list_experiments

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "experiments" / "figures"


def test_every_experiment_has_a_committed_figure():
    missing = [e.name for e in list_experiments() if not list((FIGURES / e.name).glob("*.png"))]
    assert not missing, (
        f"no figure on the site for {missing}: run make site-figures and commit docs/experiments/figures"
    )


def test_the_gallery_shows_one_existing_figure_per_experiment():
    text = (ROOT / "docs" / "gallery.md").read_text()
    shown = dict(re.findall(r"^!\[([^\]]+)\]\(([^)]+)\)$", text, flags=re.M))
    assert set(shown) == {e.name for e in list_experiments()}
    assert all((ROOT / "docs" / path).is_file() for path in shown.values()), shown
    assert "- Gallery: gallery.md" in (ROOT / "mkdocs.yml").read_text()


def test_every_experiment_has_a_page_with_its_figures_and_check_table_in_the_navigation():
    navigation = (ROOT / "mkdocs.yml").read_text()
    for experiment in list_experiments():
        page = ROOT / "docs" / "experiments" / "runs" / f"{experiment.name}.md"
        assert page.is_file(), f"no page for {experiment.name}: run make site-figures"
        text = page.read_text()
        assert (FIGURES / experiment.name / "checks.csv").is_file()
        figures = re.findall(r"!\[[^\]]*\]\(\.\./figures/([^)]+)\)", text)
        assert figures and all((FIGURES / f).is_file() for f in figures), (experiment.name, figures)
        assert (
            "| claim | predicted | measured | tolerance | verdict | margin | source |" in text or "No checks." in text
        )
        assert f"- experiments/runs/{experiment.name}.md" in navigation
