"""gates.proof.controls: the chain's physics row and its memory controls, row by row.

Each row is pinned whole (kind, value, expected, agreement, flags, note): these rows decide
whether memory is ruled out, and the mutation run (docs/testing.md) found them judged only
through whole chains, where a changed bound or a lost flag went unseen.
"""

import pytest

from gates.proof import CacheDrop
from gates.proof.controls import cache_drop_row, restore_physics, working_set
from gates.proof.evidence import Agreement, Kind

GB = 1e9
GiB = 1024**3
PHYSICS = "KV bytes ÷ probe time (lower bound of the restore rate)"
WORKING_SET = "Probe KV working set vs memory"
LARGER = "larger than memory, or the bytes provably read from the devices"


# ---- physics: KV bytes over the probe's time against the slower of G1's bandwidth and the link

def test_a_rate_within_the_slower_bound_and_its_slack_agrees():
    row = restore_physics(10 * GB, 4.0, restore_bw=2.4 * GB, link_bw=12.5 * GB)
    assert row.kind is Kind.PHYSICS and row.signal == PHYSICS
    assert row.value == 2.5 and row.unit == "GB/s"  # GB of 10^9 bytes, exactly
    assert row.agreement is Agreement.AGREES and row.note == ""
    assert row.expected == "≤ 2.64 GB/s (G1 KV-restore bandwidth 2.4 GB/s + 10%)"


def test_the_link_bounds_the_rate_where_it_is_the_slower():
    row = restore_physics(10 * GB, 4.0, restore_bw=12.5 * GB, link_bw=2.4 * GB)
    assert row.expected == "≤ 2.64 GB/s (link 2.4 GB/s + 10%)"
    assert row.agreement is Agreement.AGREES


@pytest.mark.parametrize(("restore", "link", "expected"), [
    (1.25 * GB, None, "≤ 1.38 GB/s (G1 KV-restore bandwidth 1.25 GB/s + 10%)"),
    (None, 2.375 * GB, "≤ 2.61 GB/s (link 2.38 GB/s + 10%)")])
def test_the_bounds_are_shown_in_gb_per_second_to_three_figures(restore, link, expected):
    # 1.25 GB/s + 10 % (1.375) and 2.375 GB/s sit on the rounding edge: divided by exactly
    # 10^9 they round up, by any divisor a hair larger they would round down.
    assert restore_physics(GB, 1.0, restore_bw=restore, link_bw=link).expected == expected


@pytest.mark.parametrize(("rate", "said"), [(2.64, Agreement.AGREES),
                                            (2.6401, Agreement.DISAGREES)])
def test_the_slack_is_ten_percent_and_its_edge_still_agrees(rate, said):
    assert restore_physics(rate * GB, 1.0, restore_bw=2.4 * GB, link_bw=None).agreement is said


def test_a_rate_above_what_the_storage_delivers_disagrees_and_says_where_it_came_from():
    row = restore_physics(114 * GB, 2.0, restore_bw=8.12 * GB, link_bw=None)
    assert row.agreement is Agreement.DISAGREES and row.value == 57.0
    assert row.note == ("faster than the storage can deliver: the KV came from somewhere else "
                        "(memory, another tier)")
    assert row.expected == "≤ 8.93 GB/s (G1 KV-restore bandwidth 8.12 GB/s + 10%)"


@pytest.mark.parametrize(("restore", "link"), [(None, None), (0.0, None), (None, 0.0)])
def test_no_bound_to_hold_it_against_shows_the_rate_and_judges_nothing(restore, link):
    row = restore_physics(5 * GB, 2.0, restore_bw=restore, link_bw=link)
    assert row.value == 2.5 and row.unit == "GB/s"
    assert row.agreement is Agreement.ABSENT and row.expected == ""
    assert row.note == "no G1 KV-restore bandwidth or link ceiling to hold it against"


@pytest.mark.parametrize(("kv", "seconds"), [(0, 2.0), (5 * GB, 0.0), (5 * GB, -1.0)])
def test_no_bytes_or_no_time_is_no_rate(kv, seconds):
    row = restore_physics(kv, seconds, restore_bw=2 * GB, link_bw=None)
    assert row.kind is Kind.PHYSICS and row.signal == PHYSICS
    assert row.value is None and row.agreement is Agreement.ABSENT
    assert row.note == "no KV bytes or probe time measured"


# ---- the working set: could memory, or the engine's CPU tier, have served the probe?

def dropped(verified=True) -> CacheDrop:
    return CacheDrop(how="fadvise", files=4, bytes=4 * GiB, resident_before=4 * GiB,
                     resident_after=0 if verified else 2 * GiB)


def test_a_cpu_tier_holding_the_working_set_voids_the_probe_whatever_else_shows():
    row = working_set(GiB, memory_bytes=GiB // 2, cpu_tier_bytes=GiB, page_cache=dropped(),
                      devices_agree=True)
    assert row.kind is Kind.CONTROL and row.signal == WORKING_SET
    assert row.agreement is Agreement.INCONCLUSIVE and row.voids_probe
    assert not row.rules_out_memory and row.value == GiB and row.unit == "bytes"
    assert row.expected == "CPU tier off or smaller than the working set"
    assert row.note == ("the engine's CPU tier (1 GiB) can hold the whole working set (1 GiB): "
                        "turn it off or make it smaller than the working set, or enlarge the "
                        "workload")


def test_a_cpu_tier_one_byte_short_of_the_working_set_does_not_void_it():
    row = working_set(GiB, memory_bytes=GiB // 2, cpu_tier_bytes=GiB - 1, page_cache=None,
                      devices_agree=False)
    assert not row.voids_probe and row.rules_out_memory
    assert row.kind is Kind.CONTROL and row.value == GiB and row.unit == "bytes"
    assert row.agreement is Agreement.AGREES and row.expected == LARGER
    assert row.note == "more than the host's 512 MiB of memory"


def test_a_working_set_equal_to_memory_is_not_larger_than_it():
    row = working_set(GiB, memory_bytes=GiB, cpu_tier_bytes=None, page_cache=None,
                      devices_agree=False)
    assert row.agreement is Agreement.INCONCLUSIVE and not row.rules_out_memory


def test_devices_that_carried_the_reads_rule_memory_out_where_the_set_fits():
    row = working_set(GiB, memory_bytes=8 * GiB, cpu_tier_bytes=0, page_cache=None,
                      devices_agree=True)
    assert row.agreement is Agreement.AGREES and row.rules_out_memory and not row.voids_probe
    assert row.expected == LARGER and row.value == GiB and row.unit == "bytes"
    assert row.note == ("fits in memory (8 GiB), but the devices' own read counters carried "
                        "the engine's reads")


def test_a_verified_drop_rules_memory_out_and_says_mincore_verified_it():
    row = working_set(GiB, memory_bytes=8 * GiB, cpu_tier_bytes=None, page_cache=dropped(),
                      devices_agree=False)
    assert row.agreement is Agreement.AGREES and row.rules_out_memory
    assert row.note == ("fits in memory (8 GiB), but the page cache of the KV files was "
                        "dropped before each probe, verified by mincore")


def test_with_memory_unknown_the_reason_stands_alone():
    row = working_set(GiB, memory_bytes=None, cpu_tier_bytes=None, page_cache=dropped(),
                      devices_agree=False)
    assert row.rules_out_memory and row.note == ("the page cache of the KV files was dropped "
                                                 "before each probe, verified by mincore")


def test_an_unverified_drop_holds_memory_open_and_names_the_bytes_that_stayed():
    drop = dropped(verified=False)
    row = working_set(GiB, memory_bytes=8 * GiB, cpu_tier_bytes=None, page_cache=drop,
                      devices_agree=False)
    assert row.agreement is Agreement.INCONCLUSIVE and not row.rules_out_memory
    assert row.expected == LARGER and row.value == GiB and row.unit == "bytes"
    assert row.note == ("the working set (1 GiB) fits in the host's 8 GiB of memory and nothing "
                        "shows it was read from the devices: name the KV devices in [topology] "
                        "devices, or drop the page cache before each probe (root), or enlarge "
                        f"the workload; the page-cache drop does not count: {drop.failure()}")
    assert "2,147,483,648 of 4,294,967,296 bytes" in row.note


def test_no_drop_and_no_devices_with_memory_unknown_judges_nothing():
    row = working_set(GiB, memory_bytes=None, cpu_tier_bytes=None, page_cache=None,
                      devices_agree=False)
    assert row.agreement is Agreement.ABSENT and not row.rules_out_memory
    assert row.expected == LARGER and row.note == "the host's memory is not known"
    assert row.kind is Kind.CONTROL and row.value == GiB and row.unit == "bytes"
    unverified = working_set(GiB, memory_bytes=None, cpu_tier_bytes=None,
                             page_cache=dropped(verified=False), devices_agree=False)
    assert unverified.note.startswith("the host's memory is not known; the page-cache drop "
                                      "does not count: the drop did not take effect")


# ---- the page-cache drop's own row

def test_no_drop_has_no_row():
    assert cache_drop_row(None) == []


def test_a_verified_drop_agrees_showing_what_stayed_against_what_may():
    drop = CacheDrop(how="fadvise", files=2, bytes=1_000_000, resident_before=1_000_000,
                     resident_after=10_000)
    [row] = cache_drop_row(drop)
    assert row.kind is Kind.CONTROL and row.signal == "page cache of the KV files after the drop"
    assert row.value == 10_000 and row.unit == "bytes resident"
    assert row.expected == "≤ 10,000 (1% of 1,000,000 bytes)"
    assert row.agreement is Agreement.AGREES
    assert row.note == ("resident (mincore): 1,000,000 before the drop, 10,000 after, of "
                        "1,000,000 bytes in 2 KV files")


def test_a_drop_that_left_pages_is_absent_evidence_naming_why():
    drop = CacheDrop(how="fadvise", files=2, bytes=1_000_000, resident_before=1_000_000,
                     resident_after=10_001)
    [row] = cache_drop_row(drop)
    assert row.agreement is Agreement.ABSENT and row.value == 10_001
    assert row.note == f"{drop.residency()}; {drop.failure()}"
    assert "the drop did not take effect: 10,001 of 1,000,000 bytes" in row.note
