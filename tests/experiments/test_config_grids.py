"""Every grid of every experiment's config refuses a repeated entry: a repeated point would be run twice and weigh twice
in a slope fit or a share over the grid, a result silently different from the grid's. Per-item tuples (one value per
optimizer, per exponent, per singular value), where equal entries are meaningful, are named here and allowed."""

import dataclasses

import pytest

from attnlab._validation import ValidationError
from attnlab.experiments import get_experiment, list_experiments

PER_ITEM = {  # (experiment, field): one entry per item of another field or per axis, equal entries allowed
    ("real.text", "lrs"),  # one rate per optimizer
    ("real.digits-vit", "lrs"),
    ("mirror-descent.e1", "epochs"),  # one step count per p
    ("mirror-descent.e2", "epochs"),
    ("mirror-descent.e3", "epochs"),
    ("mirror-descent.e2", "arrows"),  # the figure's arrow positions, per panel
    ("regression.context", "singular_values"),  # a spectrum: equal singular values are a spectrum too
    ("regression.scaling", "singular_values"),
    ("regression.theory", "singular_values"),
    ("regression.theory", "second_singular_values"),
}


def _grids():
    for experiment in list_experiments():
        config = experiment.config_type()
        for field in dataclasses.fields(config):
            value = getattr(config, field.name)
            if isinstance(value, tuple) and value and all(isinstance(v, int | float | str) for v in value):
                yield experiment.name, field.name, value


GRIDS = list(_grids())


def test_the_grids_are_found():
    names = {(name, field) for name, field, _ in GRIDS}
    assert {("kq-nuclear.x3", "ds"), ("mirror-descent.growth", "lrs"), ("ntk.table1", "ns")} <= names
    assert PER_ITEM <= names  # every allowed field still exists


@pytest.mark.parametrize(("name", "field", "value"), [g for g in GRIDS if g[:2] not in PER_ITEM])
def test_a_repeated_entry_is_refused_naming_the_grid(name, field, value):
    config = get_experiment(name).config_type()
    with pytest.raises(ValidationError, match=field):
        dataclasses.replace(config, **{field: (*value, value[-1])})
