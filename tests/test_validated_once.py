"""Each input is checked once: at the boundary where it enters, then passed inward typed and never checked again.

The checks of attnlab._validation are wrapped with a counter (in every module that imported them) for one
``al.train`` call and for one run of a sweep (checked, then run, in this process); each argument's check runs once.
"""

from __future__ import annotations

import collections
import functools
import sys

import pytest

import attnlab as al
import attnlab._validation as validation
import attnlab.tasks  # noqa: F401  (registers the batched-train task)
from attnlab.data import example1
from attnlab.runner import SweepSpec, make_executor, run_sweep
from attnlab.tasks import batched_train

# check_shape is the shape half of check_tensor (and of the sizes shared between arguments), not a second check
CHECKS = ("check_scalar", "check_tensor", "check_in", "check_bool", "check_select", "check_labels", "check_token_data")


@pytest.fixture
def counted(monkeypatch):
    """``(name, value)`` of every check call, counted (the value's repr for scalars, the argument name else)."""
    calls: collections.Counter = collections.Counter()
    for check in CHECKS:
        real = getattr(validation, check)

        @functools.wraps(real)
        def counting(name, value=None, *args, real=real, check=check, **kwargs):
            scalar = isinstance(value, (int, float, str)) and not isinstance(value, bool)
            calls[(check, name, value if scalar else None)] += 1
            return real(name, value, *args, **kwargs)

        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("attnlab") and getattr(module, check, None) is real:
                monkeypatch.setattr(module, check, counting)
    return calls


def _twice(calls: collections.Counter, exempt: tuple[str, ...] = ()) -> list:
    return [(key, n) for key, n in calls.items() if n > 1 and key[1] not in exempt]


# The pure loss functions of attnlab.losses check their ``name`` argument at every call (each is a public formula
# function, its own boundary), so the loss name is seen again inside L*; every other input is checked once.
LOSS_FUNCTIONS = ("loss",)


def test_one_al_train_checks_each_argument_once(counted):
    data = example1(n=4, T=3, d=8, seed=0)
    model = al.models.Combined(8)
    counted.clear()
    al.train(model, "ngd:lr=0.1", data, steps=3, record_every=1)
    assert not _twice(counted, LOSS_FUNCTIONS)
    assert counted[("check_scalar", "lr", 0.1)] == 1 and counted[("check_scalar", "steps", 3)] == 1
    assert counted[("check_token_data", "data", None)] == 1


def test_one_sweep_run_checks_each_parameter_once_between_the_sweep_check_and_the_run(tmp_path, counted):
    base = {"n": 4, "T": 3, "d": 8, "steps": 3, "lr": 0.1, "seed": 3, "data_seed": 5, "optimizer": "ngd:momentum=0.5"}
    spec = SweepSpec.from_mapping({"task": "batched-train", "base": base})
    batched_train._built.cache_clear()  # this process may hold the data set and options from an earlier sweep
    batched_train._OPTIONS.clear()
    counted.clear()
    result = run_sweep(spec, tmp_path, make_executor("inprocess"), progress=False)
    assert list(result.index["status"]) == ["done"]
    assert not _twice(counted, LOSS_FUNCTIONS)
    for key in (
        ("check_scalar", "lr", 0.1),  # by the sweep's check; the run takes the typed step sizes
        ("check_scalar", "steps", 3),
        ("check_scalar", "seed", 3),  # the initialisation's seed, by the sweep's check
        ("check_scalar", "seed", 5),  # data_seed, by the data generator, once: the run reuses the data set
        ("check_scalar", "momentum", 0.5),  # an option of the string, by its one parse (the sweep's check)
        ("check_tensor", "X", None),  # the data set's arrays, when the generator builds it
    ):
        assert counted[key] == 1, key
