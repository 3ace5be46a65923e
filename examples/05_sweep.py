"""Run a sweep from a YAML file, then read every run back as one tidy table and summarise it.

    python examples/05_sweep.py                      # examples/sweeps/ngd_vs_gd.yaml into runs/05_sweep
    python examples/05_sweep.py --small --out /tmp/s # 20 steps instead of 300: seconds, a smoke test of the sweep
                                                     # machinery (``--quick`` and ATTNLAB_EXAMPLE_SMALL=1 too)

The same sweep from the shell: ``attnlab sweep examples/sweeps/ngd_vs_gd.yaml --out runs/05_sweep``. Rerunning
skips the runs that finished. docs/sweeps.md describes the YAML schema and the results store.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import attnlab as al
import attnlab.tasks  # noqa: F401  (registers the sweep tasks attnlab ships: batched-train, experiment)

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep", nargs="?", default=HERE / "sweeps" / "ngd_vs_gd.yaml", help="sweep YAML file")
    parser.add_argument("--out", default="runs/05_sweep", help="results folder (default runs/05_sweep)")
    parser.add_argument(
        "--small",
        "--quick",
        dest="small",
        action="store_true",
        default=os.environ.get("ATTNLAB_EXAMPLE_SMALL") == "1",
        help="20 steps per run instead of the file's: a smoke test of the sweep, not converged runs",
    )
    args = parser.parse_args()

    spec = al.runner.load_sweep(args.sweep)  # a SweepSpec: task, base, grid, points (the file's list), repeats
    if args.small:
        print("small mode: 20 steps per run, a smoke test of the sweep machinery (the numbers are not converged)")
        spec = dataclasses.replace(spec, base={**spec.base, "steps": 20, "record_every": 10})
    result = al.runner.run_sweep(spec, args.out, progress=False)
    print(f"{len(result.index)} runs in {args.out} ({result.ran} ran now, {len(result.failed)} failed)")

    # One row per (run, recorded step); the sweep's parameters (optimizer, lr, data_seed, ...) are columns.
    frame = al.runner.read_sweep(args.out)
    last = frame[frame["step"] == frame["step"].max()]
    summary = last.groupby(["optimizer", "lr"])[["loss", "norm", "opt_softmax"]].mean()
    print(f"mean over data seeds at step {int(last['step'].iloc[0])}:")
    print(summary.to_string(float_format="{:.4f}".format))


if __name__ == "__main__":
    main()
