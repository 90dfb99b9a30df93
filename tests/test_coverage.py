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
from gates.core.verdicts.measures import INCOMPLETE, ONE_READING, Declarations, Per, Scope
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


# ---- declared measurements (gates.core.verdicts.measures) -----------------------------------

# A hand-made gate "g9": built in each test, since the gates' own registries are built once.
def g9() -> Declarations:
    """TTFT per concurrency level (the levels: the scope's thresholds here), errors once, an
    arm carrier, and media errors that a site without named devices excuses."""
    gate = Declarations("g9", [
        Declared("g9.ttft", "TTFT p50", per=Per("concurrency", lambda s: s.thresholds),
                 over=ONE_READING),
        Declared("g9.errors", "Request errors", over=ONE_READING),
        Declared("g9.arm", "Arm protocol", over=ONE_READING),
        Declared("g9.smart", "Media errors", over=ONE_READING),
        Declared("g9.any", "Any level", per=Per("concurrency"), over=ONE_READING),
    ])
    gate.require("g9.arm", carrier=True)
    gate.require("g9.smart", excuse=lambda s: "" if s.site else "no devices named")
    return gate


NAMED, BARE = Scope(site="nvme0n1", thresholds=[8, 16]), Scope(site="", thresholds=[8, 16])
WHY = " (a gate's verdict needs every measurement it declares: run its checks whole)"


def whole(gate):
    """Every measurement a complete g9 record on a site with devices holds."""
    return [gate["g9.ttft"].measured(1.0, Limit.at_most(2.0, "s"), at=8),
            gate["g9.ttft"].measured(1.5, Limit.at_most(2.0, "s"), at=16),
            gate["g9.errors"].measured(0, Limit.at_most(0, "errors")),
            gate["g9.smart"].measured(0, Limit.at_most(0, "errors")),
            gate["g9.any"].reported(3.0, "s", at=16)]


def test_a_declared_name_is_derived_from_its_title_and_level():
    per = Declared("g9.ttft", "TTFT p50", per="concurrency", over=ONE_READING)
    assert (per.name(8), per.name()) == ("TTFT p50 @ concurrency 8", "TTFT p50")
    assert Declared("g9.t", "T", per=Per("depth"), over=ONE_READING).name(4) == "T @ depth 4"
    assert Declared("g9.t", "T", per="depth", form="{title} ({per}={at})",
                    over=ONE_READING).name(4) == "T (depth=4)"
    once = Declared("g9.errors", "Request errors", over=ONE_READING)
    assert once.name() == "Request errors"
    with pytest.raises(ValueError) as refused:
        once.name(8)
    assert str(refused.value) == "measurement g9.errors is taken once: it has no 8 level"
    # A level asked of a once-taken rule is refused as that, before anything is judged.
    over_pairs = Declared("g9.rule", "A rule", over="pairs")
    with pytest.raises(ValueError) as refused:
        over_pairs.measured(0, Limit.at_most(0, "errors"), at=8)
    assert str(refused.value) == "measurement g9.rule is taken once: it has no 8 level"


def test_each_kind_of_measurement_is_taken_under_its_declaration():
    d = Declared("g9.ttft", "TTFT p50", per="concurrency", over=ONE_READING)
    limit = Limit.at_most(2.0, "s")
    m = d.measured(2.5, limit, at=8, evidence=["rep 1"], note="slow", interval=(2.2, 2.8))
    assert (m.id, m.at, m.name, m.value, m.unit, m.limit, m.outcome) == (
        "g9.ttft", 8, "TTFT p50 @ concurrency 8", 2.5, "s", limit, Outcome.FAIL)
    assert (m.evidence, m.note, m.interval) == (["rep 1"], "slow", (2.2, 2.8))
    assert d.measured(1.0, limit).name == "TTFT p50" and d.measured(1.0, limit).at is None
    e = d.error("engine down", limit, at=16, evidence=["log"])
    assert (e.id, e.at, e.name, e.outcome, e.note, e.limit, e.unit, e.evidence) == (
        "g9.ttft", 16, "TTFT p50 @ concurrency 16", Outcome.ERROR, "engine down", limit, "s",
        ["log"])
    assert d.error("engine down").name == "TTFT p50" and d.error("engine down").limit is None
    b = d.blocked("G2 did not pass", at=8)
    assert (b.id, b.at, b.name, b.outcome, b.note) == (
        "g9.ttft", 8, "TTFT p50 @ concurrency 8", Outcome.BLOCKED, "G2 did not pass")
    assert d.blocked("G2 did not pass").name == "TTFT p50"
    r = d.reported(3.0, "s", at=8, note="for the record")
    assert (r.id, r.at, r.name, r.outcome, r.value, r.unit, r.note) == (
        "g9.ttft", 8, "TTFT p50 @ concurrency 8", Outcome.REPORTED, 3.0, "s", "for the record")
    assert d.reported(3.0, "s").name == "TTFT p50" and d.reported(3.0, "s").note == ""
    with pytest.raises(ValueError) as refused:  # the refusal names the level it was for
        d.reported(float("inf"), "s", at=8)
    assert str(refused.value) == "TTFT p50 @ concurrency 8: a reported figure must be " \
                                 "finite, not inf"
    n = d.not_applicable("no GPU", at=8)
    assert (n.id, n.at, n.name, n.outcome, n.note) == (
        "g9.ttft", 8, "TTFT p50 @ concurrency 8", Outcome.NOT_APPLICABLE, "no GPU")
    assert d.not_applicable("no GPU").name == "TTFT p50"


def test_stamp_says_why_it_refuses_what_a_rule_over_many_inputs_found():
    rule = Declared("g9.rule", "A rule", over="pairs")
    for found in (passing(), Measurement.reported("drift", 1.5, "%"),
                  Measurement.measured("r", 1, Limit.at_most(0, "errors"))):
        with pytest.raises(ValueError) as refused:
            rule.stamp(found)
        assert str(refused.value) == (
            "g9.rule is a rule over pairs: judge what it found through their Coverage "
            "(gates.core.verdicts), so those it could not read count against it")
    with pytest.raises(ValueError) as refused:
        rule.stamp(Coverage([1], read=[1], what="windows").judge(passing()))
    assert str(refused.value) == "g9.rule is a rule over pairs, not over windows"
    # A PASS over fewer than all its inputs, however it was made, is refused too.
    short = passing().model_copy(update={"coverage": Covered(what="pairs", expected=2, read=1)})
    with pytest.raises(ValueError) as refused:
        rule.stamp(short)
    assert str(refused.value) == "g9.rule: a PASS over pairs read 1 of 2 (50%)"
    one = Declared("g9.one", "One reading", over=ONE_READING)
    with pytest.raises(ValueError, match="^g9.one: a PASS over pairs read 1 of 2"):
        one.stamp(short)
    # What was not found (an ERROR, a BLOCKED) needs no coverage.
    assert rule.stamp(Measurement.error("r", "could not run")).id == "g9.rule"
    # Whatever a rule named its measurement, the declaration names it.
    stamped = rule.stamp(Coverage([1], read=[1], what="pairs").judge(passing()))
    assert (stamped.name, stamped.id, stamped.at) == ("A rule", "g9.rule", None)
    per = Declared("g9.per", "Per level", per="concurrency", over=ONE_READING)
    assert per.stamp(passing(), at=8).name == "Per level @ concurrency 8"
    assert rule.blocked("G2 did not pass").outcome is Outcome.BLOCKED


def test_a_gate_declares_its_completeness_carrier_and_refuses_ids_not_its_own():
    gate = g9()
    assert gate.gate == "g9"
    complete = gate["g9.complete"]
    assert (complete.title, complete.over) == ("Every declared measurement taken",
                                              "declared measurements")
    assert gate.needs["g9.complete"].carrier and gate.needs["g9.arm"].carrier
    assert not gate.needs["g9.smart"].carrier and gate.needs["g9.smart"].excuse(BARE)
    for ids, bad in ((["g8.x"], "g8.x"), (["g9x.y"], "g9x.y"), (["g9.a", "g9.a"], "g9.a"),
                     (["g9.complete"], "g9.complete")):
        with pytest.raises(ValueError) as refused:
            Declarations("g9", [Declared(i, "X", over=ONE_READING) for i in ids])
        assert str(refused.value) == f"{bad}: a g9 id must start with 'g9.' and be unique"


def test_an_unknown_id_is_refused_naming_what_the_gate_declares():
    gate = g9()
    with pytest.raises(KeyError) as refused:
        gate["g9.nope"]
    assert refused.value.args[0] == ("unknown measurement 'g9.nope': g9 declares g9.any, "
                                     "g9.arm, g9.complete, g9.errors, g9.smart, g9.ttft")
    with pytest.raises(KeyError, match="g9.nope"):
        gate.require("g9.nope")
    with pytest.raises(KeyError, match="g9.nope"):
        gate.select([], "g9.nope")


def test_select_keeps_the_measurements_order_and_by_level_keys_values_by_level():
    gate = g9()
    taken = whole(gate) + [gate["g9.ttft"].error("no level known"),
                           gate["g9.ttft"].error("engine down", at=32)]
    assert [m.id for m in gate.select(taken, "g9.errors", "g9.ttft")] == [
        "g9.ttft", "g9.ttft", "g9.errors", "g9.ttft", "g9.ttft"]
    assert gate.select(taken, "g9.arm") == []
    assert gate.by_level(taken, "g9.ttft") == {8: 1.0, 16: 1.5}  # no level, no value: left out


def test_required_is_every_level_of_every_id_the_site_needs_but_carriers():
    gate = g9()
    assert [(d.id, at) for d, at in gate.required(NAMED)] == [
        ("g9.ttft", 8), ("g9.ttft", 16), ("g9.errors", None), ("g9.smart", None),
        ("g9.any", None)]
    assert [(d.id, at) for d, at in gate.required(BARE)] == [
        ("g9.ttft", 8), ("g9.ttft", 16), ("g9.errors", None), ("g9.any", None)]


def test_a_complete_record_is_left_as_it_is():
    gate = g9()
    assert gate.complete(whole(gate), NAMED) == whole(gate)
    assert gate.complete(whole(gate)[:3] + whole(gate)[4:], BARE) == whole(gate)[:3] + \
        whole(gate)[4:]


def test_an_incomplete_record_gets_one_error_naming_every_missing_id_and_check():
    gate = g9()
    short = whole(gate)[1:4]  # no TTFT at 8, no level of "any"
    *kept, incomplete = gate.complete(short, NAMED, not_run=["test_ttft", "test_any"])
    assert kept == short
    assert (incomplete.id, incomplete.name, incomplete.outcome) == (
        "g9.complete", "Every declared measurement taken", Outcome.ERROR)
    assert incomplete.note == (f"{INCOMPLETE}: not measured: g9.ttft @ concurrency 8, g9.any; "
                               "checks not run: test_ttft, test_any" + WHY)
    *_, missing = gate.complete(short, NAMED)
    assert missing.note == f"{INCOMPLETE}: not measured: g9.ttft @ concurrency 8, g9.any" + WHY
    *_, unrun = gate.complete(whole(gate), NAMED, not_run=["test_ttft"])
    assert unrun.note == f"{INCOMPLETE}: checks not run: test_ttft" + WHY


def test_a_blocked_carrier_stands_for_what_was_never_attempted():
    gate = g9()
    blocked = [gate["g9.arm"].blocked("G2 did not pass")]
    assert gate.complete(blocked, NAMED) == blocked
    *_, named = gate.complete(blocked, NAMED, not_run=["test_ttft"])
    assert named.note == f"{INCOMPLETE}: checks not run: test_ttft" + WHY
    # A rule that was blocked is not the gate's carrier: what is missing is still missing.
    *_, incomplete = gate.complete([gate["g9.errors"].blocked("G2 did not pass")], BARE)
    assert incomplete.note.startswith(f"{INCOMPLETE}: not measured: g9.ttft @ concurrency 8, ")


def test_not_applicable_stands_only_where_the_site_excuses_it():
    gate = g9()
    na = gate["g9.smart"].not_applicable("nvme-cli is missing")
    [judged, _] = gate.complete([na], NAMED)
    assert (judged.outcome, judged.note, judged.id) == (
        Outcome.ERROR, "not measured, although it applies to this site: nvme-cli is missing",
        "g9.smart")
    assert gate.complete([na], BARE)[0] == na  # no devices named: a fact of the site
    # An id with no excuse declared, or no need at all, keeps its NOT APPLICABLE.
    for other in (gate["g9.arm"].not_applicable("tcp"), gate["g9.errors"].not_applicable("tcp"),
                  Measurement.not_applicable("undeclared", "tcp")):
        assert gate.complete([other], NAMED)[0] == other
    error = gate["g9.smart"].error("nvme-cli crashed")
    assert gate.complete([error], NAMED)[0] == error
