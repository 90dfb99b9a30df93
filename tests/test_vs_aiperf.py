"""bench/vs_aiperf.py's pure parts: aiperf's export (a real recorded run), the matching to the
reference server's stamps, the ratios and the verdict. Needs neither aiperf nor a server."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
DATA = Path(__file__).resolve().parent / "data" / "aiperf"
sys.path.append(str(BENCH))  # bench/ is scripts, not a package; appended: tests/ wins names

import _aiperf  # noqa: E402
import _truth  # noqa: E402
from _proctree import Measured  # noqa: E402
from _refserver import prompt_key  # noqa: E402

from gates.core.statistics import percentile  # noqa: E402


@pytest.fixture(scope="module")
def export() -> str:
    return (DATA / "profile_export.jsonl").read_text()


def test_the_recorded_export_parses_to_its_profiling_records(export):
    records = _aiperf.parse_export(export)
    assert len(records) == 6  # 2 warm-up lines are skipped
    assert len(_aiperf.parse_export(export, phase="warmup")) == 2
    assert len({r.key for r in records}) == 6
    for r in records:
        assert r.ok
        assert 0.020 < r.ttft < 0.040  # the server's first token is due 20 ms after receipt
        assert 0.0045 < r.itl < 0.0060  # one token per 5 ms
        assert r.start < r.end and r.end - r.start > 0.17  # 20 + 31 * 5 ms


def test_aiperfs_own_p50_is_the_p50_of_the_records_we_read(export):
    # Reading the same field aiperf aggregates: its summary's p50 equals ours over the records.
    summary = _aiperf.parse_aggregate(json.loads((DATA / "profile_export_aiperf.json")
                                                 .read_text()))
    records = _aiperf.parse_export(export)
    assert summary["ttft_p50"] == pytest.approx(
        percentile([r.ttft for r in records], 50), rel=1e-9)
    assert summary["itl_p50"] == pytest.approx(
        percentile([r.itl for r in records], 50), rel=1e-9)
    assert summary["output_throughput"] > 0


def test_every_recorded_request_matches_the_servers_stamps(export):
    truth = _truth.truths(json.loads((DATA / "stamps.json").read_text()))
    assert len(truth) == 8  # warm-up requests are stamped too; only profiling ones are matched
    run = _truth.match(_aiperf.parse_export(export), truth)
    assert (len(run.ttft_err), run.failed, run.unmatched) == (6, 0, 0)
    # A client sees the first token after the server sent it: positive, and small on loopback.
    assert all(0 < e < 0.010 for e in run.ttft_err)
    assert all(0 <= e < 0.001 for e in run.itl_err)
    assert 5 < run.rate < 15  # 2 slots of ~180 ms requests


def test_metric_units_convert_to_seconds():
    assert _aiperf.metric_seconds({"value": 2_000_000, "unit": "ns"}) == 0.002
    assert _aiperf.metric_seconds({"value": 2000, "unit": "us"}) == 0.002
    assert _aiperf.metric_seconds({"value": 2, "unit": "ms"}) == 0.002
    assert _aiperf.metric_seconds({"value": 2, "unit": "sec"}) == 2
    assert _aiperf.metric_seconds({"value": 32, "unit": "tokens"}) is None
    assert _aiperf.metric_seconds(None) is None


def _line(**meta) -> str:
    base = {"x_request_id": "r1", "benchmark_phase": "profiling", "request_start_ns": 10**18,
            "request_end_ns": 10**18 + 10**8}
    metrics = {"time_to_first_token": {"value": 21.0, "unit": "ms"}}
    error = meta.pop("error", None)
    return json.dumps({"metadata": base | meta, "metrics": metrics, "error": error})


def test_failed_and_cancelled_records_are_not_ok_and_count_as_failed():
    text = "\n".join([_line(x_request_id="a", error={"message": "boom"}),
                      _line(x_request_id="b", was_cancelled=True), _line(x_request_id="c"), ""])
    records = _aiperf.parse_export(text)
    assert [r.ok for r in records] == [False, False, True]
    truth = {"c": _truth.Truth(0, (20_000_000, 25_000_000))}
    run = _truth.match(records, truth)
    assert (run.failed, run.unmatched) == (2, 0)
    assert run.ttft_err == [pytest.approx(0.001)]


def test_a_line_that_is_not_an_aiperf_record_names_its_line():
    with pytest.raises(ValueError, match="line 2"):
        _aiperf.parse_export(_line() + "\n{\"no\": 1}\n")


def test_a_request_the_server_never_stamped_is_unmatched():
    run = _truth.match([_aiperf.Record(key="x", ok=True, ttft=0.02, itl=0.005)], {})
    assert (run.unmatched, run.ttft_err, run.rate) == (1, [], None)


def test_server_truth_from_stamps():
    t = _truth.Truth(recv=1_000_000, sent=(21_000_000, 26_000_000, 31_000_000))
    assert t.ttft == pytest.approx(0.020)
    assert t.itl == pytest.approx(0.005)
    assert _truth.Truth(0, (5,)).itl is None and _truth.Truth(0, ()).ttft is None


def test_kvgate_bodies_and_the_servers_key_agree():
    # The server keys a request without X-Request-ID by the hash of its JSON prompt: the
    # prompt kvgate's payload() puts in the body must give the key the bench computes.
    from _kvclient import TextRequest

    from gates.loadgen import Endpoint, LoadSettings, payload

    prompt = _aiperf.text_prompts("t", 1, 32)[0]
    body = json.loads(json.dumps(payload(Endpoint(url="http://x", model="m"),
                                         TextRequest("r", prompt, 32, "probe"), LoadSettings())))
    assert prompt_key(body["prompt"]) == prompt_key(prompt)
    assert prompt_key(prompt) == hashlib.blake2b(json.dumps(prompt).encode(),
                                                 digest_size=16).hexdigest()


def test_kvgate_records_skip_the_warm_up_and_place_requests_in_wall_time():
    out = {"wall0": 100.0, "records": [
        {"prompt": "w1", "ok": True, "warmup": True, "t0": 0.0, "ttft": 0.02, "e2e": 0.2,
         "itl": 0.005},
        {"prompt": "w2", "ok": True, "warmup": False, "t0": 0.5, "ttft": 0.021, "e2e": 0.18,
         "itl": 0.005},
        {"prompt": "w3", "ok": False, "warmup": False, "t0": 0.6, "ttft": None, "e2e": None,
         "itl": None}]}
    records = _aiperf.kvgate_records(out, prompt_key)
    assert [r.key for r in records] == [prompt_key("w2"), prompt_key("w3")]
    assert records[0].start == 100.5 and records[0].end == pytest.approx(100.68)
    assert records[1].end is None
    assert _truth.window(records) == (100.5, pytest.approx(100.68))


def test_prompts_are_distinct_deterministic_and_in_aiperfs_single_turn_shape():
    a, b = _aiperf.text_prompts("x", 50, 32), _aiperf.text_prompts("x", 50, 32)
    assert a == b and len(set(a)) == 50 and all(len(p.split()) == 32 for p in a)
    assert _aiperf.text_prompts("y", 1, 32) != a[:1]
    lines = _aiperf.input_file(a[:2], 32).splitlines()
    assert json.loads(lines[0]) == {"text": a[0], "output_length": 32}


def test_the_aiperf_command_line():
    argv = _aiperf.profile_argv(Path("/v/bin/aiperf"), url="http://h:1", model="m",
                                tokenizer=Path("/tok"), inputs=Path("/in.jsonl"), requests=10,
                                concurrency=4, warmup=4, artifacts=Path("/art"), timeout=60)
    pairs = dict(zip(argv[2::2], argv[3::2], strict=False))
    assert argv[:2] == ["/v/bin/aiperf", "profile"]
    for flag, value in (("--request-count", "10"), ("--concurrency", "4"),
                        ("--warmup-request-count", "4"), ("--tokenizer", "/tok"),
                        ("--endpoint-type", "completions"), ("--export-level", "records")):
        assert argv[argv.index(flag) + 1] == value, pairs
    assert "--streaming" in argv and "--use-server-token-count" in argv
    open_loop = _aiperf.profile_argv(Path("a"), url="u", model="m", tokenizer=Path("t"),
                                     inputs=Path("i"), requests=10, concurrency=8, warmup=8,
                                     artifacts=Path("o"), timeout=60, rate=20.0)
    assert "--concurrency" not in open_loop
    assert open_loop[open_loop.index("--request-rate") + 1] == "20"
    assert open_loop[open_loop.index("--arrival-pattern") + 1] == "constant"


def _side(ttft_ms: float, cpu: float, rss: int, rate: float) -> _truth.Side:
    run = _truth.Run(ttft_err=[ttft_ms / 1e3, 2 * ttft_ms / 1e3], itl_err=[ttft_ms / 1e4],
                     rate=rate, cpu=cpu, window_cpu=cpu / 2, peak_rss=rss)
    return _truth.Side([run, run])


def test_the_verdict_wants_every_cost_lower_and_throughput_not_lower():
    aiperf = _side(2.0, 5.0, 800, 100.0)
    assert _truth.behind(_side(1.0, 1.0, 50, 100.0), aiperf) == []
    assert _truth.behind(_side(1.0, 1.0, 50, 99.5), aiperf) == []  # within 1 %: not lower
    assert _truth.behind(_side(1.0, 1.0, 50, 98.0), aiperf) == ["rate"]
    assert _truth.behind(_side(3.0, 1.0, 900, 120.0), aiperf) == [
        "ttft_p50", "ttft_p99", "itl_p50", "peak_rss"]


def test_errors_closer_than_the_floor_are_level_not_behind():
    aiperf = _truth.Side([_truth.Run(ttft_err=[0.002], itl_err=[2.4e-6], rate=5.5, cpu=22.0,
                                     window_cpu=18.0, peak_rss=790)])
    close = _truth.Side([_truth.Run(ttft_err=[0.001], itl_err=[2.5e-6], rate=5.7, cpu=1.5,
                                    window_cpu=1.0, peak_rss=52)])  # c = 1 on 2026-12-01
    assert _truth.behind(close, aiperf) == [] and _truth.levels(close, aiperf) == ["itl_p50"]
    far = _truth.Side([_truth.Run(ttft_err=[0.001], itl_err=[2.4e-6 + 11e-6], rate=5.7,
                                  cpu=1.5, window_cpu=1.0, peak_rss=52)])
    assert _truth.behind(far, aiperf) == ["itl_p50"] and _truth.levels(far, aiperf) == []
    assert _truth.level("cpu", 1.0, 1.0) is False  # only errors have a floor


def test_pooled_percentiles_and_means():
    side = _side(1.0, 2.0, 10, 50.0)
    assert side.value("ttft_p50") == pytest.approx(0.0015)  # over [1, 1, 2, 2] ms
    assert side.value("ttft_p99") == pytest.approx(0.002)
    assert side.value("cpu") == 2.0 and side.value("peak_rss") == 10.0
    assert percentile([], 50) is None
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert _truth.ratio(1, 4) == 0.25 and _truth.ratio(1, 0) is None


def test_cpu_between_interpolates_the_samples():
    m = Measured(returncode=0, wall=1, cpu=3, kernel_cpu=3, peak_rss=1, processes=1,
                 series=[(10.0, 0.0), (11.0, 1.0), (12.0, 3.0)])
    assert m.cpu_between(10.5, 11.5) == pytest.approx(1.5)
    assert m.cpu_between(9.0, 13.0) == 3.0  # clamped to what was sampled
    assert m.cpu_between(11.0, 11.0) is None


def test_without_aiperf_it_says_how_to_install_and_exits_0(tmp_path, monkeypatch, capsys):
    import vs_aiperf

    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path))
    assert vs_aiperf.main(["--plain"]) == 0
    out = capsys.readouterr().out
    assert "SKIPPED" in out and "python bench/vs_aiperf.py --install" in out
    assert str(tmp_path / "aiperf" / f"venv-{_aiperf.VERSION}") in out
