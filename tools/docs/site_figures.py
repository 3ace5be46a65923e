"""Each experiment on the site: its figures and check table from a quick reproduction, with a gallery page.

``make site-figures`` runs ``attnlab reproduce --quick`` into ``report-quick/`` and then this script, which copies every
PNG figure and the ``checks.csv`` of each experiment's run folder into ``docs/experiments/figures/<experiment>/``
(committed: the site is built offline and without running the experiments), writes one page per experiment,
``docs/experiments/runs/<experiment>.md`` (its summary, the sizes the quick run used, every figure and the check
table: claim, predicted, measured, tolerance, verdict, margin, source), lists those pages in the site's navigation
(between the ``runs:start`` and ``runs:end`` comments of mkdocs.yml) and writes ``docs/gallery.md``, one figure per
experiment linking to its page. ``tests/test_site_figures.py`` fails when an experiment has no committed figure,
check table or page.

    python tools/docs/site_figures.py report-quick
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ROOT / "docs" / "experiments" / "figures"
RUNS = ROOT / "docs" / "experiments" / "runs"
GALLERY = ROOT / "docs" / "gallery.md"
MKDOCS = ROOT / "mkdocs.yml"
NAV_START, NAV_END = "# runs:start (make site-figures writes these lines)", "# runs:end"
COLUMNS = ("claim", "predicted", "measured", "tolerance", "verdict", "margin", "source")
WIDTH = 1000  # pixels: wider than the page's content column
# the experiment page (docs/experiments/<page>.md) that explains an experiment, by its name's prefix
PAGES = {
    "flagship": "implicit-bias",
    "implicit-bias": "implicit-bias",
    "steepest-descent": "implicit-bias",
    "mirror-descent": "mirror-descent",
    "kq-nuclear": "kq-nuclear",
    "regression": "regression",
    "ntk": "ntk",
    "diffusion": "ntk",
    "real": "real",
    "multi-token": "multi-token",
}


def page_of(experiment: str) -> str | None:
    """The experiment page of ``experiment``, as a path relative to docs/, or None."""
    prefix = experiment.split(".")[0]
    page = PAGES.get(prefix)
    return f"experiments/{page}.md" if page else None


def collect(report: Path) -> dict[str, tuple[Path, list[Path]]]:
    """Each experiment of the reproduction in ``report``: its run folder and its PNG figures, in file-name order."""
    found = {}
    for record in sorted(report.glob("runs/*/record.json")):
        name = json.loads(record.read_text(encoding="utf-8"))["experiment"]
        found[name] = (record.parent, sorted(record.parent.rglob("*.png")))
    return found


def shrink(source: Path, target: Path) -> None:
    """Copy a PNG, scaled down to at most :data:`WIDTH` pixels wide and to a 256-colour palette (a plot has few
    colours; Pillow, which matplotlib installs, does both)."""
    from PIL import Image

    with Image.open(source) as image:
        image = image.convert("RGB")
        if image.width > WIDTH:
            image = image.resize((WIDTH, round(image.height * WIDTH / image.width)), Image.Resampling.LANCZOS)
        image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(target, optimize=True)


def _cell(value: object) -> str:
    """A table cell: one line, pipes escaped, math left to KaTeX where the text has it."""
    return " ".join(str(value).split()).replace("|", "\\|") if str(value) != "nan" else ""


def _section_anchors(page: str) -> dict[str, str]:
    """``{"8": "8-predictions", ...}``: the anchor of each ``§N`` heading of ``docs/theory/<page>.md``."""
    from markdown.extensions.toc import slugify

    path = ROOT / "docs" / "theory" / f"{page}.md"
    anchors = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        match = re.match(r"^#+\s*§\s*(\d+(?:\.\d+)*)", line)
        if match:
            anchors.setdefault(match.group(1), slugify(line.lstrip("#").strip(), "-"))
    return anchors


def source_link(source: str) -> str:
    """A check's source as a link to the theory page's section (``docs/theory/<page>.md §8.3`` -> its §8 heading)."""
    match = re.match(r"^docs/theory/(?P<page>[\w-]+)\.md\s+§\s*(?P<section>\d+(?:\.\d+)*)(?P<rest>.*)$", source)
    if not match:
        return _cell(source)
    page, section = match.group("page"), match.group("section")
    anchors, parts = _section_anchors(page), section.split(".")
    keys = [".".join(parts[:k]) for k in range(len(parts), 0, -1)]
    anchor = next((anchors[k] for k in keys if k in anchors), "")
    target = f"../../theory/{page}.md" + (f"#{anchor}" if anchor else "")
    return f"[{page} §{section}]({target}){_cell(match.group('rest'))}"


def run_page(name: str, summary: str, record: dict, checks: list[dict], figures: list[str]) -> str:
    """The page of one experiment: summary, the quick run's settings, its figures and its check table."""
    page = page_of(name)
    explained = f" The [experiments page](../{page.split('/')[1]}) says what each check reads." if page else ""
    sizes = ", ".join(f"`{k}={v}`" for k, v in record.get("config", {}).items())
    lines = [
        f"# {name}",
        "",
        "<!-- generated by `make site-figures` (tools/docs/site_figures.py): do not edit -->",
        "",
        f"{summary}.{explained}",
        "",
        f"From the quick run (CI-sized settings: {sizes}); the full run is larger (`attnlab show {name}`).",
        "",
    ]
    lines += [f"![{name}: {Path(f).stem}](../figures/{name}/{Path(f).name})\n" for f in figures]
    counts = {}
    for row in checks:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    tally = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items()))
    lines += ["## Checks", "", f"{len(checks)} rows: {tally}." if checks else "No checks.", ""]
    if checks:
        lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        cells = [[source_link(row[c]) if c == "source" else _cell(row.get(c, "")) for c in COLUMNS] for row in checks]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines) + "\n"


def navigation(names: list[str], text: str) -> str:
    """mkdocs.yml with the experiment pages listed between the runs markers."""
    start, end = text.index(NAV_START), text.index(NAV_END)
    indent = text[:start].rsplit("\n", 1)[1]
    entries = "".join(f"{indent}- experiments/runs/{name}.md\n" for name in names)
    return text[: start + len(NAV_START)] + "\n" + entries + indent + text[end:]


def gallery(figures: dict[str, list[str]], summaries: dict[str, str]) -> str:
    """The gallery page: one figure per experiment (its first), with the experiment's summary and page."""
    lines = [
        "# Gallery",
        "",
        "<!-- generated by `make site-figures` (tools/docs/site_figures.py): do not edit -->",
        "",
        "One figure of each experiment, from its quick run (`attnlab reproduce --quick`, CI-sized settings; the full",
        "runs, `make reproduce-full`, are larger and slower). Each experiment's other figures are in",
        "`docs/experiments/figures/<experiment>/`; the experiment pages say what every check measures.",
        "",
    ]
    for name, files in figures.items():
        where = f" ([its figures and checks](experiments/runs/{name}.md))"
        lines += [f"## {name}", "", f"{summaries.get(name, '')}{where}", "", f"![{name}]({files[0]})", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="output folder of attnlab reproduce --quick")
    args = parser.parse_args(argv)
    from attnlab.experiments import list_experiments

    summaries = {e.name: e.summary for e in list_experiments()}
    found = collect(args.report)
    missing = sorted(set(summaries) - set(found))
    if missing:
        print(f"the reproduction in {args.report} has no run of {missing}", file=sys.stderr)
        return 1
    shutil.rmtree(FIGURES, ignore_errors=True)
    shutil.rmtree(RUNS, ignore_errors=True)
    RUNS.mkdir(parents=True)
    shown = {}
    for name in sorted(found):
        run, pngs = found[name]
        folder = FIGURES / name
        folder.mkdir(parents=True)
        for png in pngs:
            shrink(png, folder / png.name)
        shown[name] = [f"experiments/figures/{name}/{png.name}" for png in pngs]
        shutil.copyfile(run / "checks.csv", folder / "checks.csv")
        with open(run / "checks.csv", newline="", encoding="utf-8") as handle:
            checks = list(csv.DictReader(handle))
        record = json.loads((run / "record.json").read_text(encoding="utf-8"))
        (RUNS / f"{name}.md").write_text(run_page(name, summaries[name], record, checks, shown[name]), encoding="utf-8")
    MKDOCS.write_text(navigation(sorted(found), MKDOCS.read_text(encoding="utf-8")), encoding="utf-8")
    empty = sorted(name for name, files in shown.items() if not files)
    if empty:
        print(f"no PNG figure in the runs of {empty}", file=sys.stderr)
        return 1
    GALLERY.write_text(gallery(shown, summaries), encoding="utf-8")
    print(f"{sum(len(f) for f in shown.values())} figures of {len(shown)} experiments in {FIGURES}; {GALLERY}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
