"""Every example in attnlab's docstrings runs, as written, and prints what it shows (the doctests of `make test`).

The examples are written for a user's session, so they run under torch's own default dtype (float32), not the
float64 that tests/conftest.py sets for the other tests.
"""

import doctest
import importlib
import pkgutil

import pytest
import torch

import attnlab


def _modules() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(attnlab.__path__, "attnlab.")]
    return ["attnlab", *sorted(name for name in names if not name.endswith("__main__"))]


def test_the_docstrings_hold_examples():
    """The finder below sees the examples (a broken walk would pass every module with nothing run)."""
    finder = doctest.DocTestFinder()
    found = sum(len(t.examples) for t in finder.find(importlib.import_module("attnlab.optim.normalized_gd")))
    assert found >= 3


@pytest.fixture
def stock_torch_dtype():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    yield
    torch.set_default_dtype(previous)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name, stock_torch_dtype):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    for test in doctest.DocTestFinder().find(module, name):
        if test.examples:
            runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.failed == 0, "".join(report)
