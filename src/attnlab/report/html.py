"""The static reproduction report: ``index.html`` drawn from the run directories of a reproduce sweep.

One section per paper, one card per experiment: its figures next to its theory-check table (claim, predicted,
measured, tolerance, pass/fail), then its config (our defaults marked), notes, timings and versions. A run
that raised shows its traceback instead. Every image and link is relative to the report folder, so the folder
can be copied or served as it is.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from attnlab._validation import ValidationError
from attnlab.experiments import CheckCounts, count_checks, get_experiment
from attnlab.runner import read_index, write_json
from attnlab.runner.store import atomic_write

__all__ = ["ExperimentEntry", "ReportSummary", "build_report"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 80rem; padding: 0 1rem; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.5rem; }
.meta { color: #666; font-size: 0.9rem; }
table { border-collapse: collapse; font-size: 0.88rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.pass { color: #176f2c; font-weight: 600; } .fail { color: #b00020; font-weight: 600; }
tr.fail-row td { background: #fdecee; }
.disagree { color: #8a5a00; font-weight: 600; } tr.observation td { background: #f6f4ee; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.8rem 1rem; margin: 1rem 0; }
.card.error { border-color: #b00020; }
.row { display: flex; flex-wrap: wrap; gap: 1.2rem; align-items: flex-start; }
.figures { flex: 1 1 28rem; } .figures figure { margin: 0 0 0.8rem 0; }
.figures img { max-width: 100%; border: 1px solid #eee; }
.checks { flex: 1 1 28rem; overflow-x: auto; }
.ours { background: #fff6d5; }
pre { background: #f7f7f7; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; }
details { margin: 0.4rem 0; }
"""


@dataclass
class ExperimentEntry:
    """One experiment of the report, read from its run directory.

    Attributes
    ----------
    name, paper, summary : str
    status : {"done", "failed", "pending"}
    run_dir : str
        Relative to the report folder.
    checks : pandas.DataFrame
        ``checks.csv`` (empty when the run did not finish).
    record : dict
        ``record.json`` (empty when the run did not finish).
    error : str
        Traceback of a failed run.
    """

    name: str
    paper: str
    summary: str
    status: str
    run_dir: str
    checks: pd.DataFrame = field(default_factory=pd.DataFrame)
    record: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def counts(self) -> CheckCounts:
        return count_checks(self.checks)


@dataclass(frozen=True)
class ReportSummary:
    """Totals of a report and where it is.

    Attributes
    ----------
    path : pathlib.Path
        The written ``index.html``.
    entries : list of ExperimentEntry
    """

    path: Path
    entries: list[ExperimentEntry]

    @property
    def counts(self) -> CheckCounts:
        """Theory checks and observations over every experiment."""
        return sum((e.counts for e in self.entries), CheckCounts(0, 0, 0, 0))

    @property
    def errors(self) -> list[ExperimentEntry]:
        """Experiments that did not finish (raised, or never ran)."""
        return [e for e in self.entries if e.status != "done"]

    @property
    def ok(self) -> bool:
        """Every experiment finished and every check passed."""
        return not self.errors and self.counts.ok


def _read_entry(root: Path, row: Any, describe: Any) -> ExperimentEntry:
    params = json.loads(row.params)
    name = params.get("experiment", row.label)
    run_dir = root / row.run_dir
    paper, summary = describe(name)
    entry = ExperimentEntry(name=name, paper=paper, summary=summary, status=row.status, run_dir=row.run_dir, error=row.error)
    if row.status == "done":
        entry.record = json.loads((run_dir / "record.json").read_text())
        entry.paper = entry.record.get("paper", paper)
        entry.summary = entry.record.get("summary", summary)
        entry.checks = pd.read_csv(run_dir / "checks.csv", dtype=str, keep_default_na=False)
        entry.checks["passed"] = entry.checks["passed"].str.lower() == "true"
        if "kind" not in entry.checks:  # written before checks had a kind: every row is a theory check
            entry.checks["kind"] = "theory"
    elif not entry.error and (run_dir / "error.txt").is_file():
        entry.error = (run_dir / "error.txt").read_text()
    return entry


def _e(value: Any) -> str:
    return html.escape(str(value))


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())


def _checks_table(entry: ExperimentEntry) -> str:
    if not len(entry.checks):
        return "<p>No theory checks.</p>"
    rows = []
    for c in entry.checks.itertuples():
        if c.kind == "observation":
            mark = '<span class="pass">agrees</span>' if c.passed else '<span class="disagree">disagrees</span>'
            cls = ' class="observation"'
        else:
            mark = '<span class="pass">pass</span>' if c.passed else '<span class="fail">FAIL</span>'
            cls = "" if c.passed else ' class="fail-row"'
        rows.append(
            f"<tr{cls}><td>{_e(c.claim)}</td><td>{_e(c.predicted)}</td><td>{_e(c.measured)}</td>"
            f"<td>{_e(c.tolerance)}</td><td>{mark}</td><td>{_e(c.source)}</td></tr>"
        )
    head = "<tr><th>claim</th><th>predicted</th><th>measured</th><th>tolerance</th><th>result</th><th>source</th></tr>"
    return f'<table class="check-table">{head}{"".join(rows)}</table>'


def _figures(entry: ExperimentEntry) -> str:
    names = entry.record.get("figures", [])
    pngs = [n for n in names if n.endswith(".png")]
    if not pngs:
        return "<p>No figures.</p>"
    out = []
    for png in pngs:
        stem = png[: -len(".png")]
        src = f"{entry.run_dir}/{png}"
        pdf = f"{stem}.pdf"
        link = f' (<a href="{_e(entry.run_dir)}/{_e(pdf)}">PDF</a>)' if pdf in names else ""
        out.append(f'<figure><img src="{_e(src)}" alt="{_e(entry.name)}: {_e(stem)}"><figcaption>{_e(stem)}{link}</figcaption></figure>')
    return "".join(out)


def _config_table(entry: ExperimentEntry) -> str:
    config = entry.record.get("config", {})
    ours = entry.record.get("defaults_ours", {})
    rows = []
    for key, value in config.items():
        cls = ' class="ours"' if key in ours else ""
        note = " (our default; the paper's value was lost)" if key in ours else ""
        rows.append(f"<tr{cls}><td>{_e(key)}</td><td>{_e(value)}{_e(note)}</td></tr>")
    return f'<table class="config-table"><tr><th>field</th><th>value</th></tr>{"".join(rows)}</table>'


def _entry_html(entry: ExperimentEntry) -> str:
    anchor = _anchor(entry.name)
    if entry.status != "done":
        error = entry.error or "the run did not finish"
        return (
            f'<div class="card error" id="{anchor}"><h3>{_e(entry.name)} <span class="fail">ERROR</span></h3>'
            f"<p>{_e(entry.summary)}</p><p>The experiment did not finish; the other experiments ran.</p>"
            f"<pre>{_e(error)}</pre></div>"
        )
    rec = entry.record
    verdict = "pass" if entry.counts.ok else "fail"
    ours = rec.get("defaults_ours", {})
    ours_text = ", ".join(f"{k}={v}" for k, v in ours.items()) or "none"
    notes = "".join(f"<li>{_e(n)}</li>" for n in rec.get("notes", []))
    versions = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rec.get("versions", {}).items())
    seconds = rec.get("timings", {}).get("run_seconds", float("nan"))
    return (
        f'<div class="card" id="{anchor}"><h3>{_e(entry.name)} '
        f'<span class="{verdict}">{_e(entry.counts.describe())}</span></h3>'
        f"<p>{_e(entry.summary)}</p>"
        f'<div class="row"><div class="figures">{_figures(entry)}</div>'
        f'<div class="checks">{_checks_table(entry)}'
        f'<p><b>Defaults that are ours</b> (the paper\'s numbers were lost): {_e(ours_text)}</p>'
        + (f"<p><b>Notes</b></p><ul>{notes}</ul>" if notes else "")
        + f"<details><summary>config (seed {_e(rec.get('seed'))}, hash {_e(rec.get('config_hash', ''))}, "
        f"quick={_e(rec.get('quick'))}, {seconds:.1f} s)</summary>{_config_table(entry)}</details>"
        f"<details><summary>versions</summary><table>{versions}</table></details>"
        f'<p class="meta">outputs: <a href="{_e(entry.run_dir)}/record.json">record.json</a>, '
        f'<a href="{_e(entry.run_dir)}/checks.csv">checks.csv</a>, '
        f'<a href="{_e(entry.run_dir)}/trajectory.parquet">trajectory.parquet</a></p>'
        "</div></div></div>"
    )


def _page(entries: list[ExperimentEntry], title: str, subtitle: str, summary: ReportSummary) -> str:
    papers: dict[str, list[ExperimentEntry]] = {}
    for entry in entries:
        papers.setdefault(entry.paper, []).append(entry)
    overview = []
    for paper, items in papers.items():
        counts = sum((e.counts for e in items), CheckCounts(0, 0, 0, 0))
        errors = sum(e.status != "done" for e in items)
        cls = "pass" if counts.ok and not errors else "fail"
        overview.append(
            f'<tr><td><a href="#{_anchor("paper-" + paper)}">{_e(paper)}</a></td><td>{len(items)}</td>'
            f'<td class="{cls}">{counts.passed}/{counts.total}</td><td>{counts.agree}/{counts.observations}</td>'
            f"<td>{errors}</td></tr>"
        )
    sections = []
    for paper, items in papers.items():
        links = " · ".join(f'<a href="#{_anchor(e.name)}">{_e(e.name)}</a>' for e in items)
        body = "".join(_entry_html(e) for e in items)
        sections.append(f'<section id="{_anchor("paper-" + paper)}"><h2>{_e(paper)}</h2><p>{links}</p>{body}</section>')
    counts = summary.counts
    cls = "pass" if summary.ok else "fail"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1><p class=\"meta\">{_e(subtitle)}</p>"
        f'<p id="summary" class="{cls}">{counts.passed} of {counts.total} theory checks passed, '
        f"{counts.total - counts.passed} failed; {counts.agree} of {counts.observations} observations of real "
        f"models agree with the paper; {len(summary.entries) - len(summary.errors)} of {len(summary.entries)} "
        f"experiments finished, {len(summary.errors)} raised an error.</p>"
        "<table><tr><th>paper</th><th>experiments</th><th>checks passed</th><th>observations agreeing</th>"
        "<th>errors</th></tr>"
        f"{''.join(overview)}</table>{''.join(sections)}</body></html>\n"
    )


def build_report(
    root: str | os.PathLike[str], *, title: str = "attnlab reproduction report", describe: Any = None
) -> ReportSummary:
    """Write ``root/index.html`` (and ``root/summary.json``) from the experiment runs of the sweep in ``root``.

    Parameters
    ----------
    root : path
        Output folder of a sweep of ``experiment`` runs (it holds ``index.parquet`` and ``runs/``).
    title : str, default="attnlab reproduction report"
    describe : callable, optional
        ``describe(name) -> (paper, summary)`` for runs that did not finish (their ``record.json`` is missing);
        default the experiment registry.

    Returns
    -------
    ReportSummary

    Raises
    ------
    ValidationError
        If ``root`` is not the folder of a sweep.
    """
    root = Path(root)
    describe = describe or _describe
    index = read_index(root)
    rows: Iterable[Any] = index[index["task"] == "experiment"].itertuples()
    entries = sorted((_read_entry(root, row, describe) for row in rows), key=lambda e: (e.paper, e.name))
    path = root / "index.html"
    summary = ReportSummary(path=path, entries=entries)
    quick = {e.record.get("quick") for e in entries if e.record}
    versions = next((e.record.get("versions", {}) for e in entries if e.record), {})
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = (
        f"generated {stamp}; attnlab {versions.get('attnlab', '?')}, torch {versions.get('torch', '?')}, "
        f"python {versions.get('python', '?')}; settings: {'quick (CI-sized)' if quick == {True} else 'full'}"
    )
    text = _page(entries, title, subtitle, summary)
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))
    write_json(
        root / "summary.json",
        {
            "checks_passed": summary.counts.passed,
            "checks_total": summary.counts.total,
            "observations_agree": summary.counts.agree,
            "observations_total": summary.counts.observations,
            "experiments": len(entries),
            "errors": [e.name for e in summary.errors],
            "failed_checks": [
                f"{e.name}: {c.claim}"
                for e in entries
                for c in e.checks.itertuples()
                if not c.passed and c.kind != "observation"
            ],
        },
    )
    return summary


def _describe(name: str) -> tuple[str, str]:
    try:
        exp = get_experiment(name)
    except ValidationError:
        return "unknown", "(no longer registered)"
    return exp.paper, exp.summary
