"""The fio JSON parser and its arithmetic, on real fio-3.33 output (tests/data/fio/README.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.storage import FioParseError, parse_fio_json
from gates.storage.fio import (
    ALL_CLIENTS,
    FioReport,
    Latency,
    combine,
    merge_bins,
    percentile_from_bins,
    samples_support,
)

DATA = Path(__file__).parent / "data" / "fio"


def load(name: str) -> FioReport:
    return parse_fio_json((DATA / name).read_text())


def raw(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def union_percentile(bins: dict[str, int], p: float) -> float:
    """The p-th percentile of the samples themselves: sort every sample, take rank ceil(pN)."""
    samples = sorted(int(v) for v, count in bins.items() for _ in range(count))
    rank = max(1, math.ceil(p / 100 * len(samples)))
    return float(samples[rank - 1])


# ---- single-job outputs -----------------------------------------------------------------

def test_seqread_figures():
    report = load("seqread_1m.json")
    assert report.fio_version == "fio-3.33"
    (job,) = report.jobs
    assert job.jobname == "seqread" and job.error == 0
    assert job.read.bw_bytes == 1518897010
    assert job.read.iops == pytest.approx(1448.533068)
    assert job.read.clat_ns.N == 2913
    assert job.job_options["bs"] == "1M"
    # json+ gives both fio's table and the bins; our percentile from bins equals fio's.
    table = raw("seqread_1m.json")["jobs"][0]["read"]["clat_ns"]["percentile"]
    assert job.read.clat_ns.percentile_ns(99) == table["99.000000"]
    assert job.read.clat_ns.percentile_ns(50) == table["50.000000"]
    assert job.write.bw_bytes == 0 and job.write.clat_ns.N == 0


def test_seqwrite_figures():
    (job,) = load("seqwrite_1m.json").jobs
    assert job.jobname == "seqwrite"
    assert job.write.bw_bytes == 4573319988
    assert job.write.clat_ns.N == 8736
    table = raw("seqwrite_1m.json")["jobs"][0]["write"]["clat_ns"]["percentile"]
    assert job.write.clat_ns.percentile_ns(99.9) == table["99.900000"]
    assert job.read.bw_bytes == 0 and job.read.clat_ns.percentile_ns(99) is None


def test_randread_qd1_figures():
    (job,) = load("randread_4k_qd1.json").jobs
    clat = job.read.clat_ns
    assert job.read.iops == pytest.approx(18998.001)
    assert clat.N == 38015 == sum(clat.bins.values())
    assert len(clat.bins) > 10
    for key, value in clat.percentile.items():
        assert clat.percentile_ns(float(key)) == value, key


def test_note_line_before_json_is_skipped():
    text = (DATA / "stdout_note.txt").read_text()
    assert text.startswith("note: both iodepth")
    (job,) = parse_fio_json(text).jobs
    assert job.jobname == "note"
    assert job.read.iops > 0
    # plain json: no bins, so the percentile comes from fio's own table
    assert job.read.clat_ns.bins is None
    assert job.read.clat_ns.percentile_ns(99) == job.read.clat_ns.percentile["99.000000"]


def test_pid_error_line_before_json_is_skipped():
    text = (DATA / "job_error_stdout.txt").read_text()
    assert text.startswith("fio: pid=")
    assert parse_fio_json(text).jobs[0].error == 28


def test_note_with_braces_before_json():
    text = "note: odd {brace} in a note\n" + (DATA / "seqread_1m.json").read_text()
    assert parse_fio_json(text).jobs[0].read.bw_bytes == 1518897010


def test_zero_samples_direction_has_no_percentile():
    (job,) = load("zero_samples.json").jobs
    assert job.read.clat_ns.N == 19097
    write = job.write.clat_ns
    assert write.N == 0 and write.percentile is None and write.bins is None
    assert write.percentile_ns(99) is None
    assert write.percentile_ns(50) is None


def test_zero_samples_after_ramp():
    (job,) = load("zero_samples_ramp.json").jobs
    assert job.read.bw_bytes > 0 and job.read.iops > 0
    assert job.read.clat_ns.N == 0
    assert job.read.clat_ns.percentile_ns(99) is None
    assert combine([job], "read").clat_ns.percentile_ns(99) is None


def test_job_error_surfaces():
    report = load("job_error.json")
    (job,) = report.jobs
    assert job.error == 28
    assert job.write.io_bytes == 8388608
    assert job.write.clat_ns.N == 8
    assert report.disk_util == []


# ---- steady state -----------------------------------------------------------------------

def test_steadystate_attained():
    (job,) = load("steadystate_attained.json").jobs
    ss = job.steadystate
    assert ss is not None and ss.attained is True
    assert ss.ss == "iops:20.000000%"
    assert ss.duration == 5
    assert ss.data.bw == [10830037205, 10820328168, 10835460096, 10300763483, 10384375808]
    assert ss.data.iops == [165253, 165105, 165336, 157177, 158453]
    assert ss.data.bw_mean == 10634192952
    assert job.job_runtime == 6893  # stopped early once steady


def test_steadystate_not_attained():
    (job,) = load("steadystate_not_attained.json").jobs
    ss = job.steadystate
    assert ss is not None and ss.attained is False
    assert ss.ss == "bw_slope:0.001000%"
    assert ss.criterion == "-0.621712%"
    assert ss.slope == pytest.approx(-64233860.6)
    assert len(ss.data.bw) == 5 and all(v > 0 for v in ss.data.bw)
    assert job.job_runtime == 8000


def test_no_steadystate_block_without_ss():
    assert load("seqread_1m.json").jobs[0].steadystate is None


# ---- several jobs -----------------------------------------------------------------------

def test_qd_sweep_job_names_and_groups():
    report = load("qd_sweep.json")
    assert [j.jobname for j in report.jobs] == [
        "randread-qd1", "randread-qd4", "randread-qd16", "randread-qd32"]
    assert [j.groupid for j in report.jobs] == [0, 1, 2, 3]
    assert [j.job_options for j in report.jobs] == [{"iodepth": str(q)} for q in (1, 4, 16, 32)]
    iops = [report.named(f"randread-qd{q}")[0].read.iops for q in (1, 4, 16, 32)]
    assert iops == sorted(iops)


def test_kvrestore_same_name_entries_combine():
    report = load("kvrestore.json")
    entries = report.named("kvrestore")
    assert len(entries) == 4
    assert all(e.job_options == {} for e in entries)  # no "job options" key at all
    total = combine(entries, "read")
    assert total.bw_bytes == 344595682 + 355280990 + 343025174 + 339229779
    assert total.iops == pytest.approx(sum(e.read.iops for e in entries))
    assert total.io_bytes == sum(e.read.io_bytes for e in entries)
    assert total.clat_ns.N == 2633 + 2716 + 2621 + 2592
    assert sum(total.clat_ns.bins.values()) == total.clat_ns.N
    assert total.clat_ns.mean == pytest.approx(
        sum(e.read.clat_ns.mean * e.read.clat_ns.N for e in entries) / total.clat_ns.N)
    assert total.clat_ns.min == min(e.read.clat_ns.min for e in entries)
    assert total.clat_ns.max == max(e.read.clat_ns.max for e in entries)
    # pooled percentile = percentile over every sample of the four jobs
    assert total.clat_ns.percentile_ns(99) == union_percentile(total.clat_ns.bins, 99)


def test_combine_of_nothing_is_zero():
    empty = combine([], "read")
    assert empty.bw_bytes == 0 and empty.clat_ns.N == 0
    assert empty.clat_ns.percentile_ns(99) is None


# ---- client/server ----------------------------------------------------------------------

def test_client_server_single_host():
    report = load("client_server.json")
    assert report.jobs == []
    (entry,) = report.entries()
    assert (entry.jobname, entry.hostname, entry.port) == ("cs-randread", "127.0.0.1", 8765)
    assert report.hosts() == ["127.0.0.1"]
    assert [d.hostname for d in report.disk_util] == ["127.0.0.1"]


def test_client_server_two_excludes_all_clients():
    report = load("client_server_two.json")
    assert [j.jobname for j in report.client_stats] == ["cs-randread", "cs-randread",
                                                         ALL_CLIENTS]
    entries = report.entries()
    assert [(e.jobname, e.port) for e in entries] == [("cs-randread", 8765),
                                                       ("cs-randread", 8766)]
    assert report.named(ALL_CLIENTS) == []
    # both servers listen on the same address: one host, two ports
    assert report.hosts() == ["127.0.0.1"]
    assert len(report.disk_util) == 2
    fleet = combine(report.named("cs-randread"), "read")
    everyone = report.client_stats[-1]
    assert fleet.bw_bytes == 129162170 + 129395526
    assert fleet.bw_bytes == pytest.approx(everyone.read.bw_bytes, abs=1)  # fio rounds its sum
    assert fleet.clat_ns.N == 63099 + 63213 == everyone.read.clat_ns.N
    # fio's own sum has no latency distribution, which is why we pool the bins ourselves
    assert everyone.read.clat_ns.bins is None and everyone.read.clat_ns.percentile is None


@pytest.mark.parametrize("p", [50, 90, 99, 99.9])
def test_fleet_percentile_from_merged_bins(p):
    a, b = load("client_server_two.json").entries()
    fleet = combine([a, b], "read").clat_ns
    assert fleet.bins == merge_bins([a.read.clat_ns, b.read.clat_ns])
    # by hand: pool every sample of both clients, sort, and take the ceil(p N)-th
    union: dict[str, int] = dict(a.read.clat_ns.bins)
    for value, count in b.read.clat_ns.bins.items():
        union[value] = union.get(value, 0) + count
    expected = union_percentile(union, p)
    assert fleet.percentile_ns(p) == expected
    low, high = sorted((a.read.clat_ns.percentile_ns(p), b.read.clat_ns.percentile_ns(p)))
    assert low <= expected <= high


# ---- percentile arithmetic --------------------------------------------------------------

BINS = {"100": 50, "200": 40, "300": 10}


@pytest.mark.parametrize(("p", "expected"), [
    (0, 100.0), (1, 100.0), (50, 100.0), (50.1, 200.0), (90, 200.0), (90.5, 300.0),
    (99, 300.0), (100, 300.0)])
def test_percentile_from_hand_made_bins(p, expected):
    assert percentile_from_bins(BINS, p) == expected


def test_percentile_from_bins_edge_cases():
    assert percentile_from_bins({}, 99) is None
    assert percentile_from_bins({"5": 0}, 99) is None
    assert percentile_from_bins({"5": 0, "7": 1}, 1) == 7.0
    # buckets sort by value, not as strings ("1000" < "900" as text)
    assert percentile_from_bins({"1000": 1, "900": 1}, 50) == 900.0
    assert percentile_from_bins({"42": 1}, 99.99) == 42.0


def test_percentile_prefers_bins_over_table():
    block = Latency(N=2, bins={"10": 1, "20": 1}, percentile={"50.000000": 999})
    assert block.percentile_ns(50) == 10.0
    assert Latency(N=2, percentile={"50.000000": 999}).percentile_ns(50) == 999
    assert Latency(N=2, percentile={"50.000000": 999}).percentile_ns(99) is None


@pytest.mark.parametrize(("n", "p", "ok"), [
    (1000, 99, True), (999, 99, False), (10000, 99.9, True), (9999, 99.9, False),
    (100_000, 99.99, True), (99_999, 99.99, False), (20, 50, True), (19, 50, False),
    (10, 0, True), (9, 0, False), (0, 99, False), (10**9, 100, False), (10**9, -1, False)])
def test_samples_support(n, p, ok):
    assert samples_support(n, p) is ok


# ---- what is not fio's JSON -------------------------------------------------------------

@pytest.mark.parametrize(("text", "says"), [
    ("", "empty"),
    ("fio: engine libaio not loadable\n", "no JSON object"),
    ("{not json at all", "not valid JSON"),
    ('{"jobs": [}', "not valid JSON"),
    ('note\n["jobs"]', "no JSON object"),
    ('{"fio version": "fio-3.33"}', "neither 'jobs' nor 'client_stats'"),
    ('{"jobs": [], "client_stats": []}', "neither"),
    ('{"jobs": [{"groupid": 0}]}', "jobs.0.jobname"),
    ('{"jobs": {"jobname": "x"}}', "jobs"),
    ('{"jobs": [{"jobname": "x", "read": {"bw_bytes": NaN}}]}', "finite"),
    ('{"jobs": [{"jobname": "x", "read": {"clat_ns": {"bins": {"fast": 3}}}}]}', "bins"),
    ('{"jobs": [{"jobname": "x", "read": {"clat_ns": {"N": -1}}}]}', "clat_ns.N"),
    ('{"jobs": [{"jobname": "x", "read": {"io_bytes": 1' + "0" * 30 + '}}]}', "io_bytes"),
    ('{"jobs": [{"jobname": "x"}], "huge": 1' + "0" * 5000 + "}", "not usable JSON"),
    ('{"deep": ' + "[" * 100_000, "not usable JSON"),
])
def test_not_fio_json(text, says):
    with pytest.raises(FioParseError, match=None) as caught:
        parse_fio_json(text)
    assert says in str(caught.value)


def test_json_array_is_not_fio_json():
    with pytest.raises(FioParseError):
        parse_fio_json("[1, 2, {}]")
    with pytest.raises(FioParseError, match="no JSON object"):
        parse_fio_json("[1, 2, 3]")


def test_trailing_text_after_json_is_ignored():
    text = (DATA / "seqread_1m.json").read_text() + "\nfio: trailing noise\n"
    assert parse_fio_json(text).jobs[0].jobname == "seqread"


def _usable(report: FioReport) -> None:
    """What the G1 rules do with a parsed report must not raise either."""
    report.hosts()
    for entry in report.entries():
        for direction in ("read", "write"):
            clat = combine(report.named(entry.jobname), direction).clat_ns
            clat.percentile_ns(99)
            clat.percentile_ns(50)


def _parses_or_says_why(text: str) -> None:
    try:
        report = parse_fio_json(text)
    except FioParseError:
        return
    try:
        _usable(report)
    except Exception as e:  # anything but a FioParseError is a parser bug, named
        pytest.fail(f"a parsed report broke a G1 rule: {type(e).__name__}: {e}")


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_only_raises_fio_parse_error(text):
    _parses_or_says_why(text)


@settings(max_examples=200, deadline=None)
@given(st.binary().map(lambda b: b.decode("utf-8", errors="replace")))
def test_arbitrary_bytes_only_raise_fio_parse_error(text):
    _parses_or_says_why(text)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)

# fio's own key names, so generated documents get past the first checks and into the models
FIO_KEYS = st.sampled_from([
    "jobs", "client_stats", "jobname", "read", "write", "clat_ns", "lat_ns", "bins",
    "percentile", "N", "min", "max", "mean", "bw_bytes", "iops", "io_bytes", "runtime",
    "error", "hostname", "port", "steadystate", "attained", "data", "bw", "job options",
    "disk_util", "name", "fio version", "99.000000", "50.000000", "100", "2048"])
FIO_SHAPED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.just("All clients") | st.just("cs-randread"),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(FIO_KEYS, children, max_size=5),
    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5))
def test_arbitrary_json_objects_only_raise_fio_parse_error(document):
    _parses_or_says_why(json.dumps(document))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(FIO_KEYS, FIO_SHAPED, max_size=5))
def test_fio_shaped_json_only_raises_fio_parse_error(document):
    _parses_or_says_why(json.dumps(document))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries(
    {"jobname": st.sampled_from(["a", "b", ALL_CLIENTS]),
     "read": st.fixed_dictionaries({"clat_ns": st.fixed_dictionaries({
         "N": st.integers(min_value=-5, max_value=2**65),
         "bins": st.dictionaries(st.integers(-3, 2**65).map(str),
                                 st.integers(-3, 2**65), max_size=5)})})}),
    min_size=1, max_size=4))
def test_job_entries_with_odd_numbers(jobs):
    _parses_or_says_why(json.dumps({"client_stats": jobs}))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 10**6).map(str), st.integers(0, 50), min_size=1),
       st.floats(0, 100))
def test_percentile_from_bins_is_a_bucket_with_enough_below(bins, p):
    value = percentile_from_bins(bins, p)
    total = sum(bins.values())
    if not total:
        assert value is None
        return
    assert str(int(value)) in bins
    at_or_below = sum(c for k, c in bins.items() if int(k) <= value)
    assert at_or_below >= p / 100 * total or value == max(int(k) for k, c in bins.items() if c)
