"""``attnlab reproduce --paper``: its help says what it takes, and one experiment's name points to ``attnlab run``."""

from click.testing import CliRunner

from attnlab.cli import main


def test_the_help_of_paper_says_it_takes_a_paper_a_group_or_all_and_not_one_experiment():
    (paper,) = [p for p in main.commands["reproduce"].params if p.name == "paper"]
    assert paper.help == (
        "A paper's spec stem (kq-nuclear-norm: all its experiments), a group of experiments, the part of their "
        "names before the first dot (kq-nuclear: kq-nuclear.x1, ...; a name without a dot, flagship, is a group of "
        "one), or 'all'. Another experiment by its full name (kq-nuclear.x1) is refused: `attnlab run NAME` runs it."
    )
    result = CliRunner().invoke(main, ["reproduce", "--help"])
    assert result.exit_code == 0 and "Spec stem or name prefix of one paper" not in result.output


def test_one_experiments_name_as_paper_is_refused_and_pointed_to_attnlab_run(tmp_path):
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["reproduce", "--paper", "kq-nuclear.x1", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "is one experiment, not a paper or group; run it alone with `attnlab run kq-nuclear.x1`" in result.output
    assert "reproduce its whole paper, kq-nuclear-norm" in result.output
    assert not out.exists()  # refused before anything ran


def test_an_unknown_paper_lists_the_papers_and_groups_and_names_attnlab_run(tmp_path):
    result = CliRunner().invoke(main, ["reproduce", "--paper", "no-such", "--out", str(tmp_path / "report")])
    assert result.exit_code == 2, result.output
    assert "papers: implicit-bias-ngd, kq-nuclear-norm" in result.output
    assert "groups (the part of names before the first dot): diffusion, flagship" in result.output
    assert "One experiment runs with `attnlab run NAME`" in result.output
