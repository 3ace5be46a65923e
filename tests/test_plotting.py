"""The house style of figures: figure_problems finds each broken rule, and the helpers keep a figure clean."""

import dataclasses
import pickle

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from attnlab._validation import ValidationError
from attnlab.data import example1
from attnlab.explain import explain
from attnlab.plotting import (
    CORR_GAP,
    EPS,
    HOUSE_STYLE,
    STEP,
    drop_ours,
    figure_problems,
    has_ours,
    house_figure,
    label_axes,
    label_ours,
    lay_out,
    log_gap_axis,
    new_figure,
    panel_grid,
    plot_band,
    theory_hline,
    theory_line,
)
from attnlab.plotting.style import _one_two_five
from attnlab.runner import save_figure

STEPS = np.arange(1, 101)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@dataclasses.dataclass(frozen=True)
class _Config:
    rho: float = 1.0
    sigma: float = 2.0
    a_rather_long_field_name: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
    another_long_field_name: str = "a value long enough to need a second line under a small figure"
    OURS = ("rho", "sigma", "a_rather_long_field_name", "another_long_field_name")


@house_figure
def _clean(width=3.6):
    fig, axes = new_figure(2, width=width)
    axes[0].plot(STEPS, 1 / STEPS, label="NGD")
    theory_line(axes[0], STEPS, 2 / STEPS, r"Thm 1 bound $\propto 1/t$")
    log_gap_axis(axes[0], CORR_GAP, logx=True)
    axes[0].set_xlabel(STEP)
    axes[0].legend()
    axes[1].plot(STEPS, np.sqrt(STEPS))
    label_axes(axes[1], STEP, r"$\|W_t\|_F$", "norm growth")
    label_ours(fig, _Config())
    return fig


def test_a_figure_drawn_with_the_helpers_has_no_problems():
    assert figure_problems(_clean()) == []


def test_an_unlabelled_axis_is_named_with_its_panel():
    fig = _clean()
    fig.axes[1].set_ylabel("")
    assert figure_problems(fig) == ["panel 2 ('norm growth'): the y-axis has no label"]


@pytest.mark.parametrize("text", ["||W_t||", "1 - corr(W_t, W_mm)", "mean phi_opt", "t^0.5", "ln mu(t)", "L_irr"])
def test_ascii_math_in_a_label_is_found(text):
    fig = _clean()
    fig.axes[1].set_ylabel(text)
    assert any("in ASCII; use mathtext" in p for p in figure_problems(fig)), text


def test_mathtext_and_code_names_are_not_ascii_math():
    fig = _clean()
    fig.axes[1].set_ylabel(r"$\|W_t\|_F$ of patch_embed")
    assert figure_problems(fig) == []


def test_an_unnamed_theory_line_or_level_is_found():
    fig = _clean()
    fig.axes[1].axhline(1.0, color="0.5")
    fig.axes[1].plot(STEPS, STEPS, "k--")
    problems = figure_problems(fig)
    assert problems.count("panel 2 ('norm growth'): a reference or theory line has no legend label") == 2


def test_a_label_that_no_legend_shows_is_found():
    fig = _clean()
    fig.axes[1].plot(STEPS, STEPS, label="measured")
    assert figure_problems(fig) == ["panel 2 ('norm growth'): 'measured' is in no legend"]


def test_the_old_footnote_under_the_figure_overlaps_the_x_label():
    # what label_ours did before: text at y = -0.02 of a figure without a reserved strip
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot(STEPS, STEPS)
    ax.set(xlabel="step", ylabel="norm")
    fig.text(0.01, 0.02, "defaults ours, not the paper's: rho=1.0", fontsize=7, va="top")
    assert any("overlaps panel 1 x-label" in p for p in figure_problems(fig))


def test_a_colorbar_label_taller_than_the_figure_is_cut_off():
    # the real models' attention maps: a one-row figure of text whose colorbar label was longer than it was tall
    fig, axes = new_figure(4, width=1.6, height=0.8)
    for ax in axes:
        shown = ax.imshow(np.ones((1, 5)), aspect="auto")
        ax.set_xticks([])
        ax.set_yticks([])
    bar = fig.colorbar(shown, ax=list(axes))
    bar.set_label("first-token attention weight")
    assert any("reaches past the figure's edge" in p for p in figure_problems(fig))
    bar.set_label("weight")
    assert not [p for p in figure_problems(fig) if "edge" in p]


@pytest.mark.parametrize("width", [2.2, 3.6, 8.0])
def test_label_ours_keeps_a_wrapped_footnote_clear_of_the_axes_at_any_width(width):
    fig = _clean(width)
    assert not [p for p in figure_problems(fig) if "footnote" in p]
    footnote = next(t for t in fig.texts if t.get_gid() == "attnlab-ours")
    renderer = fig.canvas.get_renderer()
    box = footnote.get_window_extent(renderer)
    assert box.x1 <= fig.bbox.x1 + 1  # wrapped to the figure's width (1 px of rounding)
    assert "another_long_field_name=a value" in footnote.get_text().replace("\n", " ")  # wrapped, nothing lost
    assert fig.get_size_inches()[1] > 3.0  # the strip is added under the 3-inch panels, not taken from them
    assert ("\n" in footnote.get_text()) == (width < 8.0)  # 16 inches hold it on one line


def test_drop_ours_gives_the_figure_back_its_height_and_panels():
    fig = _clean()
    assert has_ours(fig) and fig.get_size_inches()[1] > 3.0
    assert drop_ours(fig) and not has_ours(fig) and not drop_ours(fig)
    assert tuple(fig.get_size_inches()) == (7.2, 3.0)  # two 3.6 x 3.0 panels, no strip
    assert figure_problems(fig) == []
    fig.canvas.draw()
    assert min(ax.get_position().y0 for ax in fig.axes) < 0.3  # the panels took back the strip's room


def test_log_axes_over_a_decade_and_a_half_have_no_colliding_tick_labels():
    # matplotlib's own minor labels (2x10^1, 3x10^1, ...) collide on a narrow panel; the house style thins them
    def draw():
        fig, axes = new_figure(1, width=2.4)
        axes[0].loglog([25, 200], [1e-3, 1e-1])
        axes[0].set(xlabel="$n$", ylabel="bias")
        return fig

    assert any("x tick" in p and "overlaps" in p for p in figure_problems(draw()))
    assert figure_problems(house_figure(draw)()) == []


def test_an_axis_with_a_single_tick_label_is_found_and_the_house_style_gives_a_short_log_axis_more():
    # a norm ratio between 0.9 and 1.4 on a log axis: matplotlib labels only "1"
    def draw():
        fig, axes = new_figure(1, width=3.0)
        axes[0].plot(STEPS, np.linspace(0.9, 1.4, len(STEPS)))
        axes[0].set(yscale="log", xlabel=STEP, ylabel="norm / initial norm")
        axes[0].minorticks_off()
        return fig

    assert figure_problems(draw()) == ["panel 1: the y-axis shows one tick label; a scale needs two or more"]
    fig = house_figure(draw)()
    assert figure_problems(fig) == []
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert len(labels) >= 3 and all(0.9 <= float(v) <= 1.4 for v in labels), labels


def test_a_log_axis_between_one_and_two_point_five_keeps_its_labels_with_minor_ticks_off():
    # a norm ratio from 0.95 to 2.2 with minor ticks off showed only "1" (real.digits-vit's norms figure)
    @house_figure
    def draw():
        fig, axes = new_figure(1, width=3.0)
        axes[0].plot(STEPS, np.linspace(0.95, 2.2, len(STEPS)))
        axes[0].set(yscale="log", xlabel=STEP, ylabel="norm / initial norm")
        axes[0].minorticks_off()
        return fig

    fig = draw()
    assert figure_problems(fig) == []
    low, high = fig.axes[0].get_ylim()
    shown = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text() and low <= t.get_position()[1] <= high]
    assert shown == ["1", "2"]


def test_an_axis_without_ticks_is_a_choice_not_a_problem():
    fig, axes = new_figure(1)
    axes[0].imshow(np.eye(3))
    axes[0].set_xticks([])
    axes[0].set_yticks([])
    assert figure_problems(fig) == []


def test_one_two_five_labels_only_those_mantissas():
    labels = [_one_two_five(v, None) for v in (1000.0, 2000.0, 3000.0, 5e-5, 1e-5, 1e5, 0.002, 300.0)]
    assert labels == ["1000", "2000", "", r"$5\times10^{-5}$", "$10^{-5}$", "$10^{5}$", "0.002", ""]


def test_house_figure_draws_in_the_style_and_restores_rcparams():
    before = mpl.rcParams["legend.fontsize"]
    fig = _clean()
    legend = fig.axes[0].get_legend()
    assert legend.get_texts()[0].get_fontsize() == HOUSE_STYLE["legend.fontsize"]
    assert fig.axes[0].xaxis.label.get_fontsize() == HOUSE_STYLE["axes.labelsize"]
    fig.canvas.draw()  # outside the style: ticks made while drawing copy the first ones
    sizes = {t.get_fontsize() for ax in fig.axes for t in (*ax.get_xticklabels(), *ax.get_yticklabels())}
    assert sizes == {HOUSE_STYLE["xtick.labelsize"]}
    assert mpl.rcParams["legend.fontsize"] == before


def test_theory_lines_share_one_look():
    _, axes = new_figure(1)
    line = theory_line(axes[0], [0, 1], [0, 1], "bound")
    level = theory_hline(axes[0], 0.5, "limit")
    for artist in (line, level):
        assert (artist.get_color(), artist.get_linestyle()) == ("k", "--")
    assert [line.get_label(), level.get_label()] == ["bound", "limit"]


def test_eps_is_the_float64_resolution_of_one():
    assert 1.0 - EPS < 1.0 and 1.0 + EPS / 2 == 1.0


def test_the_explain_figure_follows_the_house_style():
    result = explain(example1(n=3, T=3, d=8, seed=0), "W", "ngd", steps=40, lr=0.3)
    assert figure_problems(result.figure) == []


def test_panel_grid_lays_many_panels_in_rows_and_drops_the_unused_places():
    fig, axes = panel_grid(5, columns=3, width=2.0, height=1.5)
    assert len(axes) == 5 and len(fig.axes) == 5  # the sixth place of the 3 x 2 grid is gone
    assert tuple(fig.get_size_inches()) == (6.0, 3.0)
    rows = {round(ax.get_position().y0, 3) for ax in axes}
    assert len(rows) == 2


def test_label_ours_twice_keeps_one_strip_and_drop_ours_gives_back_the_first_height():
    fig = _clean()
    height = fig.get_size_inches()[1]
    label_ours(fig, _Config(rho=3.0))
    notes = [t for t in fig.texts if t.get_gid() == "attnlab-ours"]
    assert len(notes) == 1 and "rho=3.0" in notes[0].get_text()  # replaced, not stacked
    assert fig.get_size_inches()[1] == height
    assert figure_problems(fig) == []
    assert drop_ours(fig) and tuple(fig.get_size_inches()) == (7.2, 3.0)


def test_label_ours_refuses_a_config_it_cannot_read():
    @dataclasses.dataclass
    class Typo:
        rho: float = 1.0
        OURS = ("rho", "missing")

    fig, _ = new_figure(1)
    with pytest.raises(ValidationError, match=r"Typo.OURS names \['missing'\], which are not fields of config"):
        label_ours(fig, Typo())
    with pytest.raises(ValidationError, match="config must be a dataclass instance.*got {'rho': 1.0} of type dict"):
        label_ours(fig, {"rho": 1.0})
    with pytest.raises(ValidationError, match="config must be a dataclass instance"):
        label_ours(fig, _Config)  # the class, not an instance
    assert not has_ours(fig) and tuple(fig.get_size_inches()) == (3.6, 3.0)


def _runs(values):
    """Three runs at steps 0..4, run r's y given by values[r]."""
    return pd.DataFrame([{"run": r, "step": s, "gap": v} for r, row in enumerate(values) for s, v in enumerate(row)])


def test_plot_band_refuses_bad_tables_by_argument():
    frame = _runs([[1.0, 0.5, 0.2, 0.1, 0.05]]).assign(name="a")
    _, axes = new_figure(1)
    cases = [
        ({"frame": frame.to_dict(), "x": "step", "y": "gap"}, "frame must be a pandas DataFrame.*got dict"),
        ({"frame": frame, "x": "nope", "y": "gap"}, r"x == 'nope' is not a column of frame"),
        ({"frame": frame, "x": "step", "y": "nope"}, r"y == 'nope' is not a column of frame"),
        ({"frame": frame, "x": "step", "y": "name"}, r"y == 'name' is a column of .* values, not numbers"),
        ({"frame": frame.assign(step=[0.0, np.nan, 2, 3, 4]), "x": "step", "y": "gap"}, "x == 'step' has 1 missing"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValidationError, match=message):
            plot_band(axes[0], kwargs["frame"], kwargs["x"], kwargs["y"], label="NGD")


def test_plot_band_leaves_out_values_a_log_axis_cannot_show_and_says_so():
    # they were drawn at 0 and -1e-3, clipped by the log scale: the median line dived off the panel without a word
    frame = _runs([[1.0, 0.5, 0.0, 0.1, 0.05], [1.0, 0.5, 0.2, -1e-3, 0.05]])
    fig, axes = new_figure(1)
    plot_band(axes[0], frame, "step", "gap", label="NGD", logy=True)
    label_axes(axes[0], STEP, CORR_GAP)
    axes[0].legend()
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), [1.0, 0.5, 0.2, 0.1, 0.05])  # over the positive values
    assert figure_problems(fig) == [
        "panel 1: NGD: 2 of 10 values of gap not finite or <= 0 (log axis) (first at step = 2), left out of the band"
    ]
    _, axes = new_figure(1)
    plot_band(axes[0], frame, "step", "gap", label="NGD")  # a linear axis shows them
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), [1.0, 0.5, 0.1, 0.0495, 0.05])


def test_plot_band_leaves_a_run_that_went_nan_out_of_the_band_and_says_so():
    frame = _runs([[1.0, 0.5, np.nan, np.nan, np.nan], [1.0, 0.6, 0.3, 0.2, 0.1], [1.0, 0.4, 0.2, 0.1, np.inf]])
    fig, axes = new_figure(1)
    plot_band(axes[0], frame, "step", "gap", label="NGD", logy=True)
    label_axes(axes[0], STEP, CORR_GAP)
    axes[0].legend()
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), [1.0, 0.5, 0.25, 0.15, 0.1])  # over finite runs
    assert figure_problems(fig) == [
        "panel 1: NGD: 4 of 15 values of gap not finite or <= 0 (log axis) (first at step = 2), left out of the band"
    ]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: panel_grid(0), "count == 0, must be >= 1"),
        (lambda: panel_grid(-1), "count == -1, must be >= 1"),
        (lambda: panel_grid(2.5), "count must be a int"),
        (lambda: panel_grid(4, columns=0), "columns == 0, must be >= 1"),
        (lambda: new_figure(0), "ncols == 0, must be >= 1"),
        (lambda: new_figure(2, 0), "nrows == 0, must be >= 1"),
        (lambda: new_figure(1, width=0.0), "width == 0.0, must be > 0.0"),
    ],
)
def test_panel_counts_that_draw_nothing_are_refused_by_name(call, message):
    with pytest.raises(ValidationError, match=message):
        call()


def _pixels(path):
    with Image.open(path) as image:
        return np.asarray(image)


def test_save_figure_lays_out_once_and_writes_the_pixels_of_savefig(tmp_path):
    twin = _clean()
    twin.savefig(tmp_path / "matplotlib.png", format="png", dpi=120)  # lays it out in a draw of its own
    fig = _clean()
    (path,) = save_figure(fig, tmp_path / "attnlab", ("png",))
    assert fig.get_layout_engine() is None  # the layout is fixed: a PDF after it draws the same positions
    assert np.array_equal(_pixels(path), _pixels(tmp_path / "matplotlib.png"))


def test_lay_out_leaves_a_figure_without_an_engine_as_it_is_and_shares_one_mathtext_parser():
    fig, ax = plt.subplots()
    ax.set_xlabel(STEP)
    assert not lay_out(fig, 120)
    assert fig.get_dpi() == mpl.rcParams["figure.dpi"]  # the resolution of the save only while laying out
    other = _clean()
    assert lay_out(other, 120)
    assert other.get_layout_engine() is None
    parsers = []
    for laid_out in (fig, other):  # the renderer a save at 120 dpi draws with: the one lay_out made
        laid_out.set_dpi(120)
        parsers.append(laid_out.canvas.get_renderer().mathtext_parser)
    assert parsers[0] is parsers[1]  # a string one figure parsed is not parsed again for the other


def test_a_figure_with_thinned_log_labels_pickles():
    fig, ax = plt.subplots()
    ax.semilogy([1, 2], [1.0, 1.5])
    house_figure(lambda: fig)()
    assert pickle.loads(pickle.dumps(fig)).axes[0].yaxis.get_major_formatter()(1.2, 0) == "1.2"
