"""The report's pages and counts: a page per experiment however its name is spelled, property counts in
summary.json and paper_counts.csv, the registry's coverage labelled as such, damaged runs told apart from errors,
and the settings of the runs in the subtitle."""

import dataclasses
import json
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner

from attnlab.cli import main
from attnlab.experiments import list_experiments, registry
from attnlab.report import build_report, reproduce
from attnlab.report.reproduce import PAPER_COUNT_COLUMNS
from attnlab.runner import read_index
from attnlab.verify import Claim, Experiment, ExperimentResult, Falsifier

OUTPUT_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli" / "output.md"


@dataclasses.dataclass(frozen=True)
class PageConfig:
    steps: int = 8


FALLS = Claim("the loss falls", "000:Page1", "spec §1", falsifier="flat")
ROWS = Claim("one row per step", "000:Page2", "spec §2", kind="property")
FLAT = Falsifier("flat", "a loss that never falls", "math:sqrt", lambda f: f, "mechanism")


def page_run(config, ctx):
    frame = pd.DataFrame({"step": range(config.steps), "loss": [1.0 / (1 + s) for s in range(config.steps)]})
    fig, ax = plt.subplots()
    ax.plot(frame["step"], frame["loss"])
    checks = [
        FALLS.holds("< 1", float(frame["loss"].iloc[-1]), "bound", True),
        ROWS.holds(config.steps, len(frame), "exact", True),
    ]
    return ExperimentResult(frame=frame, checks=checks, figures={"curve": fig})


def broken_run(config, ctx):
    raise RuntimeError("this experiment is broken")


@pytest.fixture
def pages_paper(monkeypatch):
    """Paper 'pages-paper': two experiments whose names differ only in punctuation, one plain, one that raises."""
    registry.REGISTRY.load_all()
    for name, run in (("pg.a-b", page_run), ("pg.a.b", page_run), ("pg.ok", page_run), ("pg.broken", broken_run)):
        exp = Experiment(
            name=name,
            paper="pages-paper",
            summary=f"summary of {name}",
            config_type=PageConfig,
            run=run,
            quick={"steps": 4},
            claims=(FALLS, ROWS),
            falsifiers=(FLAT,),
        )
        monkeypatch.setitem(registry.REGISTRY.experiments, name, exp)


def _keys(root: Path, *names: str) -> list[str]:
    index = read_index(root)
    return index.loc[index["label"].isin(names), "key"].tolist()


def test_names_that_would_share_a_page_get_a_page_each_and_the_others_keep_theirs(pages_paper, tmp_path):
    reproduce(tmp_path, paper="pages-paper", quick=True, progress=False)
    pages = sorted(p.name for p in (tmp_path / "experiments").glob("*.html"))
    assert "pg-ok.html" in pages and "pg-broken.html" in pages  # no collision: the page name of old
    twins = [p for p in pages if p.startswith("pg-a-b")]
    assert len(twins) == 2 and "pg-a-b.html" not in twins and len(pages) == 4, pages
    index = (tmp_path / "index.html").read_text()
    for page in twins:
        text = (tmp_path / "experiments" / page).read_text()
        (own,) = [name for name in ("pg.a-b", "pg.a.b") if f"<h1>{name}</h1>" in text]  # each page shows its own
        assert f'href="experiments/{page}">{own}</a>' in index  # and the index links each name to its page
        assert f'id="{page[: -len(".html")]}"' in index


def test_the_built_in_experiments_keep_their_page_names():
    from attnlab.report.html import _RESERVED_IDS, _anchor, _distinct_anchors

    names = [e.name for e in list_experiments() if not e.name.startswith(("fake.", "pg."))]
    assert _distinct_anchors([(n, n) for n in names], _RESERVED_IDS) == [_anchor(n) for n in names]
    assert "kq-nuclear-x1" in _distinct_anchors([(n, n) for n in names], _RESERVED_IDS)
    # an experiment named like an id of the report's own (the summary line) is moved off it
    (moved,) = _distinct_anchors([("summary", "summary")], _RESERVED_IDS)
    assert moved.startswith("summary-") and len(moved) == len("summary-") + 8


def test_summary_and_paper_counts_hold_the_properties_and_findings_the_doc_lists(pages_paper, tmp_path):
    reproduce(tmp_path, paper="pages-paper", quick=True, progress=False)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert (written["properties"], written["properties_passed"]) == (3, 3)
    paper = written["papers"]["pages-paper"]
    assert (paper["properties"], paper["properties_passed"], paper["theory"], paper["findings"]) == (3, 3, 3, 0)
    counts = pd.read_csv(tmp_path / "paper_counts.csv")
    assert counts.columns.tolist() == PAPER_COUNT_COLUMNS
    assert {"findings", "properties", "properties_passed"} <= set(PAPER_COUNT_COLUMNS)
    row = counts.set_index("paper").loc["pages-paper"]
    assert (row["findings"], row["properties"], row["properties_passed"], row["errors"]) == (0, 3, 3, 1)
    # the doc lists exactly the keys and columns written
    rows = {line.split("|")[1].strip(): line for line in OUTPUT_DOC.read_text().splitlines() if line.startswith("| `")}

    def listed(name: str) -> set[str]:
        return set(re.findall(r"`([a-z_]+)`", rows[f"`{name}`"].split("|", 2)[2]))

    assert listed("paper_counts.csv") == set(PAPER_COUNT_COLUMNS)
    assert listed("summary.json") == set(written) | set(paper)


def test_results_covered_is_labelled_as_the_registrys_declaration(pages_paper, tmp_path):
    summary = reproduce(tmp_path, paper="pages-paper", quick=True, progress=False)
    page = summary.path.read_text()
    assert "<th>results covered (declared in the registry)</th>" in page
    assert "Results covered, as the registry declares them (not derived from these runs):" in page


def test_a_damaged_run_reads_damaged_with_its_reason_and_a_failed_one_raised_an_error(pages_paper, tmp_path):
    reproduce(tmp_path, paper="pages-paper", quick=True, progress=False)
    (png,) = tmp_path.glob("runs/pg.ok-*/curve.png")
    png.unlink()
    summary = build_report(tmp_path, keys=_keys(tmp_path, "pg.ok", "pg.broken"))
    entries = {e.name: e for e in summary.entries}
    assert entries["pg.ok"].status == "damaged" and entries["pg.ok"].outcome == "damaged: curve.png is missing"
    assert entries["pg.broken"].outcome == "raised an error"
    assert summary.unfinished == "1 raised an error, 1 damaged"
    index = summary.path.read_text()
    assert "0 of 2 experiments finished, 1 raised an error, 1 damaged." in index
    assert '<span class="fail">damaged: curve.png is missing</span>' in index
    assert '<span class="fail">raised an error</span>' in index
    damaged = (tmp_path / "experiments" / "pg-ok.html").read_text()
    assert '<span class="fail">DAMAGED</span>' in damaged and "The run is damaged: curve.png is missing." in damaged
    assert "raised an error" not in damaged and "did not finish" not in damaged
    assert "RuntimeError: this experiment is broken" in (tmp_path / "experiments" / "pg-broken.html").read_text()


def test_the_cli_says_raised_an_error_for_a_failed_run(pages_paper, tmp_path):
    args = ["reproduce", "--paper", "pages-paper", "--quick", "--out", str(tmp_path), "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "[ERROR] pg.broken: raised an error (traceback in the report)" in result.output
    assert "1 of 4 experiments did not finish (1 raised an error)" in result.output


def test_the_subtitle_says_quick_full_mixed_or_unknown(pages_paper, tmp_path):
    def settings(summary) -> str:
        return re.search(r"settings: ([^<]*)</p>", summary.path.read_text()).group(1)

    reproduce(tmp_path, paper="pages-paper", quick=True, progress=False)
    assert settings(build_report(tmp_path)) == "quick (CI-sized)"
    assert settings(reproduce(tmp_path, paper="pages-paper", progress=False)) == "full"
    mixed = build_report(tmp_path)  # every run in the folder: the quick and the full ones
    assert settings(mixed) == "mixed: quick and full runs"
    # the two runs of one experiment (quick and full) have a page each
    ok = [e for e in mixed.entries if e.name == "pg.ok"]
    assert len(ok) == 2 and len(list((tmp_path / "experiments").glob("pg-ok-*.html"))) == 2
    assert settings(build_report(tmp_path, keys=_keys(tmp_path, "pg.broken"))) == "unknown (no run finished)"
