"""The notebooks of docs/notebooks (jupytext percent files) run as written at their small size and show what
their text says; the site executes them at build time (mkdocs-jupyter) and shows their output."""

import runpy
from pathlib import Path

from matplotlib.figure import Figure

NOTEBOOKS = Path(__file__).resolve().parents[1] / "docs" / "notebooks"
PAPERS = (
    "implicit-bias-ngd",
    "mirror-descent-lp",
    "kq-nuclear-norm",
    "preconditioned-regression",
    "softmax-ntk-diffusion",
)


def _drawn(cells: dict, panels: int) -> None:
    """The notebook's figure has its panels, each with a curve or an image."""
    figure = cells["figure"]
    assert isinstance(figure, Figure) and len(figure.axes) >= panels
    assert all(axes.lines or axes.images or axes.collections for axes in figure.axes[:panels])


def test_implicit_bias_notebook_draws_fig2_and_ngd_aligns_faster():
    cells = runpy.run_path(str(NOTEBOOKS / "implicit_bias_ngd.py"))
    _drawn(cells, 1)
    final = cells["final"]
    assert final["NGD"] > 0.99 > 0.98 > final["GD"], final  # the notebook's closing text
    ngd = cells["frames"]["NGD"]
    assert float(ngd.loc[ngd["step"] == 100, "alignment"].iloc[0]) > 0.99


def test_regression_notebook_draws_fig1_and_the_exact_gradient_converges_geometrically():
    cells = runpy.run_path(str(NOTEBOOKS / "preconditioned_regression.py"))
    _drawn(cells, 1)
    final, worst = cells["final"], cells["worst"]  # gaps L - L_irr over L_irr
    assert worst < 0.02, worst  # the notebook's closing text: Algorithm 1 within 2% of L_irr throughout
    assert final["SGD, random start"] > 100 * final["Alg. 1, spectral start"], final
    ratios = cells["per_50_steps"]  # geometric: the same factor, below 1e-3, every 50 steps
    assert max(ratios) < 1e-3 and max(ratios) < 1.2 * min(ratios), ratios
    assert final["Alg. 1, exact gradient"] < 1e-25, final


def test_mirror_descent_notebook_draws_fig4_and_each_p_is_closest_to_its_own_svm():
    cells = runpy.run_path(str(NOTEBOOKS / "mirror_descent_lp.py"))
    _drawn(cells, 1)
    divergence = cells["divergence"]  # rows: trained p; columns: SVM q, in the order of PS
    assert divergence.shape == (3, 3)
    for i, row in enumerate(divergence):  # the notebook's closing text: the diagonal is each row's strict minimum
        others = [value for j, value in enumerate(row) if j != i]
        assert row[i] < min(others), divergence


def test_kq_notebook_separate_kq_reach_the_nuclear_svm_w_the_frobenius_svm_diagonal_the_l1_svm():
    cells = runpy.run_path(str(NOTEBOOKS / "kq_nuclear_norm.py"))
    _drawn(cells, 2)
    final = cells["final"]  # (trained weights, SVM) -> corr(W_K, W_svm) at the last step
    for name, near, far in (
        ("K, Q", "nuclear", "Frobenius"),
        ("W", "Frobenius", "nuclear"),
        ("diagonal K, Q", "l1 (diagonal)", "l2 (diagonal)"),
    ):  # the notebook's closing text: within 1e-3 of its own program, further from the other
        assert 1 - final[name, near] < 1e-3 < 1 - final[name, far], (name, final)


def test_ntk_notebook_the_error_falls_while_the_weights_move_like_one_over_m():
    cells = runpy.run_path(str(NOTEBOOKS / "softmax_ntk_diffusion.py"))
    _drawn(cells, 2)
    assert min(cells["error_drop"].values()) > 100, cells["error_drop"]  # the notebook's closing text
    assert abs(cells["slope"] + 1) < 0.15, cells["slope"]  # lazy: the movement's slope in m is -1


def test_every_notebook_is_a_jupytext_percent_file_in_the_site_nav():
    nav = (NOTEBOOKS.parents[1] / "mkdocs.yml").read_text()
    for notebook in NOTEBOOKS.glob("*.py"):
        text = notebook.read_text()
        assert "format_name: percent" in text or "formats: py:percent" in text, notebook.name
        assert "# %%" in text, notebook.name
        assert f": notebooks/{notebook.name}" in nav, notebook.name


def test_each_paper_has_a_notebook_that_links_its_theory_page():
    for paper in PAPERS:  # the notebook is named for the paper's theory page, and links to it
        notebook = NOTEBOOKS / f"{paper.replace('-', '_')}.py"
        assert f"(../theory/{paper}.md)" in notebook.read_text(), paper
