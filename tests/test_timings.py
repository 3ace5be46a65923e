"""The measured times quoted by README.md, the Makefile and the experiment pages come from one table,
docs/timings.yml (tools/timings.py), and its page docs/timings.md is generated from it."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def timings(load_script):
    return load_script("tools/timings.py")


def test_the_timings_page_is_generated_from_the_table(timings):
    assert timings.main(["render", "--check"]) == 0, "run python tools/timings.py render"


def test_durations_are_written_as_the_pages_quote_them(timings):
    assert [timings.duration(s) for s in (0.08, 6.78, 64, 699, 456.4)] == [
        "0.1 s",
        "7 s",
        "64 s",
        "11 min 39 s",
        "7 min 36 s",
    ]


_DURATION = r"(\d+ min )?\d+(\.\d+)? s\b"


def _readme_rows() -> dict[str, str]:
    """The README's command table: first cell (the command, without backticks) -> last cell (its time)."""
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith("`"):
            rows[cells[0].strip("`")] = cells[-1]
    return rows


def test_every_time_in_the_readme_command_table_is_the_tables(timings):
    rows = _readme_rows()
    quoted = {entry["readme"]: timings.quoted(entry) for entry in timings.load().values() if "readme" in entry}
    assert quoted, "no entry of docs/timings.yml names its README row"
    # the cell's first duration is the measured one (later ones are comparisons: "28 s ...; 26-27 s for d86ae0a")
    first = {cmd: re.search(_DURATION, cell) for cmd, cell in rows.items()}
    wrong = [(cmd, rows.get(cmd), time) for cmd, time in quoted.items() if not first.get(cmd) or first[cmd][0] != time]
    assert not wrong, f"README rows whose time is not docs/timings.yml's (command, README, table): {wrong}"
    timed = [cmd for cmd, cell in rows.items() if re.search(r"\d+(\.\d+)? (s|min)\b", cell)]
    unsourced = [cmd for cmd in timed if cmd not in quoted]
    assert not unsourced, f"README rows with a time that docs/timings.yml does not hold: {unsourced}"


def test_the_readme_pytest_sentence_is_the_tables(timings):
    entry = timings.load()["pytest"]
    assert f"pytest took {timings.quoted(entry)} for {entry['tests']} tests" in (ROOT / "README.md").read_text()


def test_the_makefile_and_the_experiment_pages_quote_the_full_reproduction_from_the_table(timings):
    entry = timings.load()["reproduce-full"]
    time = timings.quoted(entry)
    checks = re.search(r"(\d+) of (\d+) theorem checks", entry["note"])
    assert f"measured {time}, {checks[1]}/{checks[2]} theorem checks" in (ROOT / "Makefile").read_text()
    latest = []
    for page in sorted((ROOT / "docs" / "experiments").glob("*.md")):
        latest += [(page.name, m.start()) for m in re.finditer(r"Latest run", page.read_text())]
    assert len(latest) == 1, f"one 'Latest run' of the full reproduction, not {latest}"
    page, at = latest[0]
    paragraph = (ROOT / "docs" / "experiments" / page).read_text()[at : at + 400]
    assert time in paragraph and entry["commit"] in paragraph, paragraph
