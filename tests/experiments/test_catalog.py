"""The catalog is the registry: each module registers the entries that name it, with the catalog's text."""

import subprocess
import sys
from dataclasses import dataclass

import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import list_experiments, registry
from attnlab.experiments.catalog import EXPERIMENTS, find_entry, list_entries
from attnlab.verify import Experiment


def test_each_module_registers_the_entries_that_name_it():
    # a fresh interpreter: import the modules one by one and see which names each import adds to the registry
    code = (
        "import importlib\n"
        "from attnlab.experiments import registry as base\n"
        "from attnlab.experiments.catalog import EXPERIMENTS\n"
        "for module in sorted({e.module for e in EXPERIMENTS}):\n"
        "    before = set(base.REGISTRY.experiments)\n"
        "    importlib.import_module('attnlab.experiments.' + module)\n"
        "    print(module, *sorted(set(base.REGISTRY.experiments) - before))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    added = {name: module for line in out.splitlines() for module, *names in [line.split()] for name in names}
    assert added == {e.name: e.module for e in EXPERIMENTS}


def test_the_registry_shows_the_catalog_text():
    registry = [(e.name, e.paper, e.summary) for e in list_experiments()]
    assert registry == [(e.name, e.paper, e.summary) for e in list_entries()]
    assert len({e.name for e in EXPERIMENTS}) == len(EXPERIMENTS)


@pytest.mark.parametrize("paper", ["all", "implicit-bias-ngd", "ntk", "regression", "flagship"])
def test_filtering_by_paper_or_prefix_matches_list_experiments(paper):
    assert [e.name for e in list_entries(paper)] == [e.name for e in list_experiments(paper)]


def test_a_paper_that_matches_nothing_is_refused_as_reproduce_refuses_it():
    # list_entries returned [] and `attnlab list --paper bogus` printed nothing with exit status 0
    with pytest.raises(ValidationError, match="paper == 'bogus' matches no experiment; papers: implicit-bias-ngd"):
        list_entries("bogus")
    assert list_experiments("bogus") == []  # what reproduce reads before it raises the same message
    from click.testing import CliRunner

    from attnlab.cli import main

    result = CliRunner().invoke(main, ["list", "--paper", "bogus"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("error: paper == 'bogus' matches no experiment; papers: ")


@dataclass(frozen=True)
class _Config:
    steps: int = 1


def _run(config, ctx):
    raise AssertionError("never run")


def test_an_experiment_takes_its_paper_and_summary_from_the_catalog(monkeypatch):
    monkeypatch.setattr(registry.REGISTRY, "experiments", {})
    entry = find_entry("flagship")
    experiment = registry.register(Experiment(name="flagship", config_type=_Config, run=_run))
    assert (experiment.paper, experiment.summary) == (entry.paper, entry.summary)


def test_a_paper_or_summary_that_differs_from_the_catalog_is_refused(monkeypatch):
    monkeypatch.setattr(registry.REGISTRY, "experiments", {})
    with pytest.raises(ValidationError, match="summary='other' differs from the catalog's"):
        registry.register(Experiment(name="flagship", config_type=_Config, run=_run, summary="other"))
    with pytest.raises(ValidationError, match="paper='kq-nuclear-norm' differs"):
        registry.register(Experiment(name="flagship", config_type=_Config, run=_run, paper="kq-nuclear-norm"))


def test_an_experiment_outside_the_catalog_brings_its_own_text(monkeypatch):
    monkeypatch.setattr(registry.REGISTRY, "experiments", {})
    mine = registry.register(
        Experiment(name="mine.one", config_type=_Config, run=_run, paper="mine", summary="my experiment")
    )
    assert (mine.paper, mine.summary) == ("mine", "my experiment")
    with pytest.raises(ValidationError, match="'mine.two' is not in the catalog of attnlab.experiments; add an Entry"):
        registry.register(Experiment(name="mine.two", config_type=_Config, run=_run))


def test_importing_the_package_or_the_catalog_loads_no_experiment_and_no_torch():
    code = "import sys, attnlab.experiments.catalog; print(sorted(m for m in sys.modules if m in ('torch', 'attnlab.experiments.registry')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
