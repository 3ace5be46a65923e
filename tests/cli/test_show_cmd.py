"""`attnlab show NAME` prints every config field with its type, default, quick value, whose default and meaning;
a bad `--set` prints the same table (the rows concerned) beside the error."""

import dataclasses

from click.testing import CliRunner

from attnlab.cli import main
from attnlab.cli.settings import attribute_docs, settings, undocumented
from attnlab.experiments import get_experiment, list_experiments


@dataclasses.dataclass(frozen=True)
class Documented:
    """Settings.

    Attributes
    ----------
    n : int
        Sequences.
    lr, momentum : float
        Step size and momentum
        of the optimizer.
    missing : str

    Notes
    -----
    lr : not an attribute
        A later section is not read.
    """

    n: int = 8
    lr: float = 0.1
    momentum: float = 0.9
    missing: str = "x"
    undeclared: int = 0

    OURS = ("lr",)


def test_attributes_are_parsed_one_entry_per_field():
    docs = attribute_docs(Documented)
    assert docs["n"] == ("int", "Sequences.")
    assert docs["lr"] == docs["momentum"] == ("float", "Step size and momentum of the optimizer.")
    assert docs["missing"] == ("str", "")
    assert undocumented(Documented) == ["missing", "undeclared"]  # an entry without a description is not one


def test_settings_rows_carry_default_quick_and_whose_default():
    rows = {row.name: row for row in settings(Documented, {"n": 2})}
    assert (rows["n"].default, rows["n"].quick, rows["n"].ours) == (8, 2, False)
    assert (rows["lr"].quick, rows["lr"].ours, rows["lr"].type) == (0.1, True, "float")
    assert rows["undeclared"].meaning == "(undocumented)"


def test_show_prints_every_field_with_its_meaning():
    result = CliRunner().invoke(main, ["show", "flagship"])
    assert result.exit_code == 0, result.output
    experiment = get_experiment("flagship")
    lines = result.output.splitlines()
    assert lines[0] == f"flagship (implicit-bias-ngd): {experiment.summary}"
    assert lines[2].split() == ["field", "type", "default", "quick", "default", "by", "meaning"]
    docs = attribute_docs(experiment.config_type)
    for f in dataclasses.fields(experiment.config_type):
        row = next(line for line in lines if line.split()[:1] == [f.name])
        default, quick = f.default, experiment.quick.get(f.name, f.default)
        ours = "ours" if f.name in experiment.config_type.OURS else "paper"
        assert row.split()[1:5] == [f.type, repr(default), repr(quick), ours], row
        assert docs[f.name][1].split()[0] in row  # the meaning starts on the field's line


def test_show_of_the_fig2_experiment_lists_its_full_settings():
    result = CliRunner().invoke(main, ["show", "implicit-bias.fig2"])
    assert result.exit_code == 0, result.output
    names = [f.name for f in dataclasses.fields(get_experiment("implicit-bias.fig2").config_type)]
    firsts = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    assert all(name in firsts for name in names)


def test_a_bad_set_name_prints_the_whole_table_a_bad_value_its_row():
    unknown = CliRunner().invoke(main, ["run", "flagship", "--set", "foo=1"])
    assert unknown.exit_code == 2
    assert "error: unknown key 'foo' for FlagshipConfig" in unknown.output
    assert "ngd_lr        float" in unknown.output and "seed          int" in unknown.output
    bad = CliRunner().invoke(main, ["run", "flagship", "--set", "steps=abc"])
    assert bad.exit_code == 2 and "error: --set steps=abc: expected int" in bad.output
    rows = [line.split()[0] for line in bad.output.splitlines()[4:] if line[:1].isalpha()]
    assert rows[:2] == ["field", "steps"] and "ngd_lr" not in bad.output


def test_run_help_points_to_show():
    assert "attnlab show NAME" in CliRunner().invoke(main, ["run", "--help"]).output


def test_every_registered_config_documents_every_field():
    missing = [
        f"{e.name} ({e.config_type.__name__}): {name}"
        for e in list_experiments()
        for name in undocumented(e.config_type)
    ]
    assert not missing, (
        f"{len(missing)} config fields have no entry in their class's Attributes section:\n" + "\n".join(missing)
    )
