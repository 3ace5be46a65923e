"""Every figure an experiment test saves is held to the house style (``plotting.figure_problems``)."""

import pytest

from attnlab.experiments import base
from attnlab.experiments.plotting import figure_problems


@pytest.fixture(autouse=True)
def figures_follow_the_house_style(monkeypatch):
    """Fail a test whose experiment saves a figure with an unlabelled axis, ASCII math or overlapping text."""
    save = base.save_figure

    def checked_save(figure, stem, *args, **kwargs):
        problems = figure_problems(figure)
        assert not problems, f"{stem.name} breaks the house style:\n" + "\n".join(problems)
        return save(figure, stem, *args, **kwargs)

    monkeypatch.setattr(base, "save_figure", checked_save)
