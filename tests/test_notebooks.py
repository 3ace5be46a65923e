"""The notebooks of docs/notebooks (jupytext percent files) run as written at their small size and show what
their text says."""

import runpy
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "docs" / "notebooks"


def test_implicit_bias_notebook_draws_fig2_and_ngd_aligns_faster(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the figure is written to the working folder
    cells = runpy.run_path(str(NOTEBOOKS / "implicit_bias_ngd.py"))
    assert (tmp_path / "implicit-bias-ngd.png").stat().st_size > 10_000
    final = cells["final"]
    assert final["NGD"] > 0.99 > 0.98 > final["GD"], final  # the notebook's closing text
    ngd = cells["frames"]["NGD"]
    assert float(ngd.loc[ngd["step"] == 100, "alignment"].iloc[0]) > 0.99


def test_every_notebook_is_a_jupytext_percent_file_with_a_page():
    for notebook in NOTEBOOKS.glob("*.py"):
        text = notebook.read_text()
        assert "format_name: percent" in text or "formats: py:percent" in text, notebook.name
        assert "# %%" in text, notebook.name
        page = notebook.with_name(notebook.stem.replace("_", "-") + ".md")
        assert page.exists() and f'--8<-- "docs/notebooks/{notebook.name}"' in page.read_text(), page.name
