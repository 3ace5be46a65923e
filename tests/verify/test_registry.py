"""A registry of one's own: experiments registered without a catalog entry, and each paper's coverage table."""

from dataclasses import dataclass

import pytest

from attnlab._validation import ValidationError
from attnlab.verify import Claim, Experiment, ExperimentResult, Falsifier, PaperResult, Registry
from attnlab.verify.coverage import END, START


@dataclass(frozen=True)
class _Config:
    seed: int = 0


def _run(config, ctx):  # never called: the table reads the declared claims only
    return ExperimentResult(frame=None, checks=[])


@pytest.fixture
def registry():
    registry = Registry((), package="my_experiments", papers={"my-paper": "900"})
    claim = Claim("the margin grows", "900:Thm1", "docs/theory/my-paper.md §2", "halved-step")
    halved = Falsifier("halved-step", "the step halved", "math:sqrt", lambda f: f, "mechanism")
    registry.register(
        Experiment(
            name="my.exp",
            config_type=_Config,
            run=_run,
            paper="my-paper",
            summary="one check",
            claims=(claim,),
            falsifiers=(halved,),
        )
    )
    registry.register_results(
        "my-paper",
        (PaperResult("900:Thm1", "margin growth"), PaperResult("900:Lem2", "a lemma", "not checkable", "no size")),
    )
    return registry


def test_coverage_rows_name_the_claims_of_each_result(registry):
    rows = registry.coverage_rows("my-paper")
    assert [r["id"] for r in rows] == ["900:Thm1", "900:Lem2"]
    assert rows[0]["status"] == "checked" and "`my.exp`: the margin grows (theory)" in rows[0]["checks"]
    assert rows[1]["note"] == "no size"
    assert registry.coverage_rows("another-paper") == []


def test_coverage_page_replaces_only_the_block(registry):
    page = f"# My paper\n\ntext\n\n{START}\nold table\n{END}\n\nafter\n"
    new = registry.coverage_page(page, "my-paper")
    assert new.startswith("# My paper\n\ntext\n\n" + START) and new.endswith(END + "\n\nafter\n")
    assert "old table" not in new and "**Coverage:** 1 of the paper's 2 own numbered results are covered" in new
    assert registry.coverage_page(new, "my-paper") == new  # current: unchanged
    appended = registry.coverage_page("# My paper\n", "my-paper")
    assert "## Coverage of the paper's results" in appended and appended.rstrip().endswith(END)


def test_a_checked_result_without_a_claim_is_refused(registry):
    registry.register_results(
        "my-paper", (PaperResult("900:Thm1", "margin growth"), PaperResult("900:Thm3", "unclaimed"))
    )
    with pytest.raises(ValidationError, match="900:Thm3 is marked checked but no declared theory claim names it"):
        registry.coverage_rows("my-paper")
