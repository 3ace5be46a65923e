"""Overrides from a mapping (YAML, record.json, Python) are checked by the field's type; messages name their source."""

import re
from dataclasses import dataclass
from typing import Literal

import pytest

from attnlab._overrides import OverrideError, parse_overrides
from attnlab._validation import ValidationError


@dataclass(frozen=True)
class _Config:
    n: int = 3
    lr: float = 0.1
    name: str = "x"
    flag: bool = False
    omegas: tuple[float, ...] = (0.1, 0.5)
    sizes: tuple[int, ...] = (1, 2)
    cap: float | None = None
    mode: Literal["a", "b"] = "a"
    grids: tuple[tuple[float, ...], ...] = ((0.1,),)
    pairs: tuple[tuple[str, int], ...] = (("sgd", 3),)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("omegas", 0.5, r"^omegas: expected a list of float, got 0\.5$"),  # was TypeError: not iterable
        ("omegas", ["a", "b"], r"^omegas: expected a list of float, got \['a', 'b'\]$"),  # was TypeError: '<='
        ("omegas", {"a": 1}, r"^omegas: expected a list of float, got \{'a': 1\}$"),
        ("omegas", [0.1, True], r"^omegas: expected a list of float, got \[0\.1, True\]$"),
        ("n", True, r"^n: expected int, got True$"),  # a boolean is not a number here
        ("n", 2.5, r"^n: expected int, got 2\.5$"),
        ("lr", None, r"^lr: expected float, got None$"),
        ("lr", [0.1], r"^lr: expected float, got \[0\.1\]$"),
        ("flag", 1, r"^flag: expected a boolean \(true/false\), got 1$"),
        ("name", 5, r"^name: expected str, got 5$"),
        ("cap", True, r"^cap: expected float or None, got True$"),
        ("mode", 1, r"^mode: expected one of a, b, got 1$"),
        ("grids", [0.1], r"^grids: expected a list of lists of float, got \[0\.1\]$"),
        ("pairs", [["sgd", 3.5]], r"^pairs: expected a list of \(str, int\), got \[\['sgd', 3\.5\]\]$"),
        ("pairs", [["sgd"]], r"^pairs: expected a list of \(str, int\)"),
    ],
)
def test_a_mapping_value_of_the_wrong_type_is_refused_naming_the_key_and_the_form(key, value, match):
    with pytest.raises(OverrideError, match=match) as info:
        parse_overrides(_Config, {key: value})
    assert info.value.key == key and isinstance(info.value, ValidationError)


def test_mapping_values_of_the_right_type_are_kept_or_converted():
    got = parse_overrides(
        _Config,
        {
            "n": 1000.0,  # a whole float (YAML 1e3) is an int
            "lr": 1,  # an int is a float
            "omegas": [1, 0.5, "1e-3"],  # a list is a tuple; a string element is parsed like --set
            "sizes": (4, 8),
            "cap": None,
            "mode": "b",
            "flag": True,
            "grids": [[0.1, 1.0], []],
            "pairs": [["md:2", 60]],
        },
    )
    assert got == {
        "n": 1000,
        "lr": 1,
        "omegas": (1, 0.5, 0.001),
        "sizes": (4, 8),
        "cap": None,
        "mode": "b",
        "flag": True,
        "grids": ((0.1, 1.0), ()),
        "pairs": (("md:2", 60),),
    }
    assert type(got["n"]) is int and type(got["omegas"]) is tuple and type(got["grids"][0]) is tuple


def test_a_bad_value_of_a_kq_nuclear_sweep_or_record_is_a_validation_error_not_a_type_error():
    from attnlab.experiments import get_experiment
    from attnlab.verify import make_config

    for omegas in (0.5, ["a", "b"], {"a": 1}):
        with pytest.raises(OverrideError, match="omegas: expected a list of float"):
            make_config(get_experiment("kq-nuclear.x1"), {"omegas": omegas}, quick=True)


def test_messages_say_set_only_for_the_set_list():
    with pytest.raises(OverrideError, match=r"^n=abc: expected int$") as info:
        parse_overrides(_Config, {"n": "abc"})  # from YAML or record.json: no --set was given
    assert info.value.key == "n"
    with pytest.raises(OverrideError, match=r"^lr=abc: expected float$"):
        parse_overrides(_Config, {"lr": "abc"})
    with pytest.raises(OverrideError, match=r"^--set lr=abc: expected float$"):
        parse_overrides(_Config, ["lr=abc"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.1,0.5", (0.1, 0.5)),
        ("(0.1, 0.5)", (0.1, 0.5)),  # what `attnlab show` prints
        ("[0.1, 0.5]", (0.1, 0.5)),
        (" ( 0.1 ,0.5 ) ", (0.1, 0.5)),
        ("(0.1,)", (0.1,)),
        ("()", ()),
    ],
)
def test_a_tuple_field_takes_the_form_show_prints(text, expected):
    assert parse_overrides(_Config, [f"omegas={text}"]) == {"omegas": expected}


@pytest.mark.parametrize("text", ["(0.1, x)", "(0.1, 0.5", "0.1, x]"])
def test_a_bad_tuple_names_the_whole_value_and_the_forms_it_takes(text):
    match = rf"^--set omegas={re.escape(text)}: expected a list of float, written 0\.1,0\.5 or \(0\.1, 0\.5\)$"
    with pytest.raises(OverrideError, match=match) as info:
        parse_overrides(_Config, [f"omegas={text}"])
    assert info.value.key == "omegas"
    with pytest.raises(
        OverrideError, match=r"^--set sizes=\(4, 8\.5\): expected a list of int, written 4,8 or \(4, 8\)$"
    ):
        parse_overrides(_Config, ["sizes=(4, 8.5)"])


def test_the_retired_name_hint_matches_the_source():
    @dataclass(frozen=True)
    class Renamed:
        T: int = 2
        RENAMED = {"L": "T"}

    with pytest.raises(OverrideError, match=r"is now 'T'; write --set T=4$"):
        parse_overrides(Renamed, ["L=4"])
    with pytest.raises(OverrideError, match=r"is now 'T'; write T: 4$"):
        parse_overrides(Renamed, {"L": 4})


def test_overrides_that_are_not_key_value_strings_are_refused():
    with pytest.raises(OverrideError, match=r"write \['n=8'\]"):
        parse_overrides(_Config, "n=8")
    with pytest.raises(OverrideError, match="expected key=value"):
        parse_overrides(_Config, [8])


def test_a_key_given_twice_in_the_list_form_is_refused():
    with pytest.raises(OverrideError, match=r"--set n is given twice \(n=2 after an earlier n\); give each key once"):
        parse_overrides(_Config, ["n=1", "lr=0.1", "n=2"])
