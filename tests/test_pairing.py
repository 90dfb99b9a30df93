"""gates.proof.pairing: the delta of a series between two scrapes, or why there is none.

These replace promtext's MetricSet.delta tests (issue #25 items 1-2): that delta counted a series
missing from `before` from zero and a counter that fell from its new value, as PromQL's
increase() does over a long range; the proof's two scrapes around one probe may do neither.
"""

from __future__ import annotations

import pytest

from gates.proof import parse_metrics
from gates.proof.pairing import Pairing, PairingError, canonical


def pair(before: str, after: str, **kw) -> Pairing:
    return Pairing(parse_metrics(before), parse_metrics(after), **kw)


def one(p: Pairing, name: str, **labels: str):
    return next(s for s in p.after.samples if s.name == name and s.labels == labels)


def test_delta_subtracts_series_by_series_and_new_children_count_from_zero():
    p = pair('# TYPE c counter\nc{k="1"} 10\nc{k="2"} 5\n',
             '# TYPE c counter\nc{k="1"} 15\nc{k="2"} 5\nc{k="3"} 4\n')
    assert [p.delta(one(p, "c", k=k)) for k in "123"] == [5, 0, 4]


def test_a_family_before_declares_without_a_child_yet_counts_from_zero():
    p = pair("# TYPE c_total counter\n", '# TYPE c_total counter\nc_total{k="1"} 4\n')
    assert p.delta(one(p, "c_total", k="1")) == 4


def test_a_counter_that_fell_is_a_reset_and_an_error():
    p = pair("# TYPE c counter\nc 100\n", "# TYPE c counter\nc 30\n")
    with pytest.raises(PairingError, match="c fell from 100 to 30 between the scrapes"):
        p.delta(one(p, "c"))


def test_a_series_missing_from_before_is_an_error_unless_its_family_is_created_lazily():
    p = pair("other_total 1\n", "c_total 7\nother_total 1\n")
    with pytest.raises(PairingError, match="c_total is in the after scrape only"):
        p.delta(one(p, "c_total"))
    p.same_engine = True  # before shares the engine's other series: a family made on first use
    assert p.delta(one(p, "c_total"), lazy=True) == 7
    p.same_engine = False  # an empty or foreign before proves nothing
    with pytest.raises(PairingError):
        p.delta(one(p, "c_total"), lazy=True)


def test_labels_added_by_a_scraper_cannot_be_paired():
    p = pair('c_total{k="1"} 5\n', 'c_total{instance="h:1",k="1"} 5\n')
    with pytest.raises(PairingError, match=r"its labels \(instance,k\) are not the before "
                                           r"scrape's \(k\)"):
        p.delta(p.after.samples[0])


def test_a_family_whose_type_changed_cannot_be_subtracted():
    p = pair("# TYPE x counter\nx 10\n", "# TYPE x gauge\nx 14\n")
    with pytest.raises(PairingError, match="TYPE counter in the before scrape, gauge in the after"):
        p.delta(one(p, "x"))
    # "untyped" in 0.0.4 is "unknown" in OpenMetrics, and an undeclared TYPE is either.
    p = pair("# TYPE y untyped\ny 1\n", "# TYPE y unknown\ny 3\n# EOF\n")
    assert p.delta(one(p, "y")) == 2
    p = pair("x 1\n", "# TYPE x gauge\nx 3\n")
    assert p.delta(one(p, "x")) == 2


@pytest.mark.parametrize("after", [
    "# TYPE c counter\nc_total 9\nc_created 1.7e9\n# EOF\n",  # OpenMetrics
    "# TYPE c counter\nc_total 9\n# EOF\n",
    "c_total 9\n",
])
def test_names_pair_across_formats_and_colon_spellings(after):
    before = parse_metrics("# TYPE c_total counter\nc_total 5\n")
    p = Pairing(before, parse_metrics(after))
    assert p.delta(p.after.samples[0]) == 4
    assert canonical("vllm:prompt_tokens_total") == canonical("vllm_prompt_tokens") == \
        "vllm_prompt_tokens"


def test_a_series_created_anew_is_a_reset_even_when_its_value_rose():
    before = parse_metrics("# TYPE c counter\nc_total 5\nc_created 1700000000\n# EOF\n")
    after = parse_metrics("# TYPE c counter\nc_total 9\nc_created 1700000500\n# EOF\n")
    p = Pairing(before, after)
    with pytest.raises(PairingError, match="was created anew"):
        p.delta(p.after.samples[0])


@pytest.mark.parametrize("text, when", [("c_total NaN\n", "after"), ("c_total +Inf\n", "after"),
                                        ("c_total -3\n", "after")])
def test_values_that_are_not_counts_are_refused(text, when):
    p = pair("c_total 1\n", text)
    with pytest.raises(PairingError, match=f"in the {when} scrape: not a count"):
        p.delta(p.after.samples[0])
    p = pair(text, "c_total 1\n")
    with pytest.raises(PairingError, match="in the before scrape: not a count"):
        p.delta(p.after.samples[0])


def test_the_engine_start_time_decides_a_restart():
    before = "process_start_time_seconds 1000\nc_total 50\n"
    restarted = "process_start_time_seconds 2000\nc_total 20\n"
    p = pair(before, restarted)
    with pytest.raises(PairingError, match="process_start_time_seconds 1000 -> 2000"):
        p.delta(one(p, "c_total"))
    assert pair(before, restarted, restart_expected=True).delta(one(p, "c_total")) == 20
    p = pair(before, "process_start_time_seconds 1000\nc_total 60\n", restart_expected=True)
    with pytest.raises(PairingError, match="does not show one"):
        p.delta(one(p, "c_total"))


def test_without_a_before_scrape_the_totals_are_read():
    p = Pairing(None, parse_metrics("c_total 7\n"))
    assert p.delta(p.after.samples[0]) == 7
