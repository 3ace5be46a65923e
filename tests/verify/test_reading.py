"""Readings fixed before a run, revisions kept beside the current row, findings reported: the row-level rules."""

import math

import pandas as pd
import pytest

from attnlab._validation import ValidationError
from attnlab.verify import (
    Claim,
    Falsifier,
    Finding,
    Reading,
    Revision,
    check_close,
    check_declared,
    check_greater,
    check_less,
    check_ordering,
    check_rate_shape,
    check_slope,
    count_checks,
    observation,
    old_sizes,
    pinned,
    size_change,
    with_revisions,
)
from attnlab.verify.reading import reading_digest

READING = Reading("|ratio - 1|", "the last step", "all seeds", "rel 0.05 (ours)", {"rtol": 0.05})
OLD = Reading("|ratio - 1|", "the middle step", "all seeds", "rel 0.1 (ours)", {"rtol": 0.1})
REVISION = Revision(OLD, "2026-11-20", "the middle step hid the late drift", "pass: 0.07", "fail: 0.12")
FINDING = Finding(
    "the ratio stays 0.2 above 1 at every size we ran",
    "docs/findings.md#toy-ratio",
    ("seeds 0-9: 0.19-0.21", "float64: the same in mpmath"),
)


def _claim(**kw):
    base = dict(claim="ratio -> 1", result="001:Thm1", source="docs/theory/x.md §1", falsifier="f", id="ratio")
    return Claim(**{**base, "reading": READING, **kw})


def test_reading_needs_every_part_in_words():
    with pytest.raises(ValidationError, match="window"):
        Reading("x", " ", "all", "<= 1")
    assert READING.param("rtol") == 0.05
    with pytest.raises(ValidationError, match="declares no parameter 'tol'.*rtol"):
        READING.param("tol")


def test_digest_changes_with_every_part_of_a_reading_and_with_the_sizes():
    base = reading_digest("c", "theory", "001:Thm1", READING, {"n": {"full": 8, "quick": 4}})
    assert base == reading_digest("c", "theory", "001:Thm1", READING, {"n": {"full": 8, "quick": 4}})
    changed = [
        reading_digest("c", "theory", "001:Thm1", OLD, {"n": {"full": 8, "quick": 4}}),
        reading_digest("c", "theory", "001:Thm1", READING, {"n": {"full": 8, "quick": 2}}),
        reading_digest("c2", "theory", "001:Thm1", READING, {"n": {"full": 8, "quick": 4}}),
        reading_digest("c", "theory", "001:Thm2", READING, {"n": {"full": 8, "quick": 4}}),
    ]
    assert len({base, *changed}) == 5


def test_a_row_takes_its_tolerance_from_the_reading_and_refuses_another():
    claim = _claim()
    row = claim.close(1.0, 1.04)
    assert row.passed and row.tolerance.startswith("rel 0.05")
    assert row.claim_id == "ratio" and row.revisions == 0
    assert claim.close(1.0, 1.04, rtol=0.05).passed  # repeating the declared number is fine
    with pytest.raises(ValidationError, match="rtol=0.2 but its reading declares 0.05"):
        claim.close(1.0, 1.04, rtol=0.2)


def test_a_row_may_not_add_a_tolerance_beside_the_one_its_reading_declares():
    """A reading that declares atol alone declared close()'s whole tolerance: rtol=0.5 widened it (1.4 passed)."""
    absolute = Reading("x", "the last step", "all", "abs 1e-3", {"atol": 1e-3})
    claim = _claim(reading=absolute)
    with pytest.raises(ValidationError, match=r"adds rtol=0.5 to the tolerance its reading declares \(atol=0.001, "):
        claim.close(1.0, 1.4, rtol=0.5)
    with pytest.raises(ValidationError, match="a reading is fixed before it runs"):
        _claim().close(1.0, 1.04, atol=0.1)  # READING declares rtol alone
    assert claim.close(1.0, 1.0005).passed and claim.close(1.0, 1.0005, atol=1e-3).passed
    assert not claim.close(1.0, 1.4).passed


def test_a_reading_that_declares_no_tolerance_of_the_row_leaves_it_to_the_row():
    """Rows whose tolerance is a locked config size or a rule computed in the run (stated in spread=) keep it."""
    claim = _claim(reading=Reading("x", "the last step", "all", "3 standard errors (ses)", {"ses": 3}))
    row = claim.close(1.0, 1.1, atol=0.2, spread="3 standard errors over 5 seeds (SE 0.0667)")
    assert row.passed and "3 standard errors over 5 seeds" in row.tolerance
    assert _claim(reading=None).close(1.0, 1.1, rtol=0.2).passed


@pytest.mark.parametrize(
    ("row", "margin"),
    [
        (check_close("c", 1.0, 1.04, 0.05), 0.01),
        (check_close("c", 1.0, 1.10, 0.05), -0.05),
        (check_less("c", 0.3, 0.5), 0.2),
        (check_less("c", 0.7, 0.5), -0.2),
        (check_greater("c", 0.7, 0.5), 0.2),
        (check_ordering("c", {"a": 1.0, "b": 3.0, "c": 4.0}, ["a", "b", "c"], margin=0.5), 0.5),
        (check_slope("c", [1, 10, 100], [1, 10, 100], 0.9, 0.2), 0.1),
    ],
)
def test_margin_is_how_far_inside_the_tolerance(row, margin):
    assert row.margin == pytest.approx(margin)
    assert row.passed == (margin >= 0)


def test_no_margin_without_a_number_to_compare():
    assert check_less("c", math.nan, 1.0).margin is None
    censored = check_rate_shape("c", [1, 2, 3], [1, 2, 3], "log")  # under 2 decades: refused, not measured
    assert not censored.passed and censored.margin is None
    shaped = check_rate_shape("c", [1, 10, 100, 1000], [1.0, 2.0, 3.0, 4.0], "log")
    assert shaped.passed and shaped.margin > 0


def test_holds_refuses_a_margin_on_the_wrong_side():
    claim = _claim()
    assert claim.holds("> 0", 0.2, "> 0", True, margin=0.2).margin == 0.2
    with pytest.raises(ValidationError, match="margin -0.2 disagrees with passed=True"):
        claim.holds("> 0", -0.2, "> 0", True, margin=-0.2)


def test_a_failing_row_of_a_claim_with_a_finding_is_a_finding_not_a_failure():
    claim = _claim(finding=FINDING)
    failing, passing = claim.close(1.0, 1.2), claim.close(1.0, 1.01)
    assert failing.verdict == "finding" and not failing.passed
    assert failing.investigation == "docs/findings.md#toy-ratio"
    assert passing.verdict == "pass"
    counts = count_checks(pd.DataFrame([failing.as_row(), passing.as_row()]))
    assert (counts.passed, counts.findings, counts.failed, counts.ok) == (1, 1, 0, True)
    plain = count_checks(pd.DataFrame([_claim().close(1.0, 1.2).as_row()]))
    assert (plain.failed, plain.ok) == (1, False)  # a failure without an investigation still fails


def test_a_finding_needs_an_investigation_and_what_was_ruled_out():
    with pytest.raises(ValidationError, match="investigation"):
        Finding("it fails", "docs/findings.md", ("seeds",))
    with pytest.raises(ValidationError, match="ruled_out"):
        Finding("it fails", "docs/findings.md#x", ())


def test_a_revision_needs_its_outcome_and_a_claim_with_an_id():
    with pytest.raises(ValidationError, match="quick"):
        Revision(OLD, "2026-11-20", "why", "", "fail")
    with pytest.raises(ValidationError, match="id"):
        _claim(id="", revisions=(REVISION,))


def test_revised_rows_stand_beside_the_current_row():
    claim = _claim(revisions=(REVISION,))
    old = claim.revised(1)
    assert (old.kind, old.id, old.reading) == ("revision", "ratio#rev1", OLD)
    current = claim.close(1.0, 1.04)
    recomputed = old.close(1.0, 1.04)  # the old rtol 0.1, from the old reading
    other_claim = Claim("other", "001:Thm1", "docs/theory/x.md §2", kind="property", id="other")
    other = other_claim.holds("1", 1, "equal", True)
    rows = with_revisions([recomputed, current, other], [claim, other_claim])
    assert [r.claim_id for r in rows] == ["ratio", "ratio#rev1", "other"]
    check_declared(rows, [claim, other_claim], "toy")
    assert recomputed.tolerance.startswith("rel 0.1") and recomputed.revisions == 0


def test_an_old_reading_not_recomputed_shows_its_recorded_outcome():
    claim = _claim(revisions=(REVISION,))
    rows = with_revisions([claim.close(1.0, 1.04)], [claim])
    recorded = rows[1]
    assert (recorded.kind, recorded.verdict) == ("revision", "recorded")
    assert recorded.measured == "quick: pass: 0.07; full: fail: 0.12"
    assert "the middle step" in recorded.tolerance and "2026-11-20" in recorded.tolerance
    counts = count_checks(pd.DataFrame([r.as_row() for r in rows]))
    assert (counts.total, counts.revisions, counts.ok) == (1, 1, True)  # an old reading never fails a run


def test_a_property_that_had_no_reading_shows_its_recorded_outcome_as_its_text():
    grew = Revision(None, "2026-11-28", "the quick size grew", "pass: no run diverged", "the full size did not change")
    reading = Reading("runs that stopped", "every step", "all seeds", "none (exact)")
    prop = Claim(
        "finite", "001:Thm1", "docs/theory/x.md §1", kind="property", id="finite", reading=reading, revisions=(grew,)
    )
    rows = with_revisions([prop.holds("none", "none", "exact", True)], [prop])
    recorded = rows[1]
    assert (recorded.kind, recorded.verdict, recorded.predicted) == ("revision", "recorded", "as its text says")
    assert recorded.tolerance.startswith("no reading (its text was its reading); replaced 2026-11-28")


def test_the_recorded_row_of_a_template_claim_names_its_fields_instead_of_printing_the_template():
    """One recorded row stands for every p a templated claim was filled with; the template's '{p:g}' is shown as
    '<each p>', doubled braces as one."""
    grew = Revision(None, "2026-11-29", "given a reading", "pass", "pass")
    reading = Reading("largest residual", "every radius", "all data sets", "<= 1e-10")
    prop = Claim(
        "p={p:g}: solved in {{W}}",
        "001:Thm1",
        "docs/theory/x.md §1",
        kind="property",
        id="s",
        reading=reading,
        revisions=(grew,),
    )
    rows = with_revisions([prop.format(p=2.0).holds("0", "0", "exact", True)], [prop])
    assert rows[0].claim == "p=2: solved in {W}"
    assert rows[1].claim == "p=<each p>: solved in {W}"


OLD_SIZES = old_sizes({"n": 3}, steps=(2000, 200))


def test_a_size_change_keeps_the_old_sizes_of_the_fields_its_reading_names():
    sized = Reading("|ratio - 1|", "the last step", "all seeds", "rel 0.05 (ours)", {"rtol": 0.05}, sizes=("steps",))
    grew = size_change(sized, OLD_SIZES, "2026-11-28", "the quick run grew", "pass: 0.03")
    assert grew.sizes == {"steps": {"full": 2000, "quick": 200}}
    assert size_change(READING, OLD_SIZES, "2026-11-28", "grew", "pass").sizes == OLD_SIZES  # no sizes: every field
    assert grew.full.startswith("the full size did not change")


def test_pinned_names_the_old_sizes_only_where_a_revision_meant_the_current_ones():
    explicit = Revision(OLD, "2026-11-20", "why", "pass", "pass", sizes={"n": {"full": 4, "quick": 4}})
    kept, current = pinned((explicit, REVISION), OLD_SIZES)
    assert kept is explicit
    assert current.sizes == OLD_SIZES and (current.reading, current.quick) == (REVISION.reading, REVISION.quick)


def test_a_resized_claim_keeps_its_reading_as_the_newest_revision_and_pins_the_older():
    claim = _claim(revisions=(REVISION,)).resized(OLD_SIZES, "2026-11-28", "the quick run grew", "pass: 0.03")
    assert claim.reading == READING and len(claim.revisions) == 2
    assert claim.revisions[0].sizes == OLD_SIZES  # REVISION ran at the sizes that were current then
    assert (claim.revisions[1].reading, claim.revisions[1].quick) == (READING, "pass: 0.03")


def test_rows_of_an_undeclared_revision_are_refused():
    claim = _claim()
    stray = _claim(revisions=(REVISION,)).revised(1).close(1.0, 1.0)
    with pytest.raises(ValidationError, match="no declared Claim"):
        check_declared([stray], [claim], "toy")


def test_observations_and_remarks_of_ours_need_no_claim():
    """An observation declares itself (it names its figure), and so does a remark of ours (kind exploration)."""
    rows = [
        observation("fig. 2: ours converges", "converges", 0.005, True, "docs/theory/x.md §9"),
        observation(
            "ours stays near-optimal (our remark)", "near-optimal", 0.02, False, "docs/theory/x.md §9", ours=True
        ),
    ]
    check_declared(rows, [], "toy")
    assert [row.kind for row in rows] == ["observation", "exploration"]


def test_a_claim_may_name_several_falsifiers():
    claim = _claim(falsifier=("halved-gradient", "other-svm"))
    assert claim.falsifiers == ("halved-gradient", "other-svm")
    assert claim.close(1.0, 1.0).falsifier == "halved-gradient,other-svm"


def test_a_falsifier_whose_replacement_is_never_called_is_an_error():
    called = Falsifier("sqrt-off", "sqrt off by 10%", "math:sqrt", lambda sqrt: lambda x: 1.1 * sqrt(x), "mechanism")
    with called.applied():
        assert math.sqrt(4.0) == pytest.approx(2.2)
    unread = Falsifier("floor-off", "floor off by one", "math:floor", lambda f: lambda x: f(x) + 1, "mechanism")
    with pytest.raises(ValidationError, match="nothing called the replacement"):
        with unread.applied():
            math.sqrt(4.0)
    assert math.floor(2.5) == 2  # restored


class Adder:
    def __init__(self, k):
        self.k = k


def test_a_falsified_class_is_counted_and_stays_a_subclass():
    class Tagged(Adder):
        pass

    swap = Falsifier("adder", "an Adder subclass", f"{__name__}:Adder", lambda cls: Tagged, "mechanism")
    with swap.applied():
        value = Adder(2)
    assert isinstance(value, Tagged) and isinstance(value, Adder) and value.k == 2
    with pytest.raises(ValidationError, match="nothing called"):
        with swap.applied():
            pass


def test_a_remark_of_ours_is_counted_apart_from_the_papers_observations():
    from attnlab.verify import observation

    ours = observation("Adam ends nearest the l_inf SVM", "l_inf nearest", "l_2 nearest", False, "", ours=True)
    paper = observation("NGD trains faster (fig. 3)", "faster", "faster", True, "paper fig. 3")
    assert (ours.kind, ours.verdict, paper.kind) == ("exploration", "disagrees", "observation")
    counts = count_checks(pd.DataFrame([ours.as_row(), paper.as_row()]))
    assert (counts.observations, counts.agree, counts.ours, counts.ours_agree, counts.ok) == (1, 1, 1, 0, True)
    assert "0/1 remarks of ours (no paper's) agree" in counts.describe()
    with pytest.raises(ValidationError, match="names no figure"):
        observation("Adam ends nearest the l_inf SVM", "l_inf", "l_2", False, "")  # a paper's needs its figure


class Scaler:
    @staticmethod
    def scale(x):
        return 2 * x

    @classmethod
    def make(cls, x):
        return f"{cls.__name__}{x}"

    def use(self, x):
        return self.scale(x)


class SubScaler(Scaler):
    pass


def test_a_falsified_staticmethod_stays_static_inside_the_block_and_after():
    """getattr handed back the bare function, which went back into the class as a plain method: after the block
    Scaler().use(1) called scale(self, 1) and raised."""
    off = Falsifier("scale", "scale 3x", f"{__name__}:Scaler.scale", lambda f: lambda x: 3 * f(x) / 2, "mechanism")
    with off.applied():
        assert Scaler.scale(1) == 3 and Scaler().use(1) == 3 and SubScaler().use(2) == 6
    assert type(Scaler.__dict__["scale"]) is staticmethod and Scaler().use(1) == 2 and Scaler.scale(1) == 2


def test_a_falsified_classmethod_binds_each_class_inside_the_block_and_is_restored():
    """getattr handed back the method bound to Scaler, which went back as it was: SubScaler.make said 'Scaler'."""
    off = Falsifier("make", "make!", f"{__name__}:Scaler.make", lambda f: lambda cls, x: f(cls, x) + "!", "mechanism")
    with off.applied():
        assert Scaler.make(1) == "Scaler1!" and SubScaler.make(1) == "SubScaler1!"
    assert type(Scaler.__dict__["make"]) is classmethod
    assert Scaler.make(1) == "Scaler1" and SubScaler.make(1) == "SubScaler1"


def test_a_falsified_inherited_method_is_removed_from_the_subclass_after_the_block():
    off = Falsifier("use", "use + 1", f"{__name__}:SubScaler.use", lambda f: lambda self, x: f(self, x) + 1, "gross")
    with off.applied():
        assert SubScaler().use(1) == 3 and Scaler().use(1) == 2  # only the subclass is patched
    assert "use" not in SubScaler.__dict__ and SubScaler.use is Scaler.use
    inherited = Falsifier("make", "make?", f"{__name__}:SubScaler.make", lambda f: lambda c, x: f(c, x) + "?", "gross")
    with inherited.applied():
        assert SubScaler.make(1) == "SubScaler1?" and Scaler.make(1) == "Scaler1"
    assert "make" not in SubScaler.__dict__ and SubScaler.make(1) == "SubScaler1"
    with pytest.raises(ValidationError, match="nothing called"):  # restored even when the block is refused
        with off.applied():
            pass
    assert "use" not in SubScaler.__dict__
