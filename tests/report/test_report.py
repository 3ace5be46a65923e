"""The reproduction report: figures beside check tables, errors recorded, and no broken image or link in Chromium."""

import dataclasses
import json
import os
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from click.testing import CliRunner

from attnlab._validation import ValidationError
from attnlab.cli import main
from attnlab.experiments import registry
from attnlab.plotting import has_ours, label_ours
from attnlab.report import build_report, reproduce
from attnlab.report.reproduce import seed_field
from attnlab.runner import read_index
from attnlab.verify import Check, Claim, Experiment, ExperimentResult, Falsifier, spread_observation
from attnlab.verify import experiment as verify_experiment

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    steps: int = 50
    lr: float = 0.1
    OURS = ("lr",)


def toy_run(config, ctx):
    frame = pd.DataFrame({"step": range(config.steps), "loss": [1.0 / (1 + s) for s in range(config.steps)]})
    fig, pair = plt.subplots(1, 2, figsize=(8.4, 3.0))  # as wide as a two-panel figure, the narrowest we draw
    wide, five = plt.subplots(1, 5, figsize=(16.5, 3.0))  # and as the five-panel ones
    for ax in (*pair, *five):
        ax.plot(frame["step"], frame["loss"])
    label_ours(fig, config)  # every figure labels our defaults; the run keeps the first footnote only
    label_ours(wide, config)
    checks = [
        DECREASES.holds("< 1", float(frame["loss"].iloc[-1]), "bound", True),
        VANISHES.holds(0.0, float(frame["loss"].iloc[-1]), "abs 1e-9", False),
        Check("trains faster than SGD", "< 1", 1.2, "", False, "paper fig. 1", kind="observation"),  # no tolerance
        LONG.holds(
            "<= -1 (O~(1/t)); -2 observed in the spec",
            "q=1.75: 0.00152, q=2: 0.00958, q=3: 0.0756",
            LONG_TOLERANCE,
            True,
        ),
        # mean 0.10005 with a standard error of 0.00005: 0.1 is inside 3 standard errors, so nothing is decided
        spread_observation("remark: the loss ends above 0.1", [0.1, 0.1001], 0.1, "paper fig. 1"),
    ]
    notes = ["a note", "final log L per method: {'GD': -4.178435037946123, 'NGD': -70.71039426549262}"]
    return ExperimentResult(frame=frame, checks=checks, figures={"curve": fig, "panels": wide}, notes=notes)


LONG_TOLERANCE = (
    "bound, +0.1 for the log factor; the log factor of Theorem 2 stays below 0.1 over the four decades of t "
    "recorded, measured as the largest log t / t over the fit window"
)
LONG_CLAIM = (
    "L7 E exp(0.8 x'^T Q x) and E exp(0.8 x^T Q x) finite within rho of M (needs 1.6 lambda_max(sym C) < 1); "
    "NGD ||W_T|| <= eta T (Lemma 7 upper bound)"
)


DECREASES = Claim("loss decreases", "000:Toy1", "spec §1", falsifier="toy")
VANISHES = Claim("loss <b>vanishes</b>", "000:Toy2", "spec §2", falsifier="toy")
LONG = Claim(LONG_CLAIM, "000:Toy3", "implicit-bias-ngd §8.3", falsifier="toy")
TOY_FALSIFIER = Falsifier("toy", "the loss doubled", "math:sqrt", lambda f: f, "mechanism")


def broken_run(config, ctx):
    raise RuntimeError("this experiment is broken")


@pytest.fixture
def fake_paper(monkeypatch):
    """Two experiments of a paper 'fake-paper': one that runs (one failing check), one that raises."""
    registry.REGISTRY.load_all()
    for name, run in (("fake.ok", toy_run), ("fake.broken", broken_run)):
        exp = Experiment(
            name=name,
            paper="fake-paper",
            summary=f"summary of {name}",
            config_type=ToyConfig,
            run=run,
            quick={"steps": 5},
            claims=(DECREASES, VANISHES, LONG),
            falsifiers=(TOY_FALSIFIER,),
        )
        monkeypatch.setitem(registry.REGISTRY.experiments, name, exp)


@dataclasses.dataclass(frozen=True)
class SeededConfig:
    steps: int = 50
    seed: int = 0


def seeded_run(config, ctx):
    frame = pd.DataFrame({"step": range(config.steps), "seed": config.seed})
    return ExperimentResult(frame=frame, checks=[DECREASES.holds("< 1", 0.5, "bound", True)])


def _register_seeded(monkeypatch) -> Experiment:
    """fake.ok's twin with a seed field, in the fake paper."""
    ok = registry.REGISTRY.experiments["fake.ok"]
    exp = dataclasses.replace(ok, name="fake.seeded", config_type=SeededConfig, run=seeded_run, claims=(DECREASES,))
    monkeypatch.setitem(registry.REGISTRY.experiments, exp.name, exp)
    return exp


def test_reproduce_at_a_seed_sets_each_seed_field_and_leaves_out_the_unseeded(fake_paper, monkeypatch, tmp_path):
    exp = _register_seeded(monkeypatch)
    assert seed_field(exp) == "seed" and seed_field(registry.REGISTRY.experiments["fake.ok"]) is None
    summary = reproduce(tmp_path, paper="fake-paper", quick=True, progress=False, seed=3)
    assert [e.name for e in summary.entries] == ["fake.seeded"]  # fake.ok and fake.broken have no seed field
    (run,) = (tmp_path / "runs").glob("fake.seeded-*")
    assert set(pd.read_parquet(run / "trajectory.parquet")["seed"]) == {3}
    reproduce(tmp_path, paper="fake-paper", quick=True, progress=False)  # the seed-0 run is a run of its own
    assert len(list((tmp_path / "runs").glob("fake.seeded-*"))) == 2
    with pytest.raises(ValidationError, match="seed"):
        reproduce(tmp_path, paper="fake-paper", quick=True, progress=False, seed=-1)


def test_a_seed_redraws_the_data_sets_where_a_config_seeds_them_apart():
    # mirror-descent.bounds, .cone and .e1 draw their data sets from first_seed and only W_0 or directions from seed:
    # --seed set seed there, so their "other draws" reran the default data sets
    registry.REGISTRY.load_all()
    for name in ("bounds", "cone", "e1", "growth", "regpath"):
        assert seed_field(registry.get_experiment(f"mirror-descent.{name}")) == "first_seed"
    assert seed_field(registry.get_experiment("implicit-bias.fig2")) == "seed"


def test_the_cli_at_a_seed_names_the_experiments_it_left_out(fake_paper, monkeypatch, tmp_path):
    _register_seeded(monkeypatch)
    args = ["reproduce", "--paper", "fake-paper", "--quick", "--seed", "2", "--out", str(tmp_path), "--no-progress"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "left out at --seed 2 (no seed field): fake.broken, fake.ok" in result.output


def test_reproduce_at_a_seed_refuses_a_paper_without_seed_fields(fake_paper, tmp_path):
    with pytest.raises(ValidationError, match="no experiment of paper 'fake-paper' has a seed field"):
        reproduce(tmp_path, paper="fake-paper", quick=True, progress=False, seed=1)


def test_reproduce_records_the_error_and_runs_the_others(fake_paper, tmp_path):
    summary = reproduce(tmp_path, paper="fake-paper", quick=True, progress=False)
    assert (summary.counts.passed, summary.counts.total) == (2, 3)
    assert (summary.counts.agree, summary.counts.observations) == (0, 2)
    assert [e.name for e in summary.errors] == ["fake.broken"]
    assert not summary.ok
    page = summary.path.read_text()
    assert (
        "2 of 3 theory checks passed, 0 findings (failed after an investigation), 1 failed; 0 of 0 properties of our "
        "code hold; 0 of 2 observations" in page
    )
    assert (
        "3 theorem predictions (kind theory), 2 passed, 0 findings (failed after an investigation; reported, not a "
        "failure); 0 revised readings shown beside their rows; 0 properties of our code (kind property), 0 hold; 2 "
        "observations" in page
    )  # per paper
    papers = json.loads((tmp_path / "summary.json").read_text())["papers"]
    assert papers == {
        "fake-paper": {
            "theory": 3,
            "theory_passed": 2,
            "findings": 0,
            "revisions": 0,
            "properties": 0,
            "properties_passed": 0,
            "observations": 2,
            "observations_agree": 0,
        }
    }
    assert 'href="experiments/fake-ok.html"' in page and 'href="experiments/fake-broken.html"' in page
    assert '<span class="disagree">0/2 observations agree with the paper</span>' in page  # coloured by verdict
    ok = (tmp_path / "experiments" / "fake-ok.html").read_text()
    assert '<span class="disagree">disagrees</span>' in ok  # shown, never hidden
    assert '<span class="inconclusive">inconclusive</span>' in ok  # inside the seeds' spread
    assert '<td class="value missing">none stated</td>' in ok  # a check without a tolerance says so
    assert "RuntimeError: this experiment is broken" in (tmp_path / "experiments" / "fake-broken.html").read_text()
    assert "loss &lt;b&gt;vanishes&lt;/b&gt;" in ok  # text is escaped, never markup
    assert "<td>lr*</td><td>0.1 (our default" in ok  # the defaults that are ours, once, in the config
    assert "steps=5 (full: 50)" in ok  # a quick run states the sizes it actually ran
    ok = next(e for e in summary.entries if e.name == "fake.ok")
    assert ok.record["config"] == {"steps": 5, "lr": 0.1}  # quick settings used
    counts = pd.read_csv(tmp_path / "paper_counts.csv").set_index("paper")  # theory checks vs observations
    # the same counts as the summary above (2 of 3 theory checks passed), plus the experiment that raised
    assert counts.loc["fake-paper"].to_dict() == {
        "experiments": 2,
        "theory_checks": 3,
        "theory_passed": 2,
        "findings": 0,
        "properties": 0,
        "properties_passed": 0,
        "observations": 2,
        "observations_agree": 0,
        "errors": 1,
    }


def test_the_defaults_ours_footnote_is_under_the_first_figure_only(fake_paper, tmp_path, monkeypatch):
    saved = {}
    save = verify_experiment.save_figure

    def spy(figure, stem, *args, **kwargs):
        saved[stem.name] = (has_ours(figure), float(figure.get_size_inches()[1]))
        return save(figure, stem, *args, **kwargs)

    monkeypatch.setattr(verify_experiment, "save_figure", spy)
    reproduce(tmp_path, paper="fake-paper", quick=True, progress=False)
    assert saved["curve"][0] and saved["curve"][1] > 3.0  # the strip is added under the 3-inch panels
    assert saved["panels"] == (False, 3.0)  # dropped, with its strip


def test_reproduce_resumes_and_fresh_reruns(fake_paper, tmp_path):
    reproduce(tmp_path, paper="fake-paper", quick=True, progress=False)
    record = next(tmp_path.glob("runs/fake.ok-*/record.json"))
    mtime = record.stat().st_mtime_ns
    reproduce(tmp_path, paper="fake-paper", quick=True, progress=False)
    assert record.stat().st_mtime_ns == mtime
    reproduce(tmp_path, paper="fake-paper", quick=True, progress=False, fresh=True)
    assert record.stat().st_mtime_ns != mtime


def test_the_report_shows_only_this_calls_experiments(fake_paper, tmp_path, monkeypatch):
    # another paper's run and a quick run of the same experiments share the folder, but are not this call's
    other = Experiment(
        name="other.ok",
        paper="other-paper",
        summary="another paper",
        config_type=ToyConfig,
        run=toy_run,
        quick={"steps": 5},
        claims=(DECREASES, VANISHES, LONG),
        falsifiers=(TOY_FALSIFIER,),
    )
    monkeypatch.setitem(registry.REGISTRY.experiments, "other.ok", other)
    reproduce(tmp_path, paper="other-paper", quick=True, progress=False)
    reproduce(tmp_path, paper="fake-paper", quick=True, progress=False)
    summary = reproduce(tmp_path, paper="fake-paper", progress=False)  # full settings
    assert sorted((e.name, e.record.get("quick")) for e in summary.entries) == [
        ("fake.broken", None),
        ("fake.ok", False),
    ]
    assert all(e.origin in ("", "computed now") for e in summary.entries)  # nothing reused from the other calls
    assert len(list(tmp_path.glob("runs/*"))) == 5  # the other runs stay in the store, out of the report
    page = summary.path.read_text()
    assert "settings: full" in page and "other.ok" not in page and "other-paper" not in page
    pages = sorted(p.name for p in (tmp_path / "experiments").glob("*.html"))  # the other paper's page is gone
    assert len(pages) == 2 and not any("other" in name for name in pages)
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["experiments"] == 2 and list(written["papers"]) == ["fake-paper"]
    counts = pd.read_csv(tmp_path / "paper_counts.csv")
    assert counts["paper"].tolist() == ["fake-paper"] and counts["experiments"].tolist() == [2]


def test_build_report_keeps_the_runs_of_the_keys_given(fake_paper, tmp_path):
    reproduce(tmp_path, paper="fake-paper", quick=True, progress=False)
    index = read_index(tmp_path)
    ok = index.loc[index["label"] == "fake.ok", "key"].tolist()
    assert [e.name for e in build_report(tmp_path, keys=ok).entries] == ["fake.ok"]
    assert [e.name for e in build_report(tmp_path).entries] == ["fake.broken", "fake.ok"]  # default: every run
    with pytest.raises(ValidationError, match=r"keys holds 1 key that no experiment run in .* has: 'nokey'"):
        build_report(tmp_path, keys=[*ok, "nokey"])
    with pytest.raises(ValidationError, match="keys == 'abc', must be a collection of run keys"):
        build_report(tmp_path, keys="abc")


def test_unknown_paper_lists_the_papers(tmp_path):
    with pytest.raises(ValidationError, match="matches no experiment; papers:"):
        reproduce(tmp_path, paper="no-such-paper", progress=False)


def test_build_report_needs_a_sweep_folder(tmp_path):
    with pytest.raises(ValidationError, match="holds no index.parquet"):
        build_report(tmp_path)


def chrome(profile: Path):
    """Selenium driving Debian's chromium + chromedriver; skips only outside CI when one of them is missing."""
    missing = [n for n, p in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)) if not p]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium")
    if missing:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(
                f"CI must have the browser stack, missing {missing}: apt-get install chromium chromium-driver; pip install selenium"
            )
        pytest.skip(f"no headless browser here: missing {missing}")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    # An explicit chromedriver path: Selenium Manager never runs, nothing is downloaded.
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


def test_report_in_headless_chromium_has_no_broken_images_or_links(fake_paper, tmp_path):
    driver = chrome(tmp_path / "profile")
    try:
        summary = reproduce(tmp_path / "report", paper="fake-paper", quick=True, progress=False)
        root = summary.path.parent
        driver.get(summary.path.resolve().as_uri())
        assert driver.title == "attnlab reproduction report"
        seen_images = 0
        for page in [summary.path, *sorted((root / "experiments").glob("*.html"))]:
            driver.get(page.resolve().as_uri())
            images = driver.execute_script(
                "return Array.from(document.images).map(i => [i.src, i.complete && i.naturalWidth > 0])"
            )
            seen_images += len(images)
            assert not [src for src, ok in images if not ok], f"broken images on {page.name}: {images}"
            links = driver.execute_script("return Array.from(document.links).map(a => a.href)")
            assert links
            for href in links:
                target, _, fragment = href.partition("#")
                assert target.startswith("file://"), f"the report links outside itself: {href}"
                file = Path(target.removeprefix("file://"))
                assert file.is_file(), f"broken link on {page.name}: {href}"
                if fragment and file.suffix == ".html":
                    assert f'id="{fragment}"' in file.read_text(), f"no anchor #{fragment} in {file.name}: {href}"
        assert seen_images, "the report shows no figure"
        driver.get((root / "experiments" / "fake-ok.html").resolve().as_uri())
        rows = driver.execute_script("return document.querySelectorAll('table.check-table tr').length")
        assert rows == 6  # header + the three checks and the two observations of fake.ok
    finally:
        driver.quit()


WIDTH = 1400  # px: a laptop browser window


def test_report_at_1400px_fits_the_width_shows_figures_full_width_and_readable_checks(fake_paper, tmp_path):
    driver = chrome(tmp_path / "profile")
    try:
        summary = reproduce(tmp_path / "report", paper="fake-paper", quick=True, progress=False)
        driver.set_window_size(WIDTH, 900)
        driver.get((summary.path.parent / "experiments" / "fake-ok.html").resolve().as_uri())
        inner = driver.execute_script("return window.innerWidth")
        assert inner >= WIDTH - 20, inner  # the window is what we asked for (less a scrollbar, if drawn)
        scroll, client = driver.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert scroll <= client, f"the page scrolls sideways: {scroll} px wide in a {client} px window"
        widths = driver.execute_script(
            "return Array.from(document.querySelectorAll('.figures img')).map(i => i.getBoundingClientRect().width)"
        )
        assert len(widths) == 2 and min(widths) > 1000, widths  # both figures of fake.ok, full width
        links = driver.execute_script(
            "return Array.from(document.querySelectorAll('figcaption a')).map(a => a.textContent + ' ' + a.href)"
        )
        assert sorted(link.split()[-1].rsplit(".", 1)[-1] for link in links) == ["png", "png"]  # quick: no PDF
        # every check row shows a tolerance, and no row of the table wraps into a tall block
        cells = driver.execute_script(
            "return Array.from(document.querySelectorAll('table.check-table tr')).slice(1).map(r => {"
            "  const c = r.cells[3], s = getComputedStyle(r.cells[0]);"
            "  return [c.textContent.trim(), r.getBoundingClientRect().height, parseFloat(s.fontSize)]; })"
        )
        assert all(tolerance for tolerance, _, _ in cells), cells
        lines = max(height / (1.25 * size) for _, height, size in cells)  # 1.25 em: line height of the font
        assert lines <= 4.0, f"a check row wraps into {lines:.1f} lines"
        # math is drawn (Unicode and sub/superscripts), notes are prose, not a printed dict
        claim = driver.execute_script(
            "return Array.from(document.querySelectorAll('table.check-table td')).find("
            "  td => td.textContent.startsWith('L7')).innerHTML"
        )
        assert "λ<sub>max</sub>" in claim and "‖W<sub>T</sub>‖ ≤ η T" in claim and "x'<sup>T</sup>" in claim
        notes = driver.execute_script("return document.querySelector('ul.notes').textContent")
        assert "GD = -4.178, NGD = -70.71" in notes and "{" not in notes
        _save_full_page(driver, tmp_path / "report-1400.png")
    finally:
        driver.quit()


def test_report_screenshot_shows_the_sticky_contents_math_a_disclosure_a_source_link_and_verdicts(fake_paper, tmp_path):
    driver = chrome(tmp_path / "profile")
    try:
        summary = reproduce(tmp_path / "report", paper="fake-paper", quick=True, progress=False)
        driver.set_window_size(WIDTH, 900)
        driver.get((summary.path.parent / "experiments" / "fake-ok.html").resolve().as_uri())
        # the contents: papers, then their experiments' pages, and still on screen once the page is scrolled down
        toc = driver.execute_script(
            "return Array.from(document.querySelectorAll('nav#toc a')).map(a => a.getAttribute('href'))"
        )
        assert toc == [
            "../index.html#summary",
            "../index.html#paper-fake-paper",
            "../experiments/fake-broken.html",
            "../experiments/fake-ok.html",
            "../theory/findings.html",
        ], toc
        driver.execute_script("window.scrollTo(0, document.documentElement.scrollHeight)")
        top, bottom, scrolled = driver.execute_script(
            "const r = document.querySelector('nav#toc').getBoundingClientRect();"
            "return [r.top, r.bottom, window.scrollY]"
        )
        assert scrolled > 300 and 0 <= top <= 1 and bottom > 100, (top, bottom, scrolled)
        driver.execute_script("window.scrollTo(0, 0)")
        # typeset math: lambda_max is a Greek letter with a lowered, smaller subscript
        sub = driver.execute_script(
            "const s = Array.from(document.querySelectorAll('td.math sub')).find(e => e.textContent === 'max');"
            "const style = getComputedStyle(s), parent = getComputedStyle(s.parentElement);"
            "return [s.previousSibling.textContent.slice(-1), style.verticalAlign,"
            "        parseFloat(style.fontSize) < parseFloat(parent.fontSize)]"
        )
        assert sub == ["λ", "sub", True], sub
        # the long tolerance: its first clause in the cell, the whole derivation behind a closed disclosure
        closed, short = driver.execute_script(
            "const d = document.querySelector('details.derivation');"
            "return [d.open, d.querySelector('summary').textContent]"
        )
        assert not closed and short.startswith("bound, +0.1") and len(short) <= 42, short
        driver.execute_script("document.querySelector('details.derivation summary').click()")
        shown = driver.execute_script(
            "const p = document.querySelector('details.derivation p'); return [p.offsetHeight, p.textContent]"
        )
        assert shown[0] > 0 and "largest log t / t" in shown[1], shown
        # sources: a theory page is a link to its copy in the report; "spec §1" of a paper with no page is text
        sources = driver.execute_script(
            "return Array.from(document.querySelectorAll('table.check-table tr')).slice(1).map(r => {"
            "  const a = r.cells[5].querySelector('a'); return [r.cells[5].textContent, a ? a.href : ''] })"
        )
        linked = [href for text, href in sources if text.startswith("implicit-bias-ngd §8.3")]
        assert linked and linked[0].endswith("/report/theory/implicit-bias-ngd.html#8-predictions"), sources
        rendered = Path(linked[0].removeprefix("file://").partition("#")[0]).read_text()
        assert 'id="8-predictions"' in rendered and 'class="arithmatex"' in rendered  # the section, typeset
        assert ["spec §1", ""] in sources
        # verdicts: every observation shows its tolerance (or says none) and one of the three verdicts
        observations = driver.execute_script(
            "return Array.from(document.querySelectorAll('tr.observation')).map(r =>"
            "  [r.cells[3].textContent.trim(), r.cells[4].textContent.trim()])"
        )
        assert [verdict for _, verdict in observations] == ["disagrees", "inconclusive"], observations
        assert observations[0][0] == "none stated" and observations[1][0].startswith("± 0.00015")
        # the settings the run used: quick, the sizes it changed with their full values, our default marked once
        settings = driver.execute_script("return document.querySelector('#fake-ok .settings').textContent")
        assert "quick (CI-sized)" in settings and "steps=5 (full: 50)" in settings and "lr" not in settings, settings
        _save_full_page(driver, tmp_path / "report-features.png")
        assert (tmp_path / "report-features.png").stat().st_size > 10_000
    finally:
        driver.quit()


def _save_full_page(driver, path: Path) -> None:
    """Screenshot of the whole page at the current width (also under $ATTNLAB_SCREENSHOTS, for a person to look)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(WIDTH, min(height + 100, 8000))
    driver.save_screenshot(str(path))
    folder = os.environ.get("ATTNLAB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(folder) / path.name)


def test_reproduce_starts_the_costliest_experiments_first(monkeypatch, tmp_path):
    # two workers finish together only if the long runs (ntk.table1, diffusion.gmm) do not start last
    import importlib

    from attnlab.experiments import list_experiments

    module = importlib.import_module("attnlab.report.reproduce")  # the package exports the function by this name

    submitted = []

    class Submitted(Exception):
        pass

    def capture(jobs, *args, **kwargs):
        submitted.extend(job.params["experiment"] for job in jobs)
        raise Submitted

    monkeypatch.setattr(module, "run_sweep", capture)
    with pytest.raises(Submitted):
        reproduce(tmp_path / "report", progress=False)
    cost = {e.name: e.cost for e in list_experiments()}
    assert sorted(submitted) == sorted(cost)
    assert [cost[name] for name in submitted] == sorted(cost.values(), reverse=True)
    assert submitted[0] == max(cost, key=cost.get)
