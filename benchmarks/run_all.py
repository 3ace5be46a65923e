"""Run every benchmark script in ``benchmarks/`` with its default options, one after the other (``make bench``).

Each script prints its own Markdown section; this runner prints them in file-name order, separated by blank
lines, with the wall time of each, and exits non-zero if any script failed (after running the others). Paste
the output into ``BENCHMARKS.md``.

Run ``python benchmarks/run_all.py [NAME ...]``; names (``batched_throughput``) restrict it to those scripts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def scripts(names: list[str]) -> list[Path]:
    """The benchmark scripts of ``benchmarks/`` (every ``*.py`` but this one), restricted to ``names`` if given.

    Raises
    ------
    SystemExit
        When a name matches no script (the message lists the scripts there are).
    """
    found = sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_"))
    if not names:
        return found
    chosen = [p for p in found if p.stem in names]
    missing = sorted(set(names) - {p.stem for p in chosen})
    if missing:
        raise SystemExit(f"no benchmark named {missing}; there are {[p.stem for p in found]}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    """Run the scripts; return 0 if all of them succeeded, 1 otherwise."""
    failed = []
    for path in scripts(sys.argv[1:] if argv is None else argv):
        print(f"<!-- {path.name} -->", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(path)])
        print(f"\n<!-- {path.name}: exit {code}, {time.perf_counter() - start:.0f} s -->\n", flush=True)
        if code != 0:
            failed.append(path.name)
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
