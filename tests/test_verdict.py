"""gates.core.verdict and gates.core.record: limits, outcomes, gate verdict and gate record."""

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from gates.core.verdicts import GateRecord, Limit, Measurement, Outcome, upstream_gate
from gates.core.verdicts.verdict import SEVERITY, failures_first, gate_verdict

P, F, M, E, B, NA, R = (Outcome.PASS, Outcome.FAIL, Outcome.MARGINAL, Outcome.ERROR,
                        Outcome.BLOCKED, Outcome.NOT_APPLICABLE, Outcome.REPORTED)


# ---- Limit: printing -------------------------------------------------------------------

@pytest.mark.parametrize(("limit", "text"), [
    (Limit.at_least(10.5, "GB/s"), "x >= 10.5 GB/s"),
    (Limit(lo=0, hi=10, unit="%"), "0 <= x <= 10 %"),
    (Limit.at_most(5, hi_inclusive=False), "x < 5"),
    (Limit.at_most(5), "x <= 5"),
    (Limit.at_least(5, lo_inclusive=False), "x > 5"),
    (Limit(lo=0, hi=10, lo_inclusive=False, hi_inclusive=False), "0 < x < 10"),
    (Limit.at_most(500, "µs"), "x <= 500 µs"),
    (Limit.at_least(25, "%", relative_to="G2 TTFT p50"), "x >= 25 % (relative to G2 TTFT p50)"),
    (Limit.at_least(200000, "IO/s"), "x >= 200000 IO/s"),  # not "2e+05"
    (Limit.at_least(123456.7, "IO/s"), "x >= 123457 IO/s"),
    (Limit.at_most(0.25, "ms"), "x <= 0.25 ms"),
    (Limit.at_least(5.12345, "GB/s"), "x >= 5.123 GB/s"),
])
def test_limit_prints_as_written(limit, text):
    assert str(limit) == text


# ---- Limit: judging --------------------------------------------------------------------

def test_inclusive_edges_pass_exclusive_edges_fail():
    assert Limit.at_least(10).judge(10) is P
    assert Limit.at_least(10, lo_inclusive=False).judge(10) is F
    assert Limit.at_most(10).judge(10) is P
    assert Limit.at_most(10, hi_inclusive=False).judge(10) is F
    assert Limit.at_least(10).judge(math.nextafter(10, 0)) is F
    assert Limit.at_most(10).judge(math.nextafter(10, 20)) is F


def test_two_sided_limit():
    limit = Limit(lo=0, hi=10, unit="%")
    assert [limit.judge(v) for v in (-0.1, 0, 5, 10, 10.1)] == [F, P, P, P, F]


def test_margin_is_positive_inside_and_negative_outside():
    assert Limit.at_least(10).margin(12) == 2
    assert Limit.at_least(10).margin(7) == -3
    assert Limit.at_most(10).margin(4) == 6
    assert Limit.at_most(10).margin(11) == -1
    assert Limit(lo=0, hi=10).margin(9) == 1  # the nearer bound
    assert Limit(lo=0, hi=10).margin(2) == 2
    assert Limit(lo=0, hi=10).margin(-1) == -1


def test_guard_band_makes_a_close_pass_marginal():
    limit = Limit.at_least(100, marginal=0.05)
    assert limit.judge(104) is M
    assert limit.judge(106) is P
    assert limit.judge(99) is F  # a failure is never softened to MARGINAL
    upper = Limit.at_most(100, marginal=0.05)
    assert upper.judge(96) is M
    assert upper.judge(90) is P


def test_interval_crossing_a_bound_is_marginal():
    limit = Limit.at_least(10)
    assert limit.judge(12, interval=(9, 15)) is M
    assert limit.judge(12, interval=(11, 13)) is P
    # A point outside whose interval reaches back inside is undecided too; FAIL needs all of it out.
    assert limit.judge(9, interval=(8, 11)) is M
    assert limit.judge(9, interval=(8, 9.5)) is F
    assert limit.judge(9, interval=(8, 10)) is M  # the bound is inclusive: 10 is inside
    two_sided = Limit(lo=-10, hi=10)
    assert two_sided.judge(30, interval=(-20, 40)) is M and two_sided.judge(30, (20, 40)) is F


def test_an_interval_ending_on_an_exclusive_bound_lies_wholly_beyond_it():
    # x > 10: an interval up to 10 itself has no value inside, so it is FAIL, not MARGINAL.
    above = Limit.at_least(10, lo_inclusive=False)
    assert above.judge(9, interval=(8, 10)) is F
    assert above.judge(9, interval=(8, 10.5)) is M
    below = Limit.at_most(10, hi_inclusive=False)
    assert below.judge(11, interval=(10, 12)) is F
    assert below.judge(11, interval=(9.5, 12)) is M


def test_nan_fails():
    assert Limit.at_least(0).judge(math.nan) is F
    assert Limit.at_most(10).judge(math.nan) is F
    assert Measurement.measured("x", math.nan, Limit.at_least(1)).outcome is F


@pytest.mark.parametrize("kwargs", [
    {},
    {"unit": "GB/s"},
    {"lo": 10, "hi": 5},
    {"lo": 5, "hi": 5, "lo_inclusive": False},
    {"lo": 5, "hi": 5, "hi_inclusive": False},
    {"lo": math.nan},
    {"hi": math.nan},
    {"lo": 1, "marginal": 1.0},
    {"lo": 1, "marginal": -0.1},
])
def test_impossible_limits_are_rejected(kwargs):
    with pytest.raises(ValidationError):
        Limit(**kwargs)


def test_point_limit_is_allowed():
    assert Limit(lo=5, hi=5).judge(5) is P
    assert Limit(lo=5, hi=5).judge(5.001) is F


def test_rejection_names_the_key():
    with pytest.raises(ValidationError, match="g1.seq_read_bw_min"):
        Limit(lo=10, hi=5, key="g1.seq_read_bw_min")


# ---- Measurement -----------------------------------------------------------------------

def test_measured_carries_value_unit_outcome_and_margin():
    limit = Limit.at_least(5, "GB/s")
    m = Measurement.measured("seq read", 6.5, limit, evidence=["a.json"], note="n")
    assert (m.value, m.unit, m.outcome, m.limit, m.evidence, m.note) == (
        6.5, "GB/s", P, limit, ["a.json"], "n")
    assert m.margin == pytest.approx(1.5)
    assert Measurement.measured("seq read", 4, limit).outcome is F
    assert Measurement.measured("seq read", 4, limit).margin == -1


def test_error_blocked_not_applicable():
    limit = Limit.at_least(5, "GB/s")
    err = Measurement.error("seq read", "fio crashed", limit, evidence=["log"])
    assert (err.outcome, err.note, err.value, err.unit, err.margin, err.evidence) == (
        E, "fio crashed", None, "GB/s", None, ["log"])
    blocked = Measurement.blocked("ttft", "G1 did not pass")
    assert (blocked.outcome, blocked.note, blocked.value, blocked.limit) == (
        B, "G1 did not pass", None, None)
    assert Measurement.blocked("ttft", "x", limit).unit == "GB/s"
    na = Measurement.not_applicable("rdma", "transport is tcp")
    assert (na.outcome, na.note, na.margin) == (NA, "transport is tcp", None)


def test_measured_judges_its_interval_and_keeps_it():
    limit = Limit.at_least(10, "GB/s", key="g1.seq_read_bw_min")
    assert limit.key == "g1.seq_read_bw_min"
    m = Measurement.measured("seq read", 12, limit, interval=(9, 15))
    assert (m.outcome, m.interval, m.note) == (M, (9, 15), "")  # the interval reaches past 10
    assert Measurement.measured("seq read", 12, limit).outcome is P


def test_covered_says_how_many_were_read_and_names_the_rest():
    from gates.core.verdicts.verdict import Covered
    assert Covered(what="pairs", expected=8, read=8).describe() == "pairs read 8 of 8"
    assert Covered(what="pairs", expected=8, read=6, missing=["#3 ENOSPC (28)", "#5 timeout"]
                   ).describe() == "pairs read 6 of 8 (75%); not read: #3 ENOSPC (28); #5 timeout"
    assert Covered(what="pairs", expected=8, read=6).describe() == "pairs read 6 of 8 (75%)"
    assert Covered(what="pairs", expected=0, read=0).describe() == "pairs read 0 of 0"


def test_an_error_keeps_the_limit_it_could_not_be_judged_against():
    limit = Limit.at_most(500, "µs")
    err = Measurement.error("p99 latency", "no samples", limit)
    assert (err.limit, err.unit) == (limit, "µs")
    assert Measurement.error("p99 latency", "no samples").unit == ""


def test_a_limit_made_by_at_most_or_at_least_keeps_its_unit():
    assert Limit.at_most(500, "µs").unit == "µs" and Limit.at_most(500).unit == ""
    assert str(Limit.at_most(500)) == "x <= 500"
    assert Limit.at_least(5, "GB/s").unit == "GB/s" and Limit.at_least(5).unit == ""


# ---- gate_verdict: properties ----------------------------------------------------------

outcome_lists = st.lists(st.sampled_from(list(Outcome)), max_size=12)


@given(outcome_lists)
def test_pass_iff_something_counted_and_all_counted_pass(outcomes):
    counted = [o for o in outcomes if o not in (NA, Outcome.REPORTED)]
    expected_pass = bool(counted) and all(o is P for o in counted)
    assert (gate_verdict(outcomes) is P) == expected_pass


@given(st.lists(st.sampled_from([NA, Outcome.REPORTED]), max_size=6))
def test_nothing_judged_is_an_error_never_a_pass(outcomes):
    """Reported figures are measured but held against nothing: alone they pass nothing."""
    assert gate_verdict(outcomes) is E


def test_a_reported_figure_has_a_value_no_limit_and_must_be_finite():
    m = Measurement.reported("Baseline TTFT p50", 2.04, "s", note="median over 3 repetitions")
    assert (m.outcome, m.value, m.limit, m.margin) == (Outcome.REPORTED, 2.04, None, None)
    with pytest.raises(ValueError, match="must be finite"):
        Measurement.reported("x", float("inf"), "s")


@given(st.integers(min_value=1, max_value=8), st.integers(min_value=0, max_value=4))
def test_all_error_is_error(errors, not_applicable):
    assert gate_verdict([E] * errors + [NA] * not_applicable) is E


@given(outcome_lists)
def test_any_fail_is_fail(outcomes):
    assert gate_verdict([*outcomes, F]) is F


@given(outcome_lists, st.randoms(use_true_random=False))
def test_order_does_not_matter(outcomes, rnd):
    shuffled = list(outcomes)
    rnd.shuffle(shuffled)
    assert gate_verdict(shuffled) is gate_verdict(outcomes)


@given(outcome_lists)
def test_verdict_is_the_worst_counted_outcome(outcomes):
    verdict = gate_verdict(outcomes)
    assert verdict not in (NA, R)
    # REPORTED figures have no limit: like NOT APPLICABLE they count neither way.
    counted = [o for o in outcomes if o not in (NA, R)]
    if counted:
        assert verdict is min(counted, key=SEVERITY.index)
    else:
        assert verdict is E


@given(outcome_lists)
def test_outcome_strings_are_judged_like_outcomes(outcomes):
    assert gate_verdict([o.value for o in outcomes]) is gate_verdict(outcomes)


def test_gate_verdict_examples():
    assert gate_verdict([]) is E
    assert gate_verdict([P]) is P
    assert gate_verdict([P, NA]) is P
    assert gate_verdict([P, M]) is M
    assert gate_verdict([P, B]) is B
    assert gate_verdict([P, E, B]) is E
    assert gate_verdict([M, E, F]) is F
    assert gate_verdict([R]) is E  # a figure without a limit is not a verdict
    assert gate_verdict([P, R]) is P


def _m(outcome: Outcome, name: str) -> Measurement:
    return Measurement(name=name, outcome=outcome)


@given(st.lists(st.sampled_from(list(Outcome)), max_size=12))
def test_failures_first_orders_by_severity_and_keeps_ties_stable(outcomes):
    ms = [_m(o, str(i)) for i, o in enumerate(outcomes)]
    ordered = failures_first(ms)
    assert sorted(ordered, key=lambda m: int(m.name)) == ms  # a permutation
    ranks = [SEVERITY.index(m.outcome) for m in ordered]
    assert ranks == sorted(ranks)
    for a, b in zip(ordered, ordered[1:], strict=False):
        if a.outcome is b.outcome:
            assert int(a.name) < int(b.name)


def test_failures_first_example():
    ms = [_m(P, "p"), _m(NA, "na"), _m(M, "m"), _m(F, "f"), _m(E, "e"), _m(B, "b")]
    assert [m.name for m in failures_first(ms)] == ["f", "e", "b", "m", "p", "na"]


# ---- GateRecord ------------------------------------------------------------------------

def _record(*measurements: Measurement) -> GateRecord:
    return GateRecord(gate="g1", run_id="run-1", site="lab", started="2026-01-01T00:00:00Z",
                      measurements=list(measurements), thresholds_revision="r1",
                      evidence={"evidence/a.json": "ab" * 32})


def test_record_verdict_is_computed_from_measurements():
    limit = Limit.at_least(5, "GB/s")
    assert _record().verdict is E
    assert _record(Measurement.measured("bw", 6, limit)).verdict is P
    assert _record(Measurement.measured("bw", 6, limit),
                   Measurement.measured("bw2", 4, limit)).verdict is F
    assert _record(Measurement.not_applicable("x", "n/a")).verdict is E


def test_record_counts_and_order():
    limit = Limit.at_least(5)
    record = _record(Measurement.measured("a", 6, limit), Measurement.measured("b", 4, limit),
                     Measurement.measured("c", 7, limit))
    assert record.counts() == {"PASS": 2, "FAIL": 1}
    assert [m.name for m in record.ordered()] == ["b", "a", "c"]
    assert record.title == "G1 arrival acceptance"


def test_canonical_json_is_stable_and_sorted():
    limit = Limit.at_least(5, "GB/s")
    one = _record(Measurement.measured("bw", 6, limit))
    two = _record(Measurement.measured("bw", 6, limit))
    assert one.canonical_json() == two.canonical_json()
    assert one.sha256() == two.sha256()
    body = json.loads(one.canonical_json())
    assert list(body) == sorted(body)
    assert body["verdict"] == "PASS"
    assert len(one.sha256()) == 64


def test_sha256_changes_when_a_measurement_changes():
    limit = Limit.at_least(5, "GB/s")
    base = _record(Measurement.measured("bw", 6, limit))
    assert _record(Measurement.measured("bw", 6.0001, limit)).sha256() != base.sha256()
    assert _record(Measurement.measured("bw", 6, limit, note="x")).sha256() != base.sha256()
    assert _record(Measurement.measured("bw", 6, Limit.at_least(5.5, "GB/s"))).sha256() \
        != base.sha256()


def test_round_trip_keeps_verdict_and_hash():
    limit = Limit.at_least(5, "GB/s")
    record = _record(Measurement.measured("bw", 6, limit), Measurement.measured("b", 1, limit))
    again = GateRecord.model_validate_json(record.canonical_json())
    assert again.verdict is F
    assert again == record
    assert again.sha256() == record.sha256()


def test_a_stored_verdict_cannot_override_the_measurements():
    record = _record(Measurement.measured("bw", 1, Limit.at_least(5)))
    body = json.loads(record.canonical_json())
    body["verdict"] = "PASS"
    assert GateRecord.model_validate(body).verdict is F


def test_canonical_json_is_strict_json_even_with_nan():
    record = _record(Measurement.measured("bw", math.nan, Limit.at_least(5)))
    text = record.canonical_json()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    again = GateRecord.model_validate_json(text)
    assert again.verdict is F
    assert again.sha256() == GateRecord.model_validate_json(again.canonical_json()).sha256()


def test_upstream_gate_chain():
    assert [upstream_gate(g) for g in ("g1", "g2", "g3", "g4")] == [None, "g1", "g2", "g3"]


def test_gate_verdict_reads_outcomes_written_as_strings():
    # A record read back from JSON holds strings: "NOT APPLICABLE" must not count as a pass.
    assert gate_verdict(["NOT APPLICABLE", "PASS"]) is Outcome.PASS
    assert gate_verdict(["NOT APPLICABLE"]) is Outcome.ERROR
    assert gate_verdict(["PASS", "FAIL"]) is Outcome.FAIL
    with pytest.raises(ValueError, match="MAYBE"):  # an outcome no writer produces never passes
        gate_verdict(["MAYBE"])


def test_a_digest_does_not_depend_on_the_order_of_the_keys():
    from gates.core.verdicts.record import json_digest

    assert json_digest({"a": 1, "b": {"x": 2, "y": 3}}) == json_digest({"b": {"y": 3, "x": 2},
                                                                           "a": 1})


def test_a_limit_of_ten_thousand_or_more_is_written_whole_up_to_1e16():
    assert str(Limit(lo=1e4, unit="IO/s")) == "x >= 10000 IO/s"
    assert str(Limit(lo=9999.5)) == "x >= 1e+04"  # 4 significant digits below 10,000
    assert str(Limit(hi=1e16)) == "x <= 1e+16"  # and beyond 1e16 (no 17-digit integers)
    assert str(Limit(hi=9.5e15)) == "x <= 9500000000000000"


def test_blocked_and_reported_keep_what_they_were_given():
    limit = Limit(lo=29.0, unit="%")
    blocked = Measurement.blocked("gain", "G2 did not pass", limit)
    assert (blocked.limit, blocked.unit, blocked.note) == (limit, "%", "G2 did not pass")
    assert Measurement.blocked("gain", "G2 did not pass").unit == ""
    shown = Measurement.reported("drift", 1.5, "%")
    assert (shown.value, shown.unit, shown.note, shown.outcome) == (1.5, "%", "",
                                                                   Outcome.REPORTED)
    assert Measurement.reported("drift", 1.5, "%", note="rehearsal").note == "rehearsal"


def test_a_value_the_limit_does_not_contain_is_in_no_guard_band():
    """The band lies inside the limit: 24.5 against >= 25 with a 5 % band fails, it is not
    "near the limit" (G3's undecided note once told such a median it was in the band)."""
    limit = Limit.at_least(25, "%", marginal=0.05)
    assert limit.in_guard_band(25.5) and not limit.in_guard_band(24.5)
    assert limit.judge(24.5) is Outcome.FAIL
    upper = Limit.at_most(10, "%", marginal=0.1)
    assert upper.in_guard_band(9.5) and not upper.in_guard_band(10.5)
