"""benchmarks/reproduction.py reads a pool reproduction's per-experiment seconds (--from-report) into its table."""

import json
from pathlib import Path

import pytest


@pytest.fixture
def bench(load_script):
    return load_script("benchmarks/reproduction.py")


def _run(folder: Path, name: str, run: float, call: float, rows: int, quick: bool = False) -> None:
    run_dir = folder / "runs" / f"{name}-abc"
    run_dir.mkdir(parents=True)
    record = {"experiment": name, "quick": quick, "timings": {"run_seconds": run}, "finished": "2026-11-28T06:00:00"}
    (run_dir / "record.json").write_text(json.dumps(record))
    (run_dir / "outcome.json").write_text(json.dumps({"status": "done", "seconds": call}))
    (run_dir / "checks.csv").write_text("claim,passed\n" + "".join(f"c{i},True\n" for i in range(rows)))


def test_rows_from_a_report_are_its_runs_seconds_and_compare_with_stored_codes(bench, tmp_path):
    _run(tmp_path, "a.one", 10.0, 11.5, 3)
    _run(tmp_path, "b.two", 2.0, 2.5, 1)
    rows = bench.rows_from_report(tmp_path)
    assert [(r["experiment"], r["seconds"], r["call_seconds"], r["rows"], r["size"]) for r in rows] == [
        ("a.one", 10.0, 11.5, 3, "full"),
        ("b.two", 2.0, 2.5, 1, "full"),
    ]
    stored = {"old": {"a.one": {"seconds": "20.0"}}}
    text = bench.table(rows, stored, "new")
    assert "| a.one | 3 |  | 20.00 | 10.00 | 0.50x |" in text
    assert "the 1 experiments it had take 10.0 s against 20.0 s (**0.50x**); 1 experiments it lacked take 2.0 s" in text


def test_a_code_that_had_none_of_the_experiments_run_is_said_so(bench):
    rows = [{"experiment": "new.one", "seconds": 4.0, "rows": 2, "load1": 0.5}]
    text = bench.table(rows, {"old": {"a.one": {"seconds": "20.0"}}}, "now")
    assert "| new.one | 2 | 0.5 | new | 4.00 | - |" in text
    assert "Against old: it had none of these experiments; 1 experiments it lacked take 4.0 s." in text


def test_a_folder_without_runs_is_refused_with_what_to_pass(bench, tmp_path):
    with pytest.raises(SystemExit, match="pass the --out folder of `attnlab reproduce`"):
        bench.rows_from_report(tmp_path)
