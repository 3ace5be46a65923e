"""Named experiments, each loaded on demand from the module its catalog entry names, and the results of the
papers they test.

A catalog lists every experiment once (an entry with ``name``, ``paper``, ``module`` and ``summary``: plain text
that loads nothing heavy); a :class:`Registry` over it imports only the module a name needs, whose
``registry.register(Experiment(...))`` takes the paper and the summary from the catalog. The project's registry
is :data:`attnlab.experiments.registry.REGISTRY`; a researcher's own package of experiments can keep its own.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from attnlab._validation import ValidationError, check_in
from attnlab.verify import coverage
from attnlab.verify.coverage import PaperResult
from attnlab.verify.experiment import Experiment, RunRecord, run_experiment

__all__ = ["CatalogEntry", "Registry"]


class CatalogEntry(Protocol):
    """One line of a catalog: the experiment's name, its paper (theory page), its module and its summary."""

    name: str
    paper: str
    module: str
    summary: str


class Registry:
    """Experiments by name, loaded on demand from a catalog, and the numbered results of each paper.

    Parameters
    ----------
    catalog : sequence of CatalogEntry
        Every experiment, once; ``module`` is relative to ``package``.
    package : str
        The package of the experiment modules (``"attnlab.experiments"``).
    papers : mapping of str to str, optional
        Paper (theory page stem) -> its id in result names (``{"implicit-bias-ngd": "001"}``): the papers whose
        results :meth:`register_results` accepts.

    Attributes
    ----------
    experiments : dict of str to Experiment
        The registered experiments by name (those of the modules imported so far).
    results : dict of str to tuple of PaperResult
        The declared results by paper.
    """

    def __init__(self, catalog: Sequence[CatalogEntry], package: str, papers: Mapping[str, str] | None = None):
        self.catalog = tuple(catalog)
        self.package = package
        self.papers = dict(papers or {})
        self.experiments: dict[str, Experiment[Any]] = {}
        self.results: dict[str, tuple[PaperResult, ...]] = {}
        self._by_name = {entry.name: entry for entry in self.catalog}

    def register(self, experiment: Experiment[Any]) -> Experiment[Any]:
        """Add ``experiment``, with the paper and summary its catalog entry gives it.

        Parameters
        ----------
        experiment : Experiment
            An experiment the catalog lists, or one of your own that gives ``paper=`` and ``summary=``.

        Returns
        -------
        Experiment
            ``experiment`` with its catalog text filled in; the registry holds this one.

        Raises
        ------
        ValidationError
            When the name is registered twice, is not in the catalog and comes without paper and summary, or gives
            a paper or summary that differs from the catalog's.
        """
        if experiment.name in self.experiments:
            raise ValidationError(f"experiment {experiment.name!r} is registered twice")
        entry = self._by_name.get(experiment.name)
        if entry is None:
            if not (experiment.paper and experiment.summary):
                raise ValidationError(
                    f"experiment {experiment.name!r} is not in the catalog of {self.package}; add an Entry there, "
                    "or pass paper= and summary= for an experiment of your own"
                )
        else:
            for key in ("paper", "summary"):
                given, listed = getattr(experiment, key), getattr(entry, key)
                if given and given != listed:
                    raise ValidationError(
                        f"experiment {experiment.name!r}: {key}={given!r} differs from the catalog's {listed!r}; "
                        f"leave it out (the catalog of {self.package} is where it is written)"
                    )
            experiment = dataclasses.replace(experiment, paper=entry.paper, summary=entry.summary)
        self.experiments[experiment.name] = experiment
        return experiment

    def get(self, name: str) -> Experiment[Any]:
        """The experiment called ``name``, importing only the module the catalog names.

        Parameters
        ----------
        name : str
            An experiment name (``attnlab list``).

        Returns
        -------
        Experiment

        Raises
        ------
        ValidationError
            When no experiment has that name; the message lists the known ones.
        """
        entry = self._by_name.get(name)
        if entry is not None:
            importlib.import_module(f"{self.package}.{entry.module}")
        try:
            return self.experiments[name]
        except KeyError:
            known = ", ".join(sorted(set(self._by_name) | set(self.experiments)))
            raise ValidationError(f"unknown experiment {name!r}; known experiments: {known}") from None

    def load_all(self) -> None:
        """Import every module of the catalog, which registers every experiment."""
        for module in sorted({entry.module for entry in self.catalog}):
            importlib.import_module(f"{self.package}.{module}")

    def list(self, paper: str | None = None) -> list[Experiment[Any]]:
        """All experiments, sorted by name.

        Parameters
        ----------
        paper : str, optional
            Keep those of this paper (theory page stem) or name prefix; ``None`` or ``"all"`` keeps every one.

        Returns
        -------
        list of Experiment
        """
        self.load_all()
        found = sorted(self.experiments.values(), key=lambda e: e.name)
        if paper is not None and paper != "all":
            found = [e for e in found if e.paper == paper or e.name.split(".")[0] == paper]
        return found

    def run(
        self,
        name: str,
        overrides: Sequence[str] | Mapping[str, Any] = (),
        *,
        quick: bool = False,
        out: str | Path | None = None,
        progress: bool = True,
        overwrite: bool | None = False,
    ) -> RunRecord:
        """Run the named experiment and write its outputs (:func:`attnlab.verify.run_experiment`).

        Parameters
        ----------
        name : str
            A registered experiment.
        overrides, quick, out, progress, overwrite
            As for :func:`attnlab.verify.run_experiment`.

        Returns
        -------
        RunRecord
            The run directory, the check table and the run's wall time.
        """
        return run_experiment(self.get(name), overrides, quick=quick, out=out, progress=progress, overwrite=overwrite)

    def register_results(self, paper: str, results: Sequence[PaperResult]) -> None:
        """Declare the numbered results of ``paper`` with an empirically checkable claim; once per paper.

        Parameters
        ----------
        paper : str
            One of ``papers`` (e.g. ``"implicit-bias-ngd"``).
        results : sequence of PaperResult
            Each id starts with the paper's id (``"001:"``).

        Raises
        ------
        ValidationError
            On a paper outside ``papers``, or a result id of another paper.
        """
        check_in("paper", paper, tuple(self.papers))
        prefix = self.papers[paper] + ":"
        wrong = [r.id for r in results if not r.id.startswith(prefix)]
        if wrong:
            raise ValidationError(f"results {wrong} of {paper!r} must start with {prefix!r}")
        self.results[paper] = tuple(results)

    def paper_results(self, paper: str) -> tuple[PaperResult, ...]:
        """The declared results of ``paper`` (every experiment module imported first).

        Parameters
        ----------
        paper : str
            A paper of ``papers``.

        Returns
        -------
        tuple of PaperResult
            Empty for a paper that declares none.
        """
        self.load_all()
        return self.results.get(paper, ())

    def coverage_rows(self, paper: str) -> list[dict[str, str]]:
        """The rows of ``paper``'s coverage table (:func:`attnlab.verify.coverage.coverage_rows`).

        Parameters
        ----------
        paper : str
            A theory page stem; one outside ``papers`` (a test's fake paper) has no table.

        Returns
        -------
        list of dict
            Empty for a paper outside ``papers``.
        """
        if paper not in self.papers:
            return []
        return coverage.coverage_rows(self.papers[paper], self.paper_results(paper), self.list())

    def coverage_page(self, text: str, paper: str) -> str:
        """``text`` (the theory page of ``paper``) with its coverage block made current.

        Parameters
        ----------
        text : str
            The page's Markdown.
        paper : str
            A paper of ``papers``.

        Returns
        -------
        str
        """
        return coverage.replace_block(text, coverage.coverage_markdown(self.coverage_rows(paper)))
