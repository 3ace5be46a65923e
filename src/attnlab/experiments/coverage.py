"""The coverage tables of docs/theory: each paper's declared results against the claims of every experiment.

Each paper's experiment package declares its numbered results (:func:`register_results`);
``python -m attnlab.experiments.coverage --write`` puts each paper's table (:meth:`attnlab.verify.Registry.coverage_page`)
between the coverage markers of ``docs/theory/<paper>.md``, and ``tests/experiments/test_coverage.py`` fails when
a page is out of date.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from attnlab.experiments.registry import REGISTRY
from attnlab.verify.coverage import coverage_markdown

__all__ = ["coverage_rows", "main", "paper_results", "register_results", "update_page"]

register_results = REGISTRY.register_results
paper_results = REGISTRY.paper_results
coverage_rows = REGISTRY.coverage_rows


def update_page(path: Path, paper: str) -> str:
    """The text of ``path`` (``docs/theory/<paper>.md``) with ``paper``'s coverage block made current."""
    return REGISTRY.coverage_page(Path(path).read_text(), paper)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m attnlab.experiments.coverage [--write] [--docs docs/theory]``: print or write the tables."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the coverage block of each theory page")
    parser.add_argument("--docs", default="docs/theory", help="folder of the theory pages")
    args = parser.parse_args(argv)
    for paper in REGISTRY.papers:
        if not paper_results(paper):
            continue
        path = Path(args.docs) / f"{paper}.md"
        if args.write:
            path.write_text(update_page(path, paper))
        else:
            print(coverage_markdown(coverage_rows(paper)))
    return 0


if __name__ == "__main__":
    # run the registry's own module, not this __main__ copy (register_results fills the imported module's table)
    from attnlab.experiments.coverage import main as _registered_main

    raise SystemExit(_registered_main())
