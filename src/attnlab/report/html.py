"""The static reproduction report: ``index.html`` drawn from the run directories of a reproduce sweep.

One section per paper, headed by how many of its checks are theorem predictions (``kind="theory"``) and how many
are observations of real models (``kind="observation"``), counted from each run's ``checks.csv``. One card per
experiment: its figures, each full width and linked to the full-size PNG and the PDF, then its check table
(claim, predicted, measured, tolerance, result, source), its config (our defaults marked), notes, timings and
versions. Claims and notes are ASCII in ``checks.csv``; the page shows them with Unicode symbols and HTML sub- and
superscripts (:mod:`attnlab.report.text`), which need no network. A run that raised shows its traceback instead.
Every image and link is relative to the report folder, so the folder can be copied or served as it is.
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
from attnlab.report.text import math_html, note_html
from attnlab.runner import read_index, write_json
from attnlab.runner.manifest import read_manifest, reused_from
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
.figures figure { margin: 0 0 1rem 0; }
.figures img { display: block; width: 100%; height: auto; border: 1px solid #eee; }
.figures figcaption { font-size: 0.85rem; color: #555; }
table.check-table { width: 100%; table-layout: fixed; }
table.check-table td { overflow-wrap: anywhere; }
table.check-table td.value { font-family: ui-monospace, monospace; font-size: 0.78rem; }
table.check-table col.claim { width: 36%; } table.check-table col.value { width: 13%; }
table.check-table col.result { width: 8%; } table.check-table col.source { width: 17%; }
table.check-table td.result { white-space: nowrap; }
td.missing { color: #b00020; }
.notes li { white-space: pre-line; margin: 0.2rem 0; }
.note-pre, .note-table { font-size: 0.78rem; }
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
    origin : str
        Where the result comes from: ``"computed now"`` (with the reason when the stored run was stale or
        damaged) or ``"reused from <time>, commit <hash>"``; ``""`` when the run did not finish.
    """

    name: str
    paper: str
    summary: str
    status: str
    run_dir: str
    checks: pd.DataFrame = field(default_factory=pd.DataFrame)
    record: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    origin: str = ""

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


def _origin(run_dir: Path, computed_since: float | None) -> str:
    """``"computed now"`` (and why, when a stored run was replaced) or ``"reused from <time, commit>"``."""
    manifest = read_manifest(run_dir) or {}
    if computed_since is None:
        return f"computed {reused_from(manifest)}"
    if float(manifest.get("finished_unix", 0.0)) >= computed_since:
        reason = manifest.get("reason", "")
        return "computed now" + (f" ({reason})" if reason and reason != "new run" else "")
    return f"reused from {reused_from(manifest)}"


def _read_entry(root: Path, row: Any, describe: Any, computed_since: float | None = None) -> ExperimentEntry:
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
        entry.origin = _origin(run_dir, computed_since)
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
        tolerance = (
            f'<td class="value">{math_html(c.tolerance)}</td>' if str(c.tolerance).strip()
            else '<td class="value missing">none stated</td>'
        )
        rows.append(
            f'<tr{cls}><td>{math_html(c.claim)}</td><td class="value">{math_html(c.predicted)}</td>'
            f'<td class="value">{math_html(c.measured)}</td>{tolerance}<td class="result">{mark}</td>'
            f"<td>{_e(c.source)}</td></tr>"
        )
    columns = (
        '<colgroup><col class="claim"><col class="value"><col class="value"><col class="value">'
        '<col class="result"><col class="source"></colgroup>'
    )
    head = "<tr><th>claim</th><th>predicted</th><th>measured</th><th>tolerance</th><th>result</th><th>source</th></tr>"
    return f'<table class="check-table">{columns}{head}{"".join(rows)}</table>'


def _figures(entry: ExperimentEntry) -> str:
    """Each figure full width, linked to its full-size PNG and, when saved, its PDF."""
    names = entry.record.get("figures", [])
    pngs = [n for n in names if n.endswith(".png")]
    if not pngs:
        return "<p>No figures.</p>"
    out = []
    for png in pngs:
        stem = png[: -len(".png")]
        src = f"{_e(entry.run_dir)}/{_e(png)}"
        pdf = f"{stem}.pdf"
        links = f'<a href="{src}">full-size PNG</a>'
        if pdf in names:
            links += f' · <a href="{_e(entry.run_dir)}/{_e(pdf)}">PDF</a>'
        out.append(
            f'<figure><a href="{src}"><img src="{src}" alt="{_e(entry.name)}: {_e(stem)}"></a>'
            f"<figcaption>{_e(stem)}: {links}</figcaption></figure>"
        )
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
    notes = "".join(f"<li>{note_html(n)}</li>" for n in rec.get("notes", []))
    versions = "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rec.get("versions", {}).items())
    seconds = rec.get("timings", {}).get("run_seconds", float("nan"))
    return (
        f'<div class="card" id="{anchor}"><h3>{_e(entry.name)} '
        f'<span class="{verdict}">{_e(entry.counts.describe())}</span></h3>'
        f"<p>{math_html(entry.summary)}</p>"
        f'<p class="meta origin">{_e(entry.origin)}</p>'
        f'<div class="figures">{_figures(entry)}</div>'
        f'<div class="checks">{_checks_table(entry)}'
        f'<p><b>Defaults that are ours</b> (the paper\'s numbers were lost): {_e(ours_text)}</p>'
        + (f'<p><b>Notes</b></p><ul class="notes">{notes}</ul>' if notes else "")
        + f"<details><summary>config (seed {_e(rec.get('seed'))}, hash {_e(rec.get('config_hash', ''))}, "
        f"quick={_e(rec.get('quick'))}, {seconds:.1f} s)</summary>{_config_table(entry)}</details>"
        f"<details><summary>versions</summary><table>{versions}</table></details>"
        f'<p class="meta">outputs: <a href="{_e(entry.run_dir)}/record.json">record.json</a>, '
        f'<a href="{_e(entry.run_dir)}/checks.csv">checks.csv</a>, '
        f'<a href="{_e(entry.run_dir)}/trajectory.parquet">trajectory.parquet</a></p>'
        "</div></div>"
    )


def _by_paper(entries: list[ExperimentEntry]) -> dict[str, list[ExperimentEntry]]:
    papers: dict[str, list[ExperimentEntry]] = {}
    for entry in entries:
        papers.setdefault(entry.paper, []).append(entry)
    return papers


def _paper_counts(items: list[ExperimentEntry]) -> CheckCounts:
    """Theorem predictions (``kind="theory"``) and observations (``kind="observation"``) over the ``checks.csv``
    of each run of a paper."""
    return sum((e.counts for e in items), CheckCounts(0, 0, 0, 0))


def _coverage(paper: str) -> str:
    """``"13 / 20"``: the paper's numbered results that declared checks cover, of those with a checkable claim."""
    from attnlab.experiments.coverage import coverage_rows

    try:
        rows = coverage_rows(paper)
    except ValidationError:  # a paper of no registered results (a test's fake paper)
        return "n/a"
    if not rows:
        return "n/a"
    return f"{sum(r['status'] == 'checked' for r in rows)} / {len(rows)}"


def _page(entries: list[ExperimentEntry], title: str, subtitle: str, summary: ReportSummary) -> str:
    papers = _by_paper(entries)
    overview = []
    for paper, items in papers.items():
        counts = _paper_counts(items)
        errors = sum(e.status != "done" for e in items)
        cls = "pass" if counts.ok and not errors else "fail"
        overview.append(
            f'<tr><td><a href="#{_anchor("paper-" + paper)}">{_e(paper)}</a></td><td>{len(items)}</td>'
            f"<td>{_e(_coverage(paper))}</td>"
            f'<td>{counts.total}</td><td class="{cls}">{counts.passed}</td>'
            f"<td>{counts.properties_passed} / {counts.properties}</td>"
            f"<td>{counts.observations}</td><td>{counts.agree}</td><td>{errors}</td></tr>"
        )
    sections = []
    for paper, items in papers.items():
        counts = _paper_counts(items)
        links = " · ".join(f'<a href="#{_anchor(e.name)}">{_e(e.name)}</a>' for e in items)
        kinds = (
            f'<p class="kinds">{counts.total} theorem predictions (kind theory), {counts.passed} passed; '
            f"{counts.properties} properties of our code (kind property), {counts.properties_passed} hold; "
            f"{counts.observations} observations of the paper's figures and remarks (kind observation), "
            f"{counts.agree} agree with the paper. Results covered: {_e(_coverage(paper))}.</p>"
        )
        body = "".join(_entry_html(e) for e in items)
        sections.append(
            f'<section id="{_anchor("paper-" + paper)}"><h2>{_e(paper)}</h2>{kinds}<p>{links}</p>{body}</section>'
        )
    counts = summary.counts
    cls = "pass" if summary.ok else "fail"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1><p class=\"meta\">{_e(subtitle)}</p>"
        f'<p id="summary" class="{cls}">{counts.passed} of {counts.total} theory checks passed, '
        f"{counts.total - counts.passed} failed; {counts.properties_passed} of {counts.properties} properties of "
        f"our code hold; {counts.agree} of {counts.observations} observations agree with the paper; "
        f"{len(summary.entries) - len(summary.errors)} of {len(summary.entries)} "
        f"experiments finished, {len(summary.errors)} raised an error.</p>"
        '<table id="overview"><tr><th>paper</th><th>experiments</th><th>results covered</th>'
        "<th>theorem checks</th><th>passed</th><th>properties of our code (hold / all)</th>"
        "<th>observations</th><th>agree with the paper</th><th>errors</th></tr>"
        f"{''.join(overview)}</table>{''.join(sections)}</body></html>\n"
    )


def build_report(
    root: str | os.PathLike[str],
    *,
    title: str = "attnlab reproduction report",
    describe: Any = None,
    computed_since: float | None = None,
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
    computed_since : float, optional
        Unix time the reproduction started: runs finished since then read "computed now", earlier ones
        "reused from <time, commit>"; ``None`` gives each run's time and commit.

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
    entries = sorted(
        (_read_entry(root, row, describe, computed_since) for row in rows), key=lambda e: (e.paper, e.name)
    )
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
            "papers": {
                paper: {"theory": c.total, "theory_passed": c.passed, "observations": c.observations,
                        "observations_agree": c.agree}
                for paper, c in ((p, _paper_counts(items)) for p, items in _by_paper(entries).items())
            },
            "errors": [e.name for e in summary.errors],
            "origins": {e.name: e.origin for e in entries if e.origin},
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
