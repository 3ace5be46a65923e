"""Figures of an optimizer comparison, each drawn from the tidy tables of :class:`Comparison`.

Spec: implicit-bias-ngd §9 fig. 6-7 (training loss per epoch, per-layer norm growth); mirror-descent-lp §9 E4
(K/Q/V entry histograms, first-token attention maps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from attnlab.plotting import house_figure, new_figure, panel_grid

if TYPE_CHECKING:
    from attnlab.nets.compare import Comparison

__all__ = ["attention_figure", "comparison_figures", "curves_figure", "histogram_figure", "norms_figure"]


_LINESTYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_PER_PANEL = 4  # optimizers per panel: seven min-max bands in one panel hid each other


def _method_styles(names: list[str]) -> dict[str, dict[str, Any]]:
    """One colour, line style and marker per optimizer, so that lines drawn on top of each other stay apart.

    Unnormalised l_2 mirror descent (``"md:2,normalized=false"``) is SGD by construction, so its line lies on SGD's: the dashes and the markers, staggered along the
    curve, keep both visible.
    """
    return {
        name: {
            "color": f"C{i % 10}",
            "ls": _LINESTYLES[i % len(_LINESTYLES)],
            "marker": _MARKERS[i % len(_MARKERS)],
            "markevery": (0.04 * (i % 5), 0.2),
            "markersize": 3.5,
        }
        for i, name in enumerate(names)
    }


def _mean_band(ax: Any, frame: pd.DataFrame, x: str, y: str, label: str, style: dict[str, Any]) -> None:
    stats = frame.groupby(x)[y].agg(["mean", "min", "max"]).reset_index()
    ax.plot(stats[x], stats["mean"], label=label, **style)
    ax.fill_between(stats[x], stats["min"], stats["max"], alpha=0.15, color=style["color"])


def _share_limits(axes: Any) -> None:
    """One y range over ``axes``, so that panels of one quantity compare at a glance."""
    low = min(ax.get_ylim()[0] for ax in axes)
    high = max(ax.get_ylim()[1] for ax in axes)
    for ax in axes:
        ax.set_ylim(low, high)


@house_figure
def curves_figure(frame: pd.DataFrame) -> Any:
    """Training loss (log scale, top row) and test accuracy (bottom row) against epoch: mean over seeds, min-max
    band; at most four optimizers per column, each row on one y range."""
    names = list(dict.fromkeys(frame["optimizer"]))
    styles = _method_styles(names)
    groups = [names[i : i + _PER_PANEL] for i in range(0, len(names), _PER_PANEL)]
    fig, axes = new_figure(len(groups), 2, width=4.2, height=3.0)
    axes = axes.reshape(2, len(groups))
    for column, group in enumerate(groups):
        loss, accuracy = axes[0, column], axes[1, column]
        for name in group:
            runs = frame[frame["optimizer"] == name]
            _mean_band(loss, runs, "epoch", "train_loss", name, styles[name])
            _mean_band(accuracy, runs, "epoch", "test_accuracy", name, styles[name])
        loss.set(yscale="log", xlabel="epoch", ylabel="training loss (cross-entropy)")
        accuracy.set(xlabel="epoch", ylabel="test accuracy")
        accuracy.legend()
    _share_limits(axes[0])
    _share_limits(axes[1])
    seeds = frame["seed"].nunique()
    fig.suptitle(f"mean over {seeds} seeds, band min-max")
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
    fig, axes = new_figure(len(names), len(samples), width=1.6, height=1.6 if grid else 0.8)
    axes = axes.reshape(len(samples), len(names))
    images = {}
    for name in names:
        for sample in samples:
            rows = attention[(attention["optimizer"] == name) & (attention["sample"] == sample)]
            weights = rows.sort_values("token")["weight"].to_numpy()
            images[name, sample] = weights[1:].reshape(grid) if grid else weights[None, :]
    # one colour scale for every map, so sharpness compares; from the smallest weight drawn, not 0, so that a
    # nearly uniform map (text: every weight near 1 / (length + 1)) still shows its pattern
    low = min(float(image.min()) for image in images.values())
    high = max(float(image.max()) for image in images.values())
    high = max(high, low * (1 + 1e-3) + 1e-12)  # a flat map still gets a scale
    for c, name in enumerate(names):
        for r, sample in enumerate(samples):
            ax = axes[r, c]
            shown = ax.imshow(
                images[name, sample],
                cmap="viridis",
                vmin=low,
                vmax=high,
                aspect="auto" if grid is None else "equal",
            )
            ax.set_xticks([])
            ax.set_yticks([])
            ax.spines[:].set_visible(False)  # an image needs no frame
            if r == 0:
                ax.set_title(name.replace(",", ",\n"))  # "md:1.1,normalized=false" on two lines
            if c == 0:
                ax.set_ylabel(f"sample {sample}", fontsize=7, rotation=0, ha="right", va="center")
    bar = fig.colorbar(shown, ax=axes.ravel().tolist(), shrink=0.9, aspect=15)
    bar.set_label("weight")  # "attention weight" is taller than a one-row figure of text
    bar.ax.yaxis.set_major_locator(MaxNLocator(4))
    what = "tokens 1.. as an image" if grid else "every token, the first at the left"
    fig.suptitle(f"first-token attention, last layer,\nmean over heads ({what})")
    return fig


def comparison_figures(comparison: Comparison, grid: tuple[int, int] | None = None) -> dict[str, Any]:
    """The four figures of a comparison, by name: training curves, layer norms, K/Q/V histograms, attention maps.

    Parameters
    ----------
    comparison : Comparison
        The tables of :func:`~attnlab.nets.compare_optimizers`.
    grid : tuple of int, optional
        Lay the attention of tokens 1.. out as an image of this shape (ViT patches); ``None`` draws strips (text).

    Returns
    -------
    dict of str to matplotlib.figure.Figure
        ``"curves"``, ``"norms"``, ``"qkv_histograms"`` and ``"attention"``.
    """
    return {
        "curves": curves_figure(comparison.frame),
        "norms": norms_figure(comparison.norms),
        "qkv_histograms": histogram_figure(comparison.entries),
        "attention": attention_figure(comparison.attention, grid),
    }
