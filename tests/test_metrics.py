"""gates.loadgen.metrics: DESIGN §5's load metrics on hand-built records, and their invariants."""

import math

import pytest
from conftest import DATA
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gates.core.statistics import percentile
from gates.core.verdicts import RequestOutcome, RequestRecord
from gates.loadgen import stats, summarize, ttft
from gates.loadgen.chunks import classify
from gates.loadgen.metrics import SLO, LoadSummary, Stats, chunk_gaps, e2e, tpot
from gates.loadgen.sse import SSEDecoder

OK, HTTP, TIMEOUT, PROTO, CANCEL = (RequestOutcome.OK, RequestOutcome.HTTP_ERROR,
                                    RequestOutcome.TIMEOUT, RequestOutcome.PROTOCOL_ERROR,
                                    RequestOutcome.CANCELLED)
approx = pytest.approx
_ids = iter(range(10**9))


def rec(times=(0.1,), t0=0.0, out=None, outcome=OK, warmup=False, usage=True, inp=100,
        **kw) -> RequestRecord:
    """A record whose content events came at the given times after t0."""
    times = list(times)
    return RequestRecord(request_id=f"r{next(_ids)}", t0=t0, warmup=warmup,
                         ttft=times[0] if times else None, e2e=times[-1] if times else None,
                         content_times=times, input_tokens=inp,
                         output_tokens=len(times) if out is None else out,
                         tokens_from_usage=usage, outcome=outcome, **kw)


def from_stream(stamped: list[tuple[float, bytes]], t0: float = 0.0) -> RequestRecord:
    """A record built the way the load generator builds one: stamp events, then classify."""
    decoder, times, usage, done = SSEDecoder(), [], None, False
    for at, raw in stamped:
        for event in decoder.feed(raw):
            chunk = classify(event.data)
            times += [at] if chunk.is_content else []
            usage = chunk.usage or usage
            done = done or chunk.kind == "done"
    tokens = usage.completion_tokens if usage else len(times)
    return rec(times, t0=t0, out=tokens, usage=usage is not None,
               outcome=OK if done else PROTO)


# ---- percentile and stats, against hand-computed values -----------------------------------

@pytest.mark.parametrize(("values", "p", "expected"), [
    ([1, 2, 3, 4], 0, 1),
    ([1, 2, 3, 4], 25, 1.75),  # index 0.75: 1 + 0.75 * (2 - 1)
    ([1, 2, 3, 4], 50, 2.5),
    ([1, 2, 3, 4], 90, 3.7),  # index 2.7
    ([1, 2, 3, 4], 99, 3.97),  # index 2.97
    ([1, 2, 3, 4], 100, 4),
    ([4, 1, 3, 2], 50, 2.5),  # order does not matter
    ([5.0], 99, 5.0),
    ([10, 20], 25, 12.5),
    (list(range(1, 11)), 99, 9.91),  # index 0.99 * 9 = 8.91: 9 + 0.91
    (list(range(1, 11)), 90, 9.1),
    ([0.2, 0.1, 0.4, 0.3, 0.5], 50, 0.3),
    ([1, 1, 1, 100], 50, 1),
    ([-3, -1], 50, -2),
])
def test_percentile(values, p, expected):
    assert percentile(values, p) == approx(expected, rel=1e-12)


def test_percentile_edges():
    assert percentile([], 50) is None
    for p in (-1, 100.5, math.nan):
        with pytest.raises(ValueError, match="not between 0 and 100"):
            percentile([1.0], p)
    with pytest.raises(ValueError, match="NaN"):
        percentile([1.0, math.nan], 50)


def test_stats():
    assert stats([]) == Stats(n=0, mean=None, p50=None, p90=None, p99=None)
    assert stats([None, None]) == Stats()
    s = stats([4, None, 1, 3, 2])
    assert (s.n, s.mean, s.p50) == (4, 2.5, 2.5)
    assert (s.p90, s.p99) == (approx(3.7), approx(3.97))
    assert stats([0.1] * 10).mean == 0.1  # not 0.09999999999999999
    with pytest.raises(ValueError, match="NaN"):
        stats([math.nan])


# ---- per-request definitions --------------------------------------------------------------

def test_per_request_metrics():
    r = rec([0.5, 0.6, 0.8, 1.1], t0=3.0)
    assert (ttft(r), e2e(r)) == (0.5, 1.1)
    assert tpot(r) == approx(0.2)  # (1.1 - 0.5) / (4 - 1)
    assert chunk_gaps(r) == approx([0.1, 0.2, 0.3])
    # TPOT divides by tokens, not events: a server may put several tokens in one chunk.
    assert tpot(rec([0.5, 0.6, 0.8, 1.1], out=7)) == approx(0.1)
    assert tpot(rec([0.5], out=1)) is None
    assert tpot(rec([0.5, 0.5], out=2)) == 0.0
    assert tpot(rec([], out=5)) is None


def test_record_fields_first_content_times_as_fallback():
    r = RequestRecord(request_id="x", t0=0, content_times=[0.2, 0.5], output_tokens=2)
    assert (ttft(r), e2e(r), tpot(r)) == (0.2, 0.5, approx(0.3))
    r = RequestRecord(request_id="y", t0=0, ttft=0.25, e2e=0.75, output_tokens=3)
    assert (ttft(r), e2e(r), tpot(r), chunk_gaps(r)) == (0.25, 0.75, 0.25, [])


# ---- summaries: the cases ---------------------------------------------------------

def stamp(name: str, step: float = 0.1) -> list[tuple[float, bytes]]:
    """A sample stream's events, each arriving step seconds after the previous one."""
    *events, rest = (DATA / "sse" / name).read_bytes().split(b"\n\n")
    events = [e + b"\n\n" for e in events] + ([rest] if rest else [])  # rest: cut off
    return [(round(step * (i + 1), 6), e) for i, e in enumerate(events)]


def test_role_only_first_chunk_and_usage_only_final_chunk():
    # role 0.1, five content 0.2..0.6, finish-only 0.7, usage-only 0.8, [DONE] 0.9
    r = from_stream(stamp("openai_chat_usage.sse"))
    assert r.content_times == approx([0.2, 0.3, 0.4, 0.5, 0.6])
    assert (r.output_tokens, r.tokens_from_usage, r.ok) == (5, True, True)
    s = summarize([r], wall=1.0)
    assert s.ttft.mean == approx(0.2)  # the first content event, not the role chunk at 0.1
    assert s.e2e.mean == approx(0.6)  # the last content event, not the usage chunk at 0.8
    assert s.tpot.mean == approx(0.1)  # (0.6 - 0.2) / (5 - 1)
    assert s.inter_chunk.model_dump() == approx(
        {"n": 4, "mean": 0.1, "p50": 0.1, "p90": 0.1, "p99": 0.1})
    assert s.span == approx(0.6)


def test_reasoning_counts_as_content():
    r = from_stream(stamp("vllm_chat_reasoning.sse"))
    assert (r.ttft, r.output_tokens) == (approx(0.2), 12)  # first "reasoning" delta


def test_stream_without_done_and_without_usage():
    r = from_stream(stamp("truncated.sse"))
    assert (r.outcome, r.output_tokens, r.tokens_from_usage) == (PROTO, 3, False)


def test_one_token_outputs():
    one = [rec([0.3], out=1), rec([0.5], out=1)]
    s = summarize([*one, rec([0.1, 0.2, 0.4], out=3)], wall=2.0)
    assert (s.ttft.n, s.e2e.n, s.tpot.n) == (3, 3, 1)  # only the 3-token request has a TPOT
    assert s.ttft.mean == approx(0.3) and s.e2e.mean == approx((0.3 + 0.5 + 0.4) / 3)
    assert s.tpot.mean == approx(0.15)
    assert s.output_tokens == 5 and s.output_throughput_wall == approx(2.5)
    assert s.inter_chunk.n == 2


def test_failed_and_warmup_requests_are_counted_not_timed():
    records = [
        rec([0.1, 0.2], t0=0.0),
        rec([0.3, 0.6], t0=0.0),
        rec([0.05, 0.1, 9.0], t0=0.0, outcome=TIMEOUT),  # streamed, then stalled
        rec([], t0=0.0, outcome=HTTP, status=500, error="boom"),
        rec([0.01], t0=0.0, outcome=PROTO),
        rec([0.02], t0=0.0, outcome=CANCEL),
        rec([0.001, 0.002], t0=-1.0, warmup=True),
        rec([], t0=-1.0, warmup=True, outcome=HTTP),
    ]
    s = summarize(records, wall=10.0)
    assert s.sent == 6 and sum(s.outcomes.values()) == 6
    assert s.outcomes == {OK: 2, HTTP: 1, TIMEOUT: 1, PROTO: 1, CANCEL: 1}
    assert (s.warmup_sent, s.warmup_outcomes[OK], s.warmup_outcomes[HTTP]) == (2, 1, 1)
    assert s.error_rate == approx(4 / 6)
    assert (s.ttft.n, s.ttft.mean, s.e2e.mean) == (2, approx(0.2), approx(0.4))
    assert (s.tpot.mean, s.inter_chunk.n, s.inter_chunk.mean) == (approx(0.2), 2, approx(0.2))
    assert s.output_tokens == 4 and s.input_tokens == 200
    assert s.span == approx(0.6)  # the timeout's content at 9.0 is not a completion


def test_outcome_counts_must_add_up():
    s = summarize([rec(), rec(outcome=TIMEOUT), rec(warmup=True)], wall=1.0)
    assert set(s.outcomes) == set(RequestOutcome) == set(s.warmup_outcomes)
    fields = s.model_dump()
    with pytest.raises(ValidationError, match="do not add up to the 2 requests sent"):
        LoadSummary.model_validate({**fields, "sent": 2, "outcomes": {OK: 1}})
    with pytest.raises(ValidationError, match="warm-up outcome counts"):
        LoadSummary.model_validate({**fields, "warmup_sent": 3})
    assert LoadSummary.model_validate_json(s.model_dump_json()) == s


def test_span_and_wall():
    records = [
        rec([], t0=0.0, outcome=HTTP),  # the first request sent starts the span
        rec([0.5, 2.0], t0=0.5, out=10),  # last content at 2.5
        rec([0.2, 1.0], t0=1.0, out=20),  # last content at 2.0
        rec([0.1], t0=-4.0, warmup=True),  # warm-up moves neither end
    ]
    s = summarize(records, wall=3.0)
    assert (s.span, s.wall, s.output_tokens) == (approx(2.5), 3.0, 30)
    assert s.output_throughput_span == approx(12.0)
    assert s.output_throughput_wall == approx(10.0)
    assert s.request_throughput_span == approx(0.8)
    assert s.request_throughput_wall == approx(2 / 3)


def test_goodput():
    slo = SLO(max_ttft=0.2, max_tpot=0.05)
    records = [
        rec([0.1, 0.14, 0.18], out=3),  # TTFT 0.1, TPOT 0.04: good
        rec([0.3, 0.31], out=2),  # TTFT too slow
        rec([0.1, 0.3], out=2),  # TPOT 0.2: too slow
        rec([0.15], out=1),  # one token: no TPOT to miss, good
        rec([], out=0),  # ok but no content: no TTFT, so not good
        rec([0.1, 0.12], outcome=TIMEOUT, out=2),  # failed: never good
        rec([0.1, 0.11], warmup=True, out=2),  # warm-up: not counted at all
    ]
    s = summarize(records, wall=4.0, slo=slo)
    assert (s.good, s.goodput_fraction, s.goodput) == (2, approx(2 / 6), approx(0.5))
    assert s.ok_without_content == 1
    # TPOT alone: the slow-TTFT request passes, and so does the one without content.
    assert summarize(records, wall=4.0, slo=SLO(max_tpot=0.05)).good == 4
    assert summarize(records, wall=4.0, slo=SLO(max_e2e=0.18)).good == 2
    assert summarize(records, wall=4.0, slo=SLO()).good == 5  # every ok request
    none = summarize(records, wall=4.0)
    assert (none.good, none.goodput_fraction, none.goodput) == (None, None, None)
    with pytest.raises(ValidationError):
        SLO(max_ttft=0)


def test_tokens_counted_from_events_are_flagged():
    records = [rec(usage=True), rec(usage=False), rec(usage=False),
               rec(usage=False, outcome=HTTP), rec(usage=False, warmup=True)]
    s = summarize(records, wall=1.0)
    assert (s.tokens_from_events, s.tokens_estimated) == (2, True)
    assert not summarize([rec()], wall=1.0).tokens_estimated


def test_nothing_to_measure():
    s = summarize([], wall=0.0)
    assert (s.sent, s.error_rate, s.span, s.ttft) == (0, None, None, Stats())
    assert (s.output_throughput_wall, s.request_throughput_span) == (None, None)
    assert summarize([rec(outcome=HTTP)], wall=2.0).output_throughput_wall == 0.0
    for wall in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="wall duration"):
            summarize([], wall=wall)


def test_table_rows():
    s = summarize([rec([0.1, 0.3], out=2), rec(outcome=TIMEOUT)], wall=2.0,
                  slo=SLO(max_ttft=1.0))
    rows = {name: (value, unit) for name, value, unit in s.table_rows()}
    assert rows["requests sent"] == (2, "")
    assert rows["  timeout"] == (1, "") and rows["  ok"] == (1, "")
    assert rows["error rate"] == (50.0, "%")
    assert rows["TTFT p99"] == (approx(0.1), "s")
    assert rows["TPOT (= ITL) mean"] == (approx(0.2), "s")
    assert rows["inter-chunk latency p50"] == (approx(0.2), "s")
    assert rows["E2E latency mean"] == (approx(0.3), "s")
    assert rows["output throughput (wall)"] == (1.0, "tok/s")
    assert rows["goodput"] == (0.5, "req/s") and rows["goodput fraction"] == (50.0, "%")
    assert "goodput" not in {r[0] for r in summarize([rec()], wall=1.0).table_rows()}
    assert s.itl == s.tpot


# ---- properties -----------------------------------------------------------------------------

finite = st.floats(-1e9, 1e9, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40), st.floats(0, 100), st.floats(0, 100))
def test_percentile_is_monotone_and_bounded(values, p, q):
    lo, hi = sorted((p, q))
    a, b = percentile(values, lo), percentile(values, hi)
    assert min(values) <= a <= b <= max(values)


@st.composite
def records(draw) -> RequestRecord:
    """Any valid record, consistent or not: the generator's bugs must not crash a summary."""
    times = sorted(draw(st.lists(st.floats(0, 600), max_size=6)))
    fields = draw(st.fixed_dictionaries({}, optional={
        "ttft": st.none() | st.floats(0, 600), "e2e": st.none() | st.floats(0, 600)}))
    return RequestRecord(
        request_id=f"r{next(_ids)}", t0=draw(st.floats(-10, 3600)), content_times=times,
        warmup=draw(st.booleans()), outcome=draw(st.sampled_from(list(RequestOutcome))),
        output_tokens=draw(st.integers(0, 10**6)), input_tokens=draw(st.integers(0, 10**6)),
        tokens_from_usage=draw(st.booleans()),
        **({"ttft": times[0], "e2e": times[-1]} if times and draw(st.booleans()) else fields))


@settings(max_examples=200, deadline=None)
@given(st.lists(records(), max_size=12), st.floats(0, 1e4),
       st.none() | st.builds(SLO, max_ttft=st.none() | st.floats(0.01, 10),
                             max_tpot=st.none() | st.floats(0.001, 1)))
def test_summarize_never_raises_and_counts_add_up(recs, wall, slo):
    s = summarize(recs, wall=wall, slo=slo)
    assert s.sent + s.warmup_sent == len(recs)
    assert sum(s.outcomes.values()) == s.sent and sum(s.warmup_outcomes.values()) == s.warmup_sent
    ok = s.outcomes[OK]
    assert s.ttft.n <= ok and s.e2e.n <= ok and s.tpot.n <= s.ttft.n
    assert s.error_rate is None or 0 <= s.error_rate <= 1
    assert s.good is None or s.good <= ok
    for m in (s.ttft, s.tpot, s.inter_chunk, s.e2e):
        assert m.n == 0 or m.p50 <= m.p90 <= m.p99
    assert len(s.table_rows()) > 20
