"""kvgate compare (gates.report.compare) on chains of records in a real store.

The records are written as a session writes them (tests/_chain.py); what compare reads of them
is G3's gains with their intervals and levels, each run's own citations, and the catalogue.
tests/test_g3_e2e_tiers.py compares two G3 runs of simulated tiers (fast and slow) that really
ran, on one G2; test_compare_page the comparison's folder and `kvgate verify` of it.
"""

import json
import subprocess
import sys

import pytest
from _chain import PASSING, SIMULATED, add_gate, m, open_run

from gates.commands.compare import text_lines
from gates.core.verdicts import Limit
from gates.model import SHIPPED_CATALOG, load_catalog
from gates.report import CompareError, compare
from gates.store import Store

MISS = 0.0223  # the shipped plan's risk over its looks, per side


def gains(ttft, thr, half=4.0, miss=MISS):
    """G3's gains at concurrency 8 and 16, each with its interval and how often it may miss."""
    out = []
    for id, point, lim in (("g3.ttft_p50_reduction", ttft, 25), ("g3.throughput_gain", thr, 29)):
        for at in (8, 16):
            g = m(id, point, Limit.at_least(lim, "%"), at)
            out.append(g.model_copy(update={"interval": (point - half, point + half),
                                            "interval_miss": miss}))
    return out + [x for x in PASSING["g3"] if not x.id.startswith(("g3.ttft", "g3.through"))]


def chain(store, run_id, g3, workload="w1", deviations=()):
    """A run's G1 -> G4, each citing the one before; G3 with the given gains."""
    open_run(store, run_id)
    cites = None
    for gate in ("g1", "g2", "g3", "g4"):
        extra = {"facts": {"workload_hash": workload},
                 "deviations": list(deviations)} if gate == "g3" else {}
        cites = add_gate(store, run_id, gate, g3 if gate == "g3" else None, cites, **extra)


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path) as s:
        yield s


def test_the_faster_tier_ranks_first_with_its_price_per_point(store):
    chain(store, "run-fast", gains(60.0, 45.0))
    chain(store, "run-slow", gains(30.0, 31.0))
    c = compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")],
                load_catalog(SHIPPED_CATALOG))
    ttft8 = next(r for r in c.rankings if (r.id, r.at) == ("g3.ttft_p50_reduction", 8))
    assert [(x.name, x.rank) for x in ttft8.ranked] == [("FX300", 1), ("FX100", 2)]
    assert ttft8.lines[0].startswith("1. FX300: 60.0 % [56.0, 64.0]") and "ahead of FX100" in \
        ttft8.lines[0]
    fast = next(col for col in c.columns if col.array == "FX300")
    assert fast.price == 924_000 and fast.price_per_point[8].point == pytest.approx(924_000 / 60)
    assert fast.price_per_point[8].high == pytest.approx(924_000 / 56)
    assert fast.verdicts == {"g1": "PASS", "g2": "PASS", "g3": "PASS", "g4": "PASS"}
    assert c.differences == [] and "at most 4.46 %" in c.risk
    assert any("price per point of TTFT p50 reduction @ 8: ¥15,400" in x for x in text_lines(c))


def test_two_equal_tiers_are_not_distinguishable(store):
    chain(store, "run-a", gains(40.0, 35.0))
    chain(store, "run-b", gains(41.0, 34.0))
    c = compare(store, [("run-a", "A"), ("run-b", "B")])
    for r in c.rankings:
        assert [x.rank for x in r.ranked] == [1, 1]
        assert all("not distinguishable from" in line for line in r.lines)
    assert all(col.price_note == "no price: no catalogue given" for col in c.columns)


def test_different_workloads_are_named_and_not_ranked(store):
    chain(store, "run-a", gains(60.0, 45.0), workload="w1")
    chain(store, "run-b", gains(30.0, 31.0), workload="w2")
    c = compare(store, [("run-a", "A"), ("run-b", "B")])
    assert c.rankings == [] and c.differences == ["different workload hash (A: w1, B: w2)"]
    assert c.risk == "No ranking: different workload hash (A: w1, B: w2)."


def test_a_record_without_interval_misses_is_unranked_with_the_reason(store):
    chain(store, "run-a", gains(60.0, 45.0))
    chain(store, "run-old", [g.model_copy(update={"interval_miss": None})
                             for g in gains(30.0, 31.0)])
    c = compare(store, [("run-a", "A"), ("run-old", "old")])
    r = next(r for r in c.rankings if (r.id, r.at) == ("g3.ttft_p50_reduction", 8))
    assert [x.name for x in r.ranked] == ["A"]
    assert r.lines[0].startswith("only candidate with an interval: A: 60.0 %")
    assert r.unranked == ["old: its record does not say how often its interval may miss "
                          "(written before kvgate stated it)"]


def test_a_candidate_without_g3_is_unranked_and_does_not_stop_the_others(store):
    chain(store, "run-a", gains(60.0, 45.0))
    chain(store, "run-b", gains(30.0, 31.0))
    open_run(store, "run-g1")
    add_gate(store, "run-g1", "g1")
    c = compare(store, [("run-a", "A"), ("run-b", "B"), ("run-g1", "C")])
    assert c.differences == []
    r = c.rankings[0]
    assert [x.name for x in r.ranked] == ["A", "B"] and r.unranked == ["C: no G3 record"]


def test_a_simulated_chain_is_not_ranked_beside_a_real_one(store):
    chain(store, "run-a", gains(60.0, 45.0))
    chain(store, "run-sim", gains(30.0, 31.0), deviations=SIMULATED)
    c = compare(store, [("run-a", "A"), ("run-sim", "S")])
    assert c.rankings == []
    assert c.differences == ["different engine kind (simulated or real) (A: real, S: simulated)"]


def test_an_unreadable_record_is_refused_naming_the_run_and_gate(store):
    chain(store, "run-a", gains(60.0, 45.0))
    chain(store, "run-b", gains(30.0, 31.0))
    store.db.execute("UPDATE gate_records SET body = '{\"gate\": 1}' WHERE run_id = 'run-b' "
                      "AND gate = 'g4'")
    with pytest.raises(CompareError, match="run run-b's G4 record .* cannot be read"):
        compare(store, [("run-a", "A"), ("run-b", "B")])


def test_a_chain_is_followed_by_its_citations_not_by_the_latest_of_the_site(store):
    # Both candidates are one site: run-b has G4 only, citing run-a's G3 chain.
    chain(store, "run-a", gains(60.0, 45.0))
    cited = store.record("run-a", "g3")
    open_run(store, "run-b")
    add_gate(store, "run-b", "g4", cites=cited)
    chain(store, "run-c", gains(30.0, 31.0))  # the site's latest G3, not run-b's
    c = compare(store, [("run-b", "B"), ("run-c", "C")])
    b = next(col for col in c.columns if col.array == "B")
    assert b.gains[0].estimate.point in (60.0, 45.0)
    assert any("G4: cites G3 run run-a" in note for note in b.chain)


@pytest.mark.parametrize("runs, says", [
    ([("run-a", "A")], "two or more different runs"),
    ([("run-a", "A"), ("run-a", "B")], "two or more different runs"),
    ([("run-a", "X"), ("run-b", "X")], "two candidates have one name"),
    ([("run-a", "A"), ("nope", "B")], "run nope has no gate record"),
])
def test_what_cannot_be_compared_is_refused_with_the_reason(store, runs, says):
    chain(store, "run-a", gains(60.0, 45.0))
    chain(store, "run-b", gains(30.0, 31.0))
    with pytest.raises(CompareError, match=says):
        compare(store, runs)


def test_the_command_prints_the_ranking_and_writes_its_folder(tmp_path):
    with Store(tmp_path) as store:
        chain(store, "run-fast", gains(60.0, 45.0))
        chain(store, "run-slow", gains(30.0, 31.0))
    done = subprocess.run([sys.executable, "-m", "gates.cli", "compare", "run-slow=FX100",
                           "run-fast=FX300", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1. FX300: 60.0 % [56.0, 64.0]" in done.stdout
    written = sorted(tmp_path.glob("compare-*/comparison.json"))
    assert len(written) == 1 and json.loads(written[0].read_text())["kind"] == "kvgate comparison"
    assert "(unsigned: no signing key is configured)" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "gates.cli", "compare", "run-slow=FX100",
                          "nowhere=FX300", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "run nowhere is not in the store" in bad.stderr
    assert "Traceback" not in bad.stderr
