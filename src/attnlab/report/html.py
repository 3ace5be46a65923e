"""The static reproduction report: ``index.html`` and one page per experiment, drawn from the run directories of a
reproduce sweep.

The pages are rendered from the Jinja2 templates in ``report/templates`` (autoescaped: every value read from a run
is escaped) after this module has turned each run into plain data. ``index.html`` has the summary, one row per paper
(the paper's own numbered results that the registry declares covered, not derived from the runs; theorem checks,
findings, revised readings, properties, observations) and, per paper, its experiments with their counts, each part
coloured by its verdict, each linking to ``experiments/<name>.html`` (the name in lower case, any other character
``-``; names that would share a page, ``qa.a-b`` and ``qa.a.b``, each end in a short hash of the exact name). An
experiment's page has a sticky table of contents of every page, the sizes it actually ran with (for a quick run,
each size that differs from the full run, with the full value), its figures, each full width and linked to the
full-size PNG and the PDF, its check table (claim, predicted, measured, a short tolerance with the whole derivation
behind a disclosure, the verdict, old readings right under the row they were replaced by, a finding's link to its
investigation, the source linked to the rendered section of our theory page), notes, the whole config (our defaults
marked) and versions. Claims and notes are ASCII in ``checks.csv``; the pages typeset them
with Unicode symbols and HTML sub- and superscripts (:mod:`attnlab.report.text`). The theory pages are rendered with
KaTeX into ``theory/`` (:mod:`attnlab.report.theory_pages`). A run that raised shows its traceback instead, a
damaged one (a stored file missing or changed) what is wrong with it. Every image and link is relative to the report
folder, so the folder can be copied or served as it is.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment
from attnlab.report.text import math_html, note_html
from attnlab.report.theory_pages import TheoryPages, render_theory_pages
from attnlab.runner import read_index, write_json
from attnlab.runner.manifest import read_manifest, reused_from
from attnlab.runner.store import atomic_write
from attnlab.verify import CheckCounts, count_checks

__all__ = ["ExperimentEntry", "ReportSummary", "build_report"]


@dataclass
class ExperimentEntry:
    """One experiment of the report, read from its run directory.

    Attributes
    ----------
    name, paper, summary : str
    status : {"done", "diverged", "damaged", "failed", "running", "pending"}
        The runner's status (:func:`attnlab.runner.read_index`); only ``"done"`` is a finished run.
    run_dir : str
        Relative to the report folder.
    checks : pandas.DataFrame
        ``checks.csv`` (empty when the run did not finish).
    record : dict
        ``record.json`` (empty when the run did not finish).
    error : str
        Traceback of a failed run; what is wrong with a damaged one (e.g. ``"curve.png is missing"``).
    origin : str
        Where the result comes from: ``"computed now"`` (with the reason when the stored run was stale or
        damaged) or ``"reused from <time>, commit <hash>"``; ``""`` when the run did not finish.
    full_config : dict
        The experiment's full-size config (its defaults), to show which sizes a quick run changed; empty when the
        experiment is not registered any more.
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
    full_config: dict[str, Any] = field(default_factory=dict)

    @property
    def counts(self) -> CheckCounts:
        """The totals of :attr:`checks`: theorem checks and properties passed, observations that agree."""
        return count_checks(self.checks)

    @property
    def outcome(self) -> str:
        """What became of the run, in words: ``"finished"``, ``"raised an error"`` (status ``"failed"``),
        ``"damaged: <what is wrong>"``, or the status itself (``"pending"``, ``"running"``, ``"diverged"``)."""
        if self.status == "done":
            return "finished"
        if self.status == "damaged":
            return f"damaged: {self.error.strip() or 'a stored file is missing or changed'}"
        return _RAISED if self.status == "failed" else self.status


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
        """Experiments that did not finish (raised, damaged, or never ran): status other than ``"done"``."""
        return [e for e in self.entries if e.status != "done"]

    @property
    def unfinished(self) -> str:
        """The experiments that did not finish, by :attr:`ExperimentEntry.outcome` without the damage's detail:
        ``"1 raised an error, 1 damaged"``; ``""`` when every experiment finished."""
        return _unfinished_text(self.entries)

    @property
    def ok(self) -> bool:
        """Every experiment finished and every check passed."""
        return not self.errors and self.counts.ok


_RAISED = "raised an error"


def _unfinished_text(entries: Iterable[ExperimentEntry]) -> str:
    """``"1 raised an error, 2 damaged"``: the entries that did not finish, by what became of them (``""``: none)."""
    words = {"failed": _RAISED}
    counts: dict[str, int] = {}
    for entry in entries:
        if entry.status != "done":
            word = words.get(entry.status, entry.status)
            counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{n} {word}" for word, n in counts.items())


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
    entry = ExperimentEntry(
        name=name, paper=paper, summary=summary, status=row.status, run_dir=row.run_dir, error=row.error
    )
    if row.status == "done":
        entry.record = json.loads((run_dir / "record.json").read_text())
        entry.paper = entry.record.get("paper", paper)
        entry.summary = entry.record.get("summary", summary)
        entry.checks = pd.read_csv(run_dir / "checks.csv", dtype=str, keep_default_na=False)
        entry.checks["passed"] = entry.checks["passed"].str.lower() == "true"
        if "kind" not in entry.checks:  # written before checks had a kind: every row is a theory check
            entry.checks["kind"] = "theory"
        entry.origin = _origin(run_dir, computed_since)
        entry.full_config = _full_config(name)
    elif not entry.error and (run_dir / "error.txt").is_file():
        entry.error = (run_dir / "error.txt").read_text()
    return entry


def _full_config(name: str) -> dict[str, Any]:
    """The registered experiment's default (full-size) config as JSON-like values; empty when it is unknown."""
    try:
        experiment = get_experiment(name)
    except ValidationError:
        return {}
    return json.loads(json.dumps(dataclasses.asdict(experiment.config_type()), default=str))


def _anchor(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower())


#: Element ids of the report's own, which no paper or experiment anchor may take.
_RESERVED_IDS = frozenset({"summary", "overview", "toc"})


def _distinct_anchors(items: list[tuple[str, str]], taken: Collection[str] = ()) -> list[str]:
    """One anchor per ``(text, key)``: :func:`_anchor` of the text, unless two different keys share it (``qa.a-b``
    and ``qa.a.b``) or it is ``taken``; each of those ends in ``-`` and the first 8 hex digits of the SHA-256 of
    its key, stable from report to report. Anchors that collide with nothing are kept as they are."""
    keys_of: dict[str, set[str]] = {}
    for text, key in items:
        keys_of.setdefault(_anchor(text), set()).add(key)
    out = []
    for text, key in items:
        anchor = _anchor(text)
        if len(keys_of[anchor]) > 1 or anchor in taken:
            anchor += "-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]
        out.append(anchor)
    return out


def _entry_anchors(entries: list[ExperimentEntry], taken: Collection[str]) -> list[str]:
    """The anchor (and page stem) of each entry: the name's, hashed by the exact name where names collide, and by
    the name and run folder where one name appears twice (runs of one experiment at two settings)."""
    seen: dict[str, int] = {}
    for entry in entries:
        seen[entry.name] = seen.get(entry.name, 0) + 1
    items = [(e.name, e.name if seen[e.name] == 1 else f"{e.name}\n{e.run_dir}") for e in entries]
    return _distinct_anchors(items, taken)


_SHORT_TOLERANCE = 40  # characters: a tolerance cell longer than this shows its first clause, the rest on a click
_VERDICTS = {
    "pass": "pass",
    "FAIL": "fail",
    "finding": "finding",
    "agrees": "pass",
    "disagrees": "disagree",
    "inconclusive": "inconclusive",
    "recorded": "inconclusive",
}


def _tolerance(text: str) -> tuple[str, str]:
    """``(short, derivation)``: the cell's text, and the whole text behind a disclosure when it is long."""
    if len(text) <= _SHORT_TOLERANCE:
        return text, ""
    head = re.split(r"; | \(", text, maxsplit=1)[0]
    if len(head) > _SHORT_TOLERANCE:
        head = head[:_SHORT_TOLERANCE].rsplit(" ", 1)[0] + " …"
    return head, text


def _verdict(row: Any) -> str:
    """The row's ``verdict`` column (:data:`~attnlab.verify.CHECK_VERDICTS`), derived from ``passed``
    in tables written before that column existed; a failed theory check reads "FAIL"."""
    verdict = str(getattr(row, "verdict", "") or "")
    if not verdict:
        if row.kind in ("observation", "exploration"):
            verdict = "agrees" if row.passed else "disagrees"
        else:
            verdict = "pass" if row.passed else "fail"
    return "FAIL" if verdict == "fail" else verdict


def _check_view(row: Any, paper: str, pages: TheoryPages) -> dict[str, Any]:
    verdict = _verdict(row)
    short, derivation = _tolerance(str(row.tolerance).strip())
    if row.kind in ("observation", "exploration", "revision"):
        # an old reading sits right under its current row, marked as such
        row_cls = "observation" if row.kind == "exploration" else row.kind
    elif verdict == "finding":
        row_cls = "finding-row"
    else:
        row_cls = "" if row.passed else "fail-row"
    investigation = str(getattr(row, "investigation", "") or "")
    return {
        "claim": row.claim,
        "predicted": row.predicted,
        "measured": row.measured,
        "tolerance": short,
        "derivation": derivation,
        "verdict": verdict,
        "verdict_cls": _VERDICTS[verdict],
        "row_cls": row_cls,
        "source": row.source,
        "source_href": pages.source_href(str(row.source), paper, prefix="../"),
        "revision": row.kind == "revision",
        "investigation": _investigation_href(investigation),
    }


def _investigation_href(investigation: str) -> str:
    """``docs/findings.md#x`` -> ``../theory/findings.html#x``: the rendered investigation, from an experiment page."""
    if not investigation or investigation == "nan":
        return ""
    page, _, anchor = investigation.partition("#")
    return f"../theory/{Path(page).stem}.html" + (f"#{anchor}" if anchor else "")


def _sizes(entry: ExperimentEntry) -> list[dict[str, Any]]:
    """For a quick run, each config value that differs from the full run's default, with that default."""
    config = entry.record.get("config", {})
    if not entry.record.get("quick") or not entry.full_config:
        return []
    return [
        {"key": key, "value": value, "full": entry.full_config[key]}
        for key, value in config.items()
        if key in entry.full_config and entry.full_config[key] != value
    ]


def _entry_view(entry: ExperimentEntry, anchor: str, pages: TheoryPages) -> dict[str, Any]:
    rec = entry.record
    names = rec.get("figures", [])
    figures = [
        {
            "stem": png[: -len(".png")],
            "png": f"../{entry.run_dir}/{png}",
            "pdf": f"../{entry.run_dir}/{png[: -len('.png')]}.pdf" if f"{png[: -len('.png')]}.pdf" in names else "",
        }
        for png in names
        if png.endswith(".png")
    ]
    ours = rec.get("defaults_ours", {})
    config = [{"key": k, "value": v, "ours": k in ours} for k, v in rec.get("config", {}).items()]
    ok = entry.status == "done" and entry.counts.ok
    return {
        "name": entry.name,
        "anchor": anchor,
        "status": entry.status,
        "outcome": entry.outcome,
        "label": {"failed": "ERROR"}.get(entry.status, entry.status.upper()),
        "cls": "pass" if ok else "fail",
        "counts_parts": [
            {"text": text, "cls": _VERDICTS.get(verdict, verdict)} for text, verdict in entry.counts.parts()
        ],
        "page": f"experiments/{anchor}.html",
        "summary": entry.summary,
        "error": entry.error or "the run did not finish",
        "damage": entry.outcome.removeprefix("damaged: ") if entry.status == "damaged" else "",
        "origin": entry.origin,
        "quick": rec.get("quick"),
        "settings": "quick (CI-sized)" if rec.get("quick") else "full",
        "config": config,
        "sizes": _sizes(entry),
        "ours": ours,
        "figures": figures,
        "checks": [_check_view(c, entry.paper, pages) for c in entry.checks.itertuples()],
        "notes": rec.get("notes", []),
        "seed": rec.get("seed"),
        "config_hash": rec.get("config_hash", ""),
        "seconds": float(rec.get("timings", {}).get("run_seconds", float("nan"))),
        "versions": rec.get("versions", {}),
        "run_dir": f"../{entry.run_dir}",
    }


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
    """``"20 / 28 (2 findings, 5 not checkable)"``: the paper's own numbered results that declared checks, findings
    or unit tests cover, of all its own numbered results."""
    from attnlab.experiments.coverage import coverage_rows

    try:
        rows = coverage_rows(paper)
    except ValidationError:  # a paper of no registered results (a test's fake paper)
        return "n/a"
    if not rows:
        return "n/a"
    status = [r["status"] for r in rows]
    covered = len(rows) - status.count("not checkable")
    return (
        f"{covered} / {len(rows)} ({status.count('finding')} findings, {status.count('not checkable')} not checkable)"
    )


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("attnlab.report", "templates"),
        autoescape=True,  # every value is escaped; only the math and note filters return markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["math"] = lambda text: Markup(math_html(text))  # math_html escapes all but its sub/sup tags
    env.filters["note"] = lambda text: Markup(note_html(text))
    return env


def _pages(
    entries: list[ExperimentEntry], title: str, subtitle: str, summary: ReportSummary, pages: TheoryPages
) -> dict[str, str]:
    """Every page of the report by its path in the report folder: ``index.html`` and one per experiment."""
    by_paper = _by_paper(entries)
    paper_anchors = _distinct_anchors([("paper-" + paper, paper) for paper in by_paper], _RESERVED_IDS)
    ordered = [e for items in by_paper.values() for e in items]
    anchors = dict(zip(map(id, ordered), _entry_anchors(ordered, _RESERVED_IDS | set(paper_anchors))))
    papers = []
    for (paper, items), paper_anchor in zip(by_paper.items(), paper_anchors):
        counts = _paper_counts(items)
        errors = sum(e.status != "done" for e in items)
        papers.append(
            {
                "name": paper,
                "anchor": paper_anchor,
                "cls": "pass" if counts.ok and not errors else "fail",
                "counts": counts,
                "errors": errors,
                "errors_text": _unfinished_text(items) or "0",
                "coverage": _coverage(paper),
                "entries": [_entry_view(e, anchors[id(e)], pages) for e in items],
            }
        )
    counts = summary.counts
    line = (
        f"{counts.passed} of {counts.total} theory checks passed, {counts.findings} findings (failed after an "
        f"investigation), {counts.failed} failed; {counts.properties_passed} of "
        f"{counts.properties} properties of our code hold; {counts.agree} of {counts.observations} observations agree "
        f"with the paper ({counts.ours_agree} of {counts.ours} remarks of ours, counted apart); {counts.revisions} revised "
        "readings, each shown beside its current row; "
        f"{len(summary.entries) - len(summary.errors)} of {len(summary.entries)} experiments finished"
        f"{', ' + summary.unfinished if summary.errors else ''}."
    )
    env = _environment()
    shared = {"title": title, "subtitle": subtitle, "papers": papers}
    out = {
        "index.html": env.get_template("report.html.j2").render(
            **shared, summary_line=line, summary_cls="pass" if summary.ok else "fail", prefix=""
        )
    }
    for paper in papers:
        for entry in paper["entries"]:
            out[entry["page"]] = env.get_template("experiment.html.j2").render(
                **shared, paper=paper, entry=entry, prefix="../"
            )
    return out


def build_report(
    root: str | os.PathLike[str],
    *,
    title: str = "attnlab reproduction report",
    describe: Any = None,
    computed_since: float | None = None,
    keys: Collection[str] | None = None,
) -> ReportSummary:
    """Write ``root/index.html`` (and ``root/summary.json``) from the experiment runs of the sweep in ``root``.

    The folder's ``experiments/`` keeps one page per reported experiment: a page an earlier call wrote for a run not
    in this report is removed (its run stays in ``runs/``), so no page there shows values this report does not.

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
    keys : collection of str, optional
        The run keys (:attr:`attnlab.runner.Job.key`) of the experiments to report, e.g. those of one
        reproduction; ``None``: every experiment run in ``root``. A folder keeps the runs of earlier calls (other
        papers, quick and full settings, older code), which only their keys tell apart from this call's.

    Returns
    -------
    ReportSummary

    Raises
    ------
    ValidationError
        If ``root`` is not the folder of a sweep, or ``keys`` is not a collection of strings or names a run that
        is not an experiment run in ``root``.
    """
    root = Path(root)
    describe = describe or _describe
    index = read_index(root)
    runs = _select_runs(index[index["task"] == "experiment"], keys, root)
    rows: Iterable[Any] = runs.itertuples()
    entries = sorted(
        (_read_entry(root, row, describe, computed_since) for row in rows), key=lambda e: (e.paper, e.name)
    )
    path = root / "index.html"
    summary = ReportSummary(path=path, entries=entries)
    versions = next((e.record.get("versions", {}) for e in entries if e.record), {})
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    subtitle = (
        f"generated {stamp}; attnlab {versions.get('attnlab', '?')}, torch {versions.get('torch', '?')}, "
        f"python {versions.get('python', '?')}; settings: {_settings(entries)}"
    )
    docs = Path(__file__).resolve().parents[3] / "docs"  # a checkout: src/attnlab/report/html.py
    pages = render_theory_pages(docs, root)
    (root / "experiments").mkdir(exist_ok=True)
    written = _pages(entries, title, subtitle, summary, pages)
    for name, text in written.items():
        atomic_write(root / name, lambda p, text=text: p.write_text(text, encoding="utf-8"))
    for page in (root / "experiments").glob("*.html"):  # an earlier call's page: its run is not in this report
        if f"experiments/{page.name}" not in written:
            page.unlink()
    write_json(
        root / "summary.json",
        {
            "checks_passed": summary.counts.passed,
            "checks_total": summary.counts.total,
            "findings": summary.counts.findings,
            "properties": summary.counts.properties,
            "properties_passed": summary.counts.properties_passed,
            "revisions": summary.counts.revisions,
            "observations_agree": summary.counts.agree,
            "remarks_of_ours": summary.counts.ours,
            "remarks_of_ours_agree": summary.counts.ours_agree,
            "observations_total": summary.counts.observations,
            "experiments": len(entries),
            "papers": {
                paper: {
                    "theory": c.total,
                    "theory_passed": c.passed,
                    "findings": c.findings,
                    "revisions": c.revisions,
                    "properties": c.properties,
                    "properties_passed": c.properties_passed,
                    "observations": c.observations,
                    "observations_agree": c.agree,
                }
                for paper, c in ((p, _paper_counts(items)) for p, items in _by_paper(entries).items())
            },
            "errors": [e.name for e in summary.errors],
            "origins": {e.name: e.origin for e in entries if e.origin},
            "failed_checks": [
                f"{e.name}: {c.claim}"
                for e in entries
                for c in e.checks.itertuples()
                if not c.passed and c.kind in ("theory", "property") and getattr(c, "verdict", "") != "finding"
            ],
            "findings_checks": [
                f"{e.name}: {c.claim}"
                for e in entries
                for c in e.checks.itertuples()
                if getattr(c, "verdict", "") == "finding"
            ],
        },
    )
    return summary


def _settings(entries: list[ExperimentEntry]) -> str:
    """The settings of the finished runs: ``"quick (CI-sized)"``, ``"full"``, ``"mixed: quick and full runs"``, or
    ``"unknown (no run finished)"``."""
    quick = {bool(e.record.get("quick")) for e in entries if e.record}
    if not quick:
        return "unknown (no run finished)"
    if len(quick) > 1:
        return "mixed: quick and full runs"
    return "quick (CI-sized)" if quick == {True} else "full"


def _select_runs(runs: pd.DataFrame, keys: Collection[str] | None, root: Path) -> pd.DataFrame:
    """The rows of ``runs`` whose key is in ``keys`` (all of them for ``None``); an unknown key raises."""
    if keys is None:
        return runs
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Collection):
        raise ValidationError(f"keys == {keys!r}, must be a collection of run keys (str), e.g. a list")
    wanted = list(keys)
    if not all(isinstance(key, str) for key in wanted):
        bad = next(key for key in wanted if not isinstance(key, str))
        raise ValidationError(f"keys holds {bad!r} of type {type(bad).__name__}; a run key is a str")
    unknown = sorted(set(wanted) - set(runs["key"]))
    if unknown:
        shown = ", ".join(repr(key) for key in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise ValidationError(
            f"keys holds {len(unknown)} key{'s' if len(unknown) > 1 else ''} that no experiment run in "
            f"{str(root)!r} has: {shown}"
        )
    return runs[runs["key"].isin(wanted)]


def _describe(name: str) -> tuple[str, str]:
    try:
        exp = get_experiment(name)
    except ValidationError:
        return "unknown", "(no longer registered)"
    return exp.paper, exp.summary
