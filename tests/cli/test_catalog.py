"""The static table behind ``attnlab list`` says what the registry of experiments says."""

import pytest

from attnlab.cli.catalog import EXPERIMENTS, Entry, list_entries
from attnlab.experiments import list_experiments


def test_the_catalog_is_the_registry():
    registry = [Entry(e.name, e.paper, e.summary) for e in list_experiments()]
    fresh = "\n".join(f"    Entry({e.name!r}, {e.paper!r},\n          {e.summary!r})," for e in registry)
    assert list_entries() == registry, f"paste into EXPERIMENTS of src/attnlab/cli/catalog.py:\n{fresh}"
    assert len(set(EXPERIMENTS)) == len(EXPERIMENTS)


@pytest.mark.parametrize("paper", ["all", "implicit-bias-ngd", "ntk", "regression", "flagship", "no-such-paper"])
def test_filtering_by_paper_or_prefix_matches_list_experiments(paper):
    assert [e.name for e in list_entries(paper)] == [e.name for e in list_experiments(paper)]
