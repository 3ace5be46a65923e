"""The coverage tables of docs/theory are generated from the declared checks and are current."""

from pathlib import Path

import pytest

from attnlab._validation import ValidationError
from attnlab.experiments.catalog import PAPER_IDS
from attnlab.experiments.coverage import coverage_rows, paper_results, update_page
from attnlab.verify import PaperResult

DOCS = Path(__file__).resolve().parents[2] / "docs" / "theory"


@pytest.mark.parametrize("paper", [p for p in PAPER_IDS])
def test_theory_page_coverage_table_is_current(paper):
    if not paper_results(paper):
        pytest.fail(f"{paper} declares no results (register_results in its experiment package)")
    path = DOCS / f"{paper}.md"
    assert update_page(path, paper) == path.read_text(), (
        f"{path.name}: coverage table out of date; run python -m attnlab.experiments.coverage --write"
    )


@pytest.mark.parametrize("paper", [p for p in PAPER_IDS])
def test_every_checked_result_has_a_claim_and_every_claim_a_result(paper):
    rows = coverage_rows(paper)  # raises on a checked result without a claim, or a claim of an undeclared result
    assert rows


def test_a_result_not_checked_must_say_why():
    with pytest.raises(ValidationError, match="needs a note"):
        PaperResult("001:Lem3", "gradient correlation", status="unit")
