"""Coverage (issue #43): a rule PASSes only when every input it expected was read. Pure."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.core.verdicts import (
    DECLARED,
    Coverage,
    Declared,
    Limit,
    Measurement,
    Outcome,
)
from gates.core.verdicts.measures import ONE_READING
from gates.core.verdicts.verdict import Covered


def passing(note="a note"):
    return Measurement.measured("rule", 0, Limit.at_most(0, "errors"), note=note,
                                evidence=["window #1: fine"])


def test_full_coverage_passes_and_says_how_many_were_read():
    full = Coverage(range(8), read=range(8), what="windows")
    assert full.complete and full.share == 1.0 and full.missing == {}
    assert full.cap() is Outcome.PASS and full.describe() == "windows read 8 of 8"
    judged = full.judge(passing())
    assert judged.outcome is Outcome.PASS and judged.note == "a note"
    assert judged.evidence == ["windows read 8 of 8", "window #1: fine"]


def test_a_failed_unit_is_never_a_gap_it_names_the_unit_and_why():
    cov = Coverage(range(8), read=[0, 1, 2, 5, 6, 7], failed={3: "ENOSPC (28)"},
                   what="windows")
    assert not cov.complete and cov.share == 0.75
    assert cov.missing == {3: "ENOSPC (28)", 4: "no reading"}
    assert cov.describe() == ("windows read 6 of 8 (75%); not read: #3 ENOSPC (28); "
                              "#4 no reading")
    judged = cov.judge(passing())
    assert judged.outcome is Outcome.ERROR and judged.value == 0
    assert judged.note == (f"{cov.describe()}: a verdict needs 100% of windows read; a note")
    assert judged.evidence[0] == cov.describe()


def test_between_the_minimum_and_full_is_marginal_below_it_error():
    cov = Coverage(["a", "b", "c", "d"], read="abc", failed={"d": "timed out"}, what="ranks")
    assert cov.cap(0.75) is Outcome.MARGINAL and cov.cap(0.76) is Outcome.ERROR
    assert cov.cap() is Outcome.ERROR  # the default minimum is full coverage
    m = cov.judge(passing(""), minimum=0.5)
    assert m.outcome is Outcome.MARGINAL
    assert m.note.startswith("ranks read 3 of 4 (75%); not read: d timed out: at least")


def test_a_fail_in_what_was_read_stands_and_coverage_never_lifts_an_outcome():
    fail = Measurement.measured("rule", 3, Limit.at_most(0, "errors"))
    cov = Coverage(range(4), read=[0], failed={1: "x", 2: "y", 3: "z"})
    judged = cov.judge(fail)
    assert judged.outcome is Outcome.FAIL and judged.note == ""
    assert judged.evidence == [cov.describe()]
    marginal = Measurement.measured("rule", 9.5, Limit.at_most(10, "x", marginal=0.1))
    assert Coverage([1], read=[1]).judge(marginal).outcome is Outcome.MARGINAL


def test_nothing_read_or_nothing_expected_is_an_error():
    assert Coverage(range(3), failed={0: "refused"}).cap(0.01) is Outcome.ERROR
    empty = Coverage([])
    assert not empty.complete and empty.share == 0.0 and empty.cap() is Outcome.ERROR


def test_a_long_list_of_missing_units_is_counted_not_spelled_out():
    cov = Coverage(range(100), read=range(90), what="windows")
    assert cov.describe().endswith("#94 no reading; and 5 more")


@pytest.mark.parametrize(("kw", "said"), [
    (dict(expected=[1, 1]), r"^pairs: a unit is expected twice in \(1, 1\)$"),
    (dict(expected=[1], read=[2]), r"^pairs: \['#2'\] read or failed but not expected$"),
    (dict(expected=[1], failed={2: "x"}), r"^pairs: \['#2'\] read or failed but not expected$"),
    (dict(expected=[1], read=[1], failed={1: "x"}), r"^pairs: \['#1'\] both read and failed$")])
def test_inconsistent_coverage_is_refused_naming_the_units(kw, said):
    with pytest.raises(ValueError, match=said):
        Coverage(**kw, what="pairs")


def test_a_minimum_outside_0_to_1_is_refused():
    for bad in (0.0, -0.1, 1.01):
        with pytest.raises(ValueError, match=rf"a minimum coverage is a share in \(0, 1\], "
                                             rf"not {bad}$"):
            Coverage([1], read=[1]).cap(bad)


def test_units_are_called_units_unless_the_rule_says_what_they_are():
    said = Coverage([1, 2], read=[1]).describe()
    assert said == "units read 1 of 2 (50%); not read: #2 no reading"


@st.composite
def coverages(draw):
    units = draw(st.lists(st.integers(0, 50), unique=True, max_size=20))
    fate = draw(st.lists(st.sampled_from(["read", "failed", "absent"]), min_size=len(units),
                         max_size=len(units)))
    read = [u for u, f in zip(units, fate, strict=True) if f == "read"]
    failed = {u: f"why {u}" for u, f in zip(units, fate, strict=True) if f == "failed"}
    return Coverage(units, read=read, failed=failed, what="units")


@given(coverages(), st.floats(min_value=1e-6, max_value=1.0))
def test_pass_if_and_only_if_every_expected_unit_was_read(cov, minimum):
    every = bool(cov.expected) and set(cov.expected) == set(cov.read)
    assert (cov.cap(minimum) is Outcome.PASS) == every
    assert (cov.judge(passing(), minimum).outcome is Outcome.PASS) == every
    # Everything not read is named with why, and a failed unit keeps its own reason.
    assert set(cov.missing) == set(cov.expected) - set(cov.read)
    assert all(cov.missing[u] == why for u, why in cov.failed.items())
    if not every and cov.read and cov.share >= minimum:
        assert cov.cap(minimum) is Outcome.MARGINAL
    elif not every:
        assert cov.cap(minimum) is Outcome.ERROR


# ---- the record carries it, and a rule over many inputs cannot be written without it --------

def test_the_record_carries_coverage_and_a_pass_needs_every_unit_read():
    cov = Coverage(range(8), read=range(8), what="windows")
    judged = cov.judge(passing())
    assert judged.coverage == Covered(what="windows", expected=8, read=8)
    again = Measurement.model_validate_json(judged.model_dump_json())
    assert again.coverage == judged.coverage and again.coverage.complete
    assert "coverage" not in passing().model_dump()  # a rule over one reading reads as before
    with pytest.raises(ValueError, match="a PASS needs every one of its pairs read"):
        Measurement(name="gain", outcome=Outcome.PASS,
                    coverage=Covered(what="pairs", expected=8, read=7, missing=["#3 x"]))


def test_the_record_names_five_missing_units_and_counts_the_rest():
    cov = Coverage(range(9), read=[0, 8], what="windows")
    assert cov.covered().missing == ["#1 no reading", "#2 no reading", "#3 no reading",
                                     "#4 no reading", "#5 no reading", "and 2 more"]
    assert cov.describe().endswith("#5 no reading; and 2 more")
    five = Coverage(range(6), read=[0], what="windows").covered().missing
    assert len(five) == 5 and five[-1] == "#5 no reading"  # exactly five: none counted


@pytest.mark.parametrize("note", ["", "the rule's own note"])
def test_a_capped_outcome_says_why_before_the_rules_own_note(note):
    cov = Coverage(range(4), read=range(3), what="windows")
    error, marginal = cov.judge(passing(note)), cov.judge(passing(note), minimum=0.5)
    why = f"{cov.describe()}: a verdict needs 100% of windows read"
    margin = (f"{cov.describe()}: at least the 50% a verdict needs, but only a complete one "
              "may PASS")
    assert error.note == (f"{why}; {note}" if note else why)
    assert marginal.note == (f"{margin}; {note}" if note else margin)


def test_every_declaration_says_what_it_is_over():
    with pytest.raises(TypeError, match="over"):
        Declared("g9.rule", "A rule")  # the missing keyword is the point
    for gate in DECLARED.values():
        for d in gate.by_id.values():
            assert d.over, d.id


def test_a_rule_over_many_inputs_gives_what_it_found_only_with_their_coverage():
    rule = Declared("g9.rule", "A rule", over="pairs")
    with pytest.raises(ValueError, match="g9.rule is a rule over pairs"):
        rule.measured(0, Limit.at_most(0, "errors"))
    with pytest.raises(ValueError, match="not over windows"):
        rule.stamp(Coverage([1], read=[1], what="windows").judge(passing()))
    assert rule.stamp(Coverage([1], read=[1], what="pairs").judge(passing())).id == "g9.rule"
    assert rule.error("could not run").outcome is Outcome.ERROR  # nothing found: no coverage
    one = Declared("g9.one", "One reading", over=ONE_READING)
    assert one.measured(0, Limit.at_most(0, "errors")).outcome is Outcome.PASS


def test_full_coverage_leaves_a_reported_figure_reported_and_a_gap_still_counts():
    shown = Measurement.reported("drift", 1.5, "%")
    full = Coverage([1, 2], read=[1, 2], what="windows").judge(shown)
    assert full.outcome is Outcome.REPORTED and full.coverage.read == 2
    short = Coverage([1, 2], read=[1], what="windows").judge(shown)
    assert short.outcome is Outcome.ERROR and "#2 no reading" in short.note
