"""Seconds the quick experiments spend saving their figures, against matplotlib's plain ``savefig``, in one process.

Each experiment runs once in this process through :func:`attnlab.experiments.run_experiment` (the call that
``attnlab reproduce`` makes in each worker, one torch thread). Every figure it saves is timed as the run saves it:
:func:`attnlab.runner.save_figure` in all (the layout, each format's draw, the PNG encoding, the atomic write) and
``Figure.savefig`` inside it (which holds the layout only where ``save_figure`` leaves it to matplotlib: compare
codes by ``save_figure``'s seconds). A copy of the figure (pickled just before the save) is kept for the second part.

The second part saves the copies again, each from a fresh unpickle, in alternating rounds (``--repeats`` of each):

- ``plain``: matplotlib's own ``figure.savefig(path, format="png", dpi=120)``, which lays a constrained-layout
  figure out in a draw of its own before the draw it writes (what ``save_figure`` did at 870db1d);
- ``save_figure``: :func:`attnlab.runner.save_figure` at quick size (PNG only).

and prints the ratio of their medians (below 1: ``save_figure`` is faster) and whether the PNGs of both and the
file the run wrote have the same pixels. Figures that do not pickle have no copy (counted apart). The seconds of
the runs' own saves compare codes measured one after the other (``PYTHONPATH`` picks the code); the ratio compares
within this run. The load average is printed: on a shared machine alternate the codes.

Run ``python benchmarks/figures.py [--only PREFIX ...] [--exclude PREFIX ...] [--repeats N] [--out DIR]``; all 30
quick experiments and two rounds take about three minutes on two quiet cores.
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image
from reproduction import chosen, code_label, warm_up

import attnlab.verify.experiment as verify_experiment
from attnlab.experiments import run_experiment
from attnlab.runner import save_figure


class Saves:
    """What the runs' saves took, per experiment, and a pickled copy of each figure with the file it became."""

    def __init__(self) -> None:
        self.save: dict[str, float] = {}  # experiment -> seconds in save_figure
        self.savefig: dict[str, float] = {}  # experiment -> seconds in Figure.savefig
        self.copies: list[tuple[str, bytes, Path]] = []  # (experiment, pickled figure, the PNG the run wrote)
        self.unpicklable: dict[str, int] = {}
        self.current = ""

    def run(self, names: list[str], out: Path) -> dict[str, float]:
        """Run each experiment at quick size into ``out``; its run seconds (without the files), by name."""
        plain_savefig, runs_save = Figure.savefig, verify_experiment.save_figure
        self._install(plain_savefig, runs_save)
        seconds = {}
        try:
            for name in names:
                self.current = name
                self.save[name] = self.savefig[name] = 0.0
                record = run_experiment(name, quick=True, out=out / name, progress=False, overwrite=True)
                seconds[name] = record.seconds
                print(f"<!-- {name}: saves {self.save[name]:.2f} s, load {os.getloadavg()[0]:.1f} -->", flush=True)
        finally:
            Figure.savefig, verify_experiment.save_figure = plain_savefig, runs_save
        return seconds

    def _install(self, plain_savefig: Any, runs_save: Any) -> None:
        """Time every ``save_figure`` the runs call and every ``Figure.savefig`` inside (patched in this process)."""

        def timed_savefig(figure: Figure, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return plain_savefig(figure, *args, **kwargs)
            finally:
                self.savefig[self.current] += time.perf_counter() - start

        def timed_save(figure: Figure, stem: Path, *args: Any, **kwargs: Any) -> list[Path]:
            try:
                copy = pickle.dumps(figure)
            except (AttributeError, TypeError, pickle.PicklingError):
                copy = None
                self.unpicklable[self.current] = self.unpicklable.get(self.current, 0) + 1
            start = time.perf_counter()
            files = runs_save(figure, stem, *args, **kwargs)
            self.save[self.current] += time.perf_counter() - start
            if copy is not None:
                self.copies.append((self.current, copy, Path(stem).with_suffix(".png")))
            return files

        Figure.savefig = timed_savefig
        verify_experiment.save_figure = timed_save


def fresh(copy: bytes) -> Figure:
    """The figure of ``copy`` on an Agg canvas, as ``plt.subplots`` makes it (unpickled, a figure has a plain one)."""
    figure = pickle.loads(copy)
    FigureCanvasAgg(figure)
    return figure


def plain(figure: Figure, folder: Path) -> Path:
    """Matplotlib's own save: ``savefig`` lays the figure out in a draw before the one it writes."""
    path = folder / "plain.png"
    figure.savefig(path, format="png", dpi=120)
    return path


def attnlab_save(figure: Figure, folder: Path) -> Path:
    """:func:`attnlab.runner.save_figure` at quick size (PNG only)."""
    return save_figure(figure, folder / "attnlab", ("png",))[0]


def pixels(path: Path) -> np.ndarray:
    """The decoded pixels of a PNG file."""
    with Image.open(path) as image:
        return np.asarray(image)


def compare(copies: list[tuple[str, bytes, Path]], repeats: int, folder: Path) -> dict[str, dict[str, Any]]:
    """Save every copy both ways, in ``repeats`` alternating rounds; per experiment the medians of the rounds'
    seconds, and how many of its figures have the pixels of the run's file both ways (first round)."""
    ways = {"plain": plain, "save_figure": attnlab_save}
    rounds = {name: {way: [0.0] * repeats for way in ways} for name, _, _ in copies}
    same = {(way, i): False for way in ways for i in range(len(copies))}
    for round_ in range(repeats):
        for way, save in ways.items():
            for i, (name, copy, written) in enumerate(copies):
                figure = fresh(copy)
                start = time.perf_counter()
                path = save(figure, folder)
                rounds[name][way][round_] += time.perf_counter() - start
                plt.close(figure)
                if round_ == 0:
                    same[way, i] = np.array_equal(pixels(path), pixels(written))
        print(f"<!-- round {round_ + 1} of {repeats}, load {os.getloadavg()[0]:.1f} -->", flush=True)
    return {
        name: {
            **{way: statistics.median(times) for way, times in by_way.items()},
            "identical": f"{sum(all(same[w, i] for w in ways) for i, c in enumerate(copies) if c[0] == name)}/"
            f"{sum(1 for c in copies if c[0] == name)}",
        }
        for name, by_way in rounds.items()
    }


def table(seconds: dict[str, float], saves: Saves, compared: dict[str, dict[str, Any]]) -> str:
    """Markdown: per experiment, its run and save seconds, and the copies' plain and save_figure medians."""
    head = ["experiment", "run (s)", "save_figure (s)", "savefig (s)", "copies: plain (s)", "save_figure (s)",
            "ratio", "same pixels"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in sorted(seconds, key=lambda n: -saves.save[n]):
        row = compared.get(name)
        copies = ["-", "-", "-", "-"] if row is None else [
            f"{row['plain']:.2f}", f"{row['save_figure']:.2f}", f"{row['save_figure'] / row['plain']:.2f}x",
            row["identical"]]  # fmt: skip
        lines.append(
            f"| {name} | {seconds[name]:.2f} | {saves.save[name]:.2f} | {saves.savefig[name]:.2f} | "
            + " | ".join(copies)
            + " |"
        )
    plain_total = sum(r["plain"] for r in compared.values())
    head_total = sum(r["save_figure"] for r in compared.values())
    lines += [
        "",
        f"In the runs: {sum(saves.save.values()):.1f} s in save_figure ({sum(saves.savefig.values()):.1f} s in "
        f"Figure.savefig) of {sum(seconds.values()) + sum(saves.save.values()):.1f} s of runs with their figures. "
        f"The copies ({len(saves.copies)} figures): plain savefig {plain_total:.1f} s, save_figure "
        f"{head_total:.1f} s (**{head_total / plain_total:.2f}x**)"
        + (f"; {sum(saves.unpicklable.values())} figures did not pickle" if saves.unpicklable else "")
        + ".",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Run the chosen quick experiments, time their saves, compare the copies' saves, print the Markdown section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="experiment name prefixes to run (default all)")
    parser.add_argument("--exclude", nargs="*", default=[], help="experiment name prefixes to leave out")
    parser.add_argument("--repeats", type=int, default=2, help="rounds of saving the copies each way (default 2)")
    parser.add_argument("--out", type=Path, help="keep the run directories here (default a temporary folder)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = chosen(args.only, args.exclude)
    if not names:
        raise SystemExit(f"no experiment matches --only {args.only} --exclude {args.exclude}")
    warm_up(names)
    saves = Saves()
    load = os.getloadavg()[0]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="attnlab-figures-") as tmp:
        out = args.out if args.out is not None else Path(tmp) / "runs"
        seconds = saves.run(names, out)
        compared = compare(saves.copies, args.repeats, Path(tmp))
    print(f"## Saving the quick experiments' figures ({code_label()})\n")
    print(
        f"Command: `python benchmarks/figures.py --repeats {args.repeats}`; {len(names)} experiments in "
        f"{time.perf_counter() - start:.0f} s, 1 torch thread, {os.cpu_count()} cores, load average {load:.2f} at the "
        f"start and {os.getloadavg()[0]:.2f} at the end; matplotlib {matplotlib.__version__}.\n"
    )
    print(table(seconds, saves, compared))


if __name__ == "__main__":
    main()
