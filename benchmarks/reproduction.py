"""Seconds of each experiment of the reproduction, quick or full size, as ratios against stored earlier measurements.

Each experiment runs in this process through :func:`attnlab.experiments.run_experiment`, the call that
``attnlab reproduce`` makes in each worker (one torch thread, as the pool's two workers on two cores have), and its
seconds are the run's own ``run_seconds`` (what ``record.json`` stores: the experiment's ``run``, without writing
its files). The stored seconds are in ``benchmarks/data/reproduction-<size>.csv``, one row per (code, experiment),
measured by this script (``--record``); the table prints, per experiment, the stored seconds of every code
measured and this run's, and the ratio of this run to each. Experiments that a stored code did not have are new
rows, totalled apart. The machine's load average is printed next to every time: on a shared machine wall times are
only comparable within one session, so measure the codes to compare one after the other (``PYTHONPATH`` picks the
code: the script imports whichever ``attnlab`` is first on the path).

Run ``python benchmarks/reproduction.py [--quick | --full] [--only PREFIX ...] [--exclude PREFIX ...]
[--record LABEL] [--out DIR]``, or ``--from-report DIR [--record LABEL]`` to read (and store) the per-experiment
seconds of an ``attnlab reproduce --executor pool`` run instead of running anything. ``--quick`` (the default) takes a couple of minutes on two quiet cores.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import io
import json
import os
import platform
import pstats
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from attnlab.experiments import list_experiments, run_experiment

HERE = Path(__file__).resolve().parent
COLUMNS = ["code", "size", "experiment", "seconds", "call_seconds", "rows", "load1", "date", "threads"]


def stored_path(size: str) -> Path:
    """The CSV of stored seconds for ``size`` (``"quick"`` or ``"full"``)."""
    return HERE / "data" / f"reproduction-{size}.csv"


def read_stored(size: str) -> dict[str, dict[str, dict[str, str]]]:
    """Stored rows: code label -> experiment -> the row of its fastest recorded run (the best of the rounds: on a
    shared machine, the run least slowed by others)."""
    path = stored_path(size)
    stored: dict[str, dict[str, dict[str, str]]] = {}
    if path.exists():
        with path.open() as handle:
            for row in csv.DictReader(handle):
                best = stored.setdefault(row["code"], {}).get(row["experiment"])
                if best is None or float(row["seconds"]) < float(best["seconds"]):
                    stored[row["code"]][row["experiment"]] = row
    return stored


def code_label() -> str:
    """Short commit of the imported ``attnlab``'s checkout, ``+dirty`` when its sources differ from it."""
    import attnlab

    where = Path(attnlab.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "."], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def chosen(only: list[str], exclude: list[str]) -> list[str]:
    """Names of the registered experiments that start with one of ``only`` (all if empty) and none of ``exclude``."""
    names = [e.name for e in list_experiments()]
    if only:
        names = [n for n in names if any(n.startswith(p) for p in only)]
    return [n for n in names if not any(n.startswith(p) for p in exclude)]


def warm_up(names: list[str]) -> None:
    """Import what experiments import lazily, once, before any is timed: each experiment's module, cvxpy, scipy's
    statistics, pyplot and ``torch._dynamo`` (which the first ``torch.optim`` optimizer imports, seconds on a cold
    process). A pool worker pays these once for all its experiments; timed inside the first experiment that needs
    them, they would be charged to whichever ran first."""
    import cvxpy  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import scipy.stats  # noqa: F401

    from attnlab.experiments import get_experiment

    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    for name in names:
        get_experiment(name)


def measure(names: list[str], quick: bool, out: Path, profile: Path | None = None) -> list[dict[str, object]]:
    """Run each experiment once, in this process; one row of :data:`COLUMNS` per experiment (``code`` unset).

    With ``profile``, each run is under cProfile: ``profile/<name>.prof`` and, in ``profile/<name>.txt``, the
    functions that take the most time, by own time and by cumulative time (its seconds are then inflated by the
    profiler: use them for shares, not against the stored ones).
    """
    rows = []
    for name in names:
        load = os.getloadavg()[0]
        profiler = cProfile.Profile() if profile is not None else None
        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        record = run_experiment(name, quick=quick, out=out / name, progress=False, overwrite=True)
        if profiler is not None:
            profiler.disable()
        call = time.perf_counter() - start  # the run plus writing its tables, figures and record
        if profiler is not None and profile is not None:
            write_profile(profiler, profile, name)
        rows.append(
            {
                "size": "quick" if quick else "full",
                "experiment": name,
                "seconds": round(record.seconds, 3),
                "call_seconds": round(call, 3),
                "rows": len(record.checks),
                "load1": round(load, 2),
                "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "threads": torch.get_num_threads(),
            }
        )
        print(
            f"<!-- {name}: {record.seconds:.2f} s ({call:.2f} s with its files), {len(record.checks)} rows, load {load:.1f} -->",
            flush=True,
        )
    return rows


def rows_from_report(folder: Path) -> list[dict[str, object]]:
    """One row of :data:`COLUMNS` per experiment of an ``attnlab reproduce`` report in ``folder`` (``code`` unset).

    ``seconds`` is each run's ``run_seconds`` (record.json) and ``call_seconds`` the job's seconds in its pool worker
    with its files (outcome.json); the load average was not recorded by the run (left empty). This stores a pool
    reproduction's own seconds, e.g. the full size, where running every experiment again here would take as long.
    """
    rows = []
    for record_path in sorted(folder.glob("runs/*/record.json")):
        record = json.loads(record_path.read_text())
        outcome_path = record_path.parent / "outcome.json"
        call = json.loads(outcome_path.read_text())["seconds"] if outcome_path.exists() else ""
        with (record_path.parent / "checks.csv").open() as handle:
            count = sum(1 for _ in csv.DictReader(handle))
        rows.append(
            {
                "size": "quick" if record["quick"] else "full",
                "experiment": record["experiment"],
                "seconds": round(record["timings"]["run_seconds"], 3),
                "call_seconds": round(call, 3) if call != "" else "",
                "rows": count,
                "load1": "",
                "date": record.get("finished", ""),
                "threads": 1,
            }
        )
    if not rows:
        raise SystemExit(f"{folder} holds no runs/*/record.json: pass the --out folder of `attnlab reproduce`")
    return rows


def write_profile(profiler: cProfile.Profile, folder: Path, name: str) -> None:
    """``folder/<name>.prof`` and ``folder/<name>.txt`` (the top 30 functions by own and by cumulative time)."""
    folder.mkdir(parents=True, exist_ok=True)
    profiler.dump_stats(folder / f"{name}.prof")
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(30)
    (folder / f"{name}.txt").write_text(text.getvalue())


def append_stored(size: str, label: str, rows: list[dict[str, object]]) -> None:
    """Append ``rows`` under code ``label`` to the stored CSV of ``size`` (header written for a new file)."""
    path = stored_path(size)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({**row, "code": label})


def table(rows: list[dict[str, object]], stored: dict[str, dict[str, dict[str, str]]], label: str) -> str:
    """Markdown: per experiment, every stored code's seconds, ``rows``' (code ``label``), and their ratios."""
    codes = [c for c in stored if c != label]
    head = ["experiment", "rows", "load", *[f"{c} (s)" for c in codes], f"{label} (s)", *[f"/ {c}" for c in codes]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in sorted(rows, key=lambda r: -float(r["seconds"])):
        name, now = str(row["experiment"]), float(row["seconds"])
        before = [float(stored[c][name]["seconds"]) if name in stored[c] else None for c in codes]
        cells = [f"{b:.2f}" if b is not None else "new" for b in before]
        ratios = [f"{now / b:.2f}x" if b else "-" for b in before]
        lines.append(
            f"| {name} | {row['rows']} | {row['load1']} | " + " | ".join([*cells, f"{now:.2f}", *ratios]) + " |"
        )
    for c in codes:
        common = [r for r in rows if r["experiment"] in stored[c]]
        now = sum(float(r["seconds"]) for r in common)
        then = sum(float(stored[c][str(r["experiment"])]["seconds"]) for r in common)
        extra = [r for r in rows if r["experiment"] not in stored[c]]
        had = (
            f"the {len(common)} experiments it had take {now:.1f} s against {then:.1f} s (**{now / then:.2f}x**)"
            if common
            else "it had none of these experiments"
        )
        lacked = f"; {len(extra)} experiments it lacked take {sum(float(r['seconds']) for r in extra):.1f} s"
        lines += ["", f"Against {c}: {had}" + (lacked if extra else "") + "."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Measure the chosen experiments, optionally store their seconds, and print the Markdown section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="quick", action="store_true", default=True, help="CI sizes (default)")
    size.add_argument("--full", dest="quick", action="store_false", help="the full reproduction's sizes")
    parser.add_argument("--only", nargs="*", default=[], help="experiment name prefixes to run (default all)")
    parser.add_argument("--exclude", nargs="*", default=[], help="experiment name prefixes to leave out")
    parser.add_argument("--record", metavar="LABEL", help="append this run's seconds to the stored CSV as LABEL")
    parser.add_argument("--out", type=Path, help="keep the run directories here (default a temporary folder)")
    parser.add_argument("--profile", type=Path, help="cProfile each experiment into this folder (slower runs)")
    parser.add_argument(
        "--compare", metavar="LABEL", help="run nothing: print the stored LABEL's best runs against the other codes"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (the pool's workers: 1)")
    parser.add_argument(
        "--from-report",
        metavar="DIR",
        type=Path,
        help="run nothing: read the seconds of an `attnlab reproduce --out DIR` run (its size is the run's own)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    size_name = "quick" if args.quick else "full"
    if args.compare:
        stored = read_stored(size_name)
        if args.compare not in stored:
            raise SystemExit(f"no stored code {args.compare!r} at {size_name} size; there are {sorted(stored)}")
        names = set(chosen(args.only, args.exclude))
        mine = [r for r in stored[args.compare].values() if r["experiment"] in names]
        print(f"## The reproduction, {size_name} size: {args.compare} against the stored codes (best of the rounds)\n")
        print(table(mine, stored, args.compare))
        return
    if args.from_report:
        rows = rows_from_report(args.from_report)
        size_name = str(rows[0]["size"])
        label = args.record or code_label()
        stored = read_stored(size_name)
        if args.record:
            append_stored(size_name, label, rows)
        print(f"## The reproduction, {size_name} size, per experiment ({label}, read from {args.from_report})\n")
        print(table(rows, stored, label))
        return
    names = chosen(args.only, args.exclude)
    if not names:
        raise SystemExit(f"no experiment matches --only {args.only} --exclude {args.exclude}")
    stored = read_stored(size_name)
    label = args.record or code_label()
    warm_up(names)
    start = time.perf_counter()
    if args.out is not None:
        rows = measure(names, args.quick, args.out, args.profile)
    else:
        with tempfile.TemporaryDirectory(prefix="attnlab-reproduction-") as tmp:
            rows = measure(names, args.quick, Path(tmp), args.profile)
    wall = time.perf_counter() - start
    if args.record:
        append_stored(size_name, label, rows)
    print(f"## The reproduction, {size_name} size, per experiment ({label})\n")
    print(
        f"Command: `python benchmarks/reproduction.py --{size_name}`; {len(rows)} experiments in {wall:.0f} s "
        f"(sum of run seconds {sum(float(r['seconds']) for r in rows):.1f} s, "
        f"{sum(float(r['call_seconds']) for r in rows):.1f} s with the files each writes), {args.threads} thread, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
        f"{rows[0]['load1']} at the start and {os.getloadavg()[0]:.2f} at the end. Ratios are this run's seconds "
        "over the stored code's (below 1: faster now).\n"
    )
    print(table(rows, stored, label))


if __name__ == "__main__":
    main()
