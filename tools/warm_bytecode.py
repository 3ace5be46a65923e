"""Write the bytecode of the modules an attnlab process imports, once, next to their sources.

The Makefile installs with ``pip install --no-compile`` (precompiling all of torch costs a minute) and leaves the
compiling to Python, which compiles each module on its first import and caches the result. Where writing bytecode is
off (``PYTHONDONTWRITEBYTECODE=1``, as on many CI machines and on the machines this project is built on) nothing
is cached, and every process compiles cvxpy, scipy.stats, matplotlib, pandas and torch._dynamo again: measured on
the 2-core build machine, the imports of one reproduction worker took 6.1-6.5 s without the cache and 3.9-4.2 s
with it. A reproduction starts three such processes and the tests dozens.

This script turns writing on for itself only and imports what the CLI, every attnlab module (experiments and report
included) and, with ``--test``, pytest import. Python reads the cache whatever ``PYTHONDONTWRITEBYTECODE`` says, and
recompiles (in memory) a module whose source is newer than its cache.

Run ``python tools/warm_bytecode.py [--test]`` (``make demo`` and ``make test`` do, after installing).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import time

#: Third-party modules an attnlab process imports lazily (attnlab's own modules import the rest).
LIBRARIES = (
    "torch._dynamo",
    "cvxpy",
    "scipy.optimize",
    "scipy.sparse.linalg",
    "scipy.stats",
    "matplotlib.pyplot",
    "matplotlib.backends.backend_agg",
    "matplotlib.backends.backend_pdf",
    "pandas",
    "pyarrow.parquet",
)
#: What the tests and the strict docs build import besides (``--test``; the test extra of pyproject.toml).
TEST_LIBRARIES = (
    "pytest",
    "selenium.webdriver",
    "torch.utils.tensorboard",
    "transformers",
    "mkdocs.commands.build",
    "material",
    "mkdocstrings",
    "ipykernel",
)


def warm(names: list[str]) -> tuple[int, list[str]]:
    """Import ``names`` and every submodule of attnlab with bytecode writing on.

    Returns the number of modules loaded and the names that failed to import (optional extras such as ray or
    timm that this venv does not have), which are skipped.
    """
    sys.dont_write_bytecode = False
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            failed.append(name)
    import attnlab

    for info in pkgutil.walk_packages(attnlab.__path__, "attnlab.", onerror=failed.append):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            failed.append(info.name)
    return len(sys.modules), failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--test", action="store_true", help="also pytest and the test extras")
    args = parser.parse_args()
    start = time.perf_counter()
    count, failed = warm(list(LIBRARIES) + (list(TEST_LIBRARIES) if args.test else []))
    skipped = f"; not installed, skipped: {', '.join(failed)}" if failed else ""
    print(f"bytecode written for {count} modules in {time.perf_counter() - start:.1f} s{skipped}")


if __name__ == "__main__":
    main()
