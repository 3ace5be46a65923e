"""Figures of an optimizer comparison, each drawn from the tidy tables of :class:`Comparison`.

Spec: implicit-bias-ngd §9 fig. 6-7 (training loss per epoch, per-layer norm growth); mirror-descent-lp §9 E4
(K/Q/V entry histograms, first-token attention maps).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from attnlab.experiments.plotting import house_figure, new_figure, panel_grid

__all__ = ["attention_figure", "curves_figure", "histogram_figure", "norms_figure"]


def _mean_band(ax: Any, frame: pd.DataFrame, x: str, y: str, label: str) -> None:
    stats = frame.groupby(x)[y].agg(["mean", "min", "max"]).reset_index()
    (line,) = ax.plot(stats[x], stats["mean"], label=label)
    ax.fill_between(stats[x], stats["min"], stats["max"], alpha=0.2, color=line.get_color())


@house_figure
def curves_figure(frame: pd.DataFrame) -> Any:
    """Training loss (log scale) and test accuracy against epoch: mean over seeds, min-max band."""
    fig, axes = new_figure(2, width=4.2, height=3.2)
    for name, runs in frame.groupby("optimizer", sort=False):
        _mean_band(axes[0], runs, "epoch", "train_loss", name)
        _mean_band(axes[1], runs, "epoch", "test_accuracy", name)
    axes[0].set(yscale="log", xlabel="epoch", ylabel="training loss (cross-entropy)")
    axes[1].set(xlabel="epoch", ylabel="test accuracy")
    seeds = frame["seed"].nunique()
    axes[0].set_title(f"mean over {seeds} seeds, band min-max")
    axes[1].legend()
    return fig


@house_figure
def norms_figure(norms: pd.DataFrame) -> Any:
    """Per-layer parameter norm divided by its initial value, against epoch; one panel per optimizer."""
    names = list(dict.fromkeys(norms["optimizer"]))
    fig, axes = panel_grid(len(names), columns=4, width=3.0, height=2.8)
    initial = norms[norms["epoch"] == 0].set_index(["optimizer", "seed", "layer"])["norm"]
    growth = norms.join(initial.rename("initial"), on=["optimizer", "seed", "layer"])
    growth = growth.assign(growth=growth["norm"] / growth["initial"])
    for ax, name in zip(axes, names):
        mean = growth[growth["optimizer"] == name].groupby(["layer", "epoch"])["growth"].mean().reset_index()
        for layer, rows in mean.groupby("layer", sort=False):
            ax.plot(rows["epoch"], rows["growth"], label=layer)
        ax.set(title=name, xlabel="epoch", ylabel="layer norm / initial norm", yscale="log")
        ax.minorticks_off()  # log-axis minor tick labels cost ~0.5 s per saved figure
    axes[-1].legend(title="layer (seed mean)")
    return fig


@house_figure
def histogram_figure(entries: pd.DataFrame) -> Any:
    """Histograms of |entry| of the key, query and value weights (all layers, first seed), per optimizer."""
    fig, axes = new_figure(3, width=3.8, height=3.0)
    magnitudes = entries["value"].abs()
    top = float(magnitudes.max())
    bins = np.logspace(np.log10(max(top, 1e-12)) - 6, np.log10(max(top, 1e-12)), 49)
    for ax, projection in zip(axes, ("key", "query", "value")):
        rows = entries[entries["projection"] == projection]
        for name, part in rows.groupby("optimizer", sort=False):
            ax.hist(part["value"].abs().clip(lower=bins[0]), bins=bins, histtype="step", label=name)
        ax.set(xscale="log", yscale="log", title=f"{projection} weights", xlabel="$|$entry$|$", ylabel="count")
        ax.minorticks_off()
    axes[-1].legend()
    return fig


@house_figure
def attention_figure(attention: pd.DataFrame, grid: tuple[int, int] | None = None) -> Any:
    """First-token attention maps: one column per optimizer, one row per probe sample (a wide figure).

    ``grid``: reshape tokens 1.. (everything but the first token) into an image of this shape (ViT patches);
    ``None`` draws the weights over all tokens as a strip (text).
    """
    names = list(dict.fromkeys(attention["optimizer"]))
    samples = sorted(attention["sample"].unique())
    fig, axes = new_figure(len(names), len(samples), width=1.6, height=1.6 if grid else 0.6)
    axes = axes.reshape(len(samples), len(names))
    top = float(attention["weight"].max())  # one colour scale for every map, so sharpness compares
    for c, name in enumerate(names):
        for r, sample in enumerate(samples):
            rows = attention[(attention["optimizer"] == name) & (attention["sample"] == sample)]
            weights = rows.sort_values("token")["weight"].to_numpy()
            image = weights[1:].reshape(grid) if grid else weights[None, :]
            ax = axes[r, c]
            ax.imshow(image, cmap="viridis", vmin=0.0, vmax=top, aspect="auto" if grid is None else "equal")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.spines[:].set_visible(False)  # an image needs no frame
            if r == 0:
                ax.set_title(name)
            if c == 0:
                ax.set_ylabel(f"sample {sample}", fontsize=7, rotation=0, ha="right", va="center")
    fig.suptitle(f"attention of the first token, last layer, mean over heads (colour scale 0 to {top:.2f})")
    return fig
