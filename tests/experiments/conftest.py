"""Every figure an experiment test saves is held to the house style (``plotting.figure_problems``)."""

import pytest

from attnlab.plotting import figure_problems
from attnlab.verify import experiment as verify_experiment


@pytest.fixture(autouse=True)
def figures_follow_the_house_style(monkeypatch):
    """Fail a test whose experiment saves a figure with an unlabelled axis, ASCII math or overlapping text."""
    save = verify_experiment.save_figure

    def checked_save(figure, stem, *args, **kwargs):
        problems = figure_problems(figure)
        assert not problems, f"{stem.name} breaks the house style:\n" + "\n".join(problems)
        return save(figure, stem, *args, **kwargs)

    monkeypatch.setattr(verify_experiment, "save_figure", checked_save)
