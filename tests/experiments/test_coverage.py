"""The coverage tables of docs/theory are generated from the declared checks and are current."""

from pathlib import Path

import pytest

from attnlab._validation import ValidationError
from attnlab.experiments.catalog import PAPER_IDS
from attnlab.experiments.coverage import coverage_rows, paper_results, update_page
from attnlab.experiments.inventory import OWN_RESULTS
from attnlab.verify import PaperResult
from attnlab.verify.coverage import EXTENSION

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


@pytest.mark.parametrize("paper", [p for p in PAPER_IDS])
def test_the_coverage_table_lists_exactly_the_inventorys_own_results(paper):
    paper_id = PAPER_IDS[paper]
    registered = {r.id for r in paper_results(paper) if EXTENSION not in r.id}
    own = set(OWN_RESULTS[paper_id])
    assert not own - registered, f"{paper_id}: results of the inventory missing from the table: {own - registered}"
    assert not registered - own, f"{paper_id}: ids counted that are not own results of the paper: {registered - own}"


def test_the_inventory_counts_each_papers_own_results():
    assert {p: len(r) for p, r in OWN_RESULTS.items()} == {"000": 28, "001": 19, "002": 18, "003": 6, "004": 28}
    ratings = [rating for results in OWN_RESULTS.values() for rating in results.values()]
    assert (ratings.count("yes"), ratings.count("partly"), ratings.count("no")) == (15, 67, 17)
