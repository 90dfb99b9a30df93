"""The engine's ranks are each accounted for (issue #43): a rank that some of a level's probes'
counters name and another's do not, or that the site expects (--ranks, the arm's TP x PP x DP)
and no counter names, is "not read" in the chain's ranks row ("ranks read 2 of 3; not read:
engine=2 ...") and makes the chain an ERROR; it never drops out of a replica sum or a shard's
least. Within one probe a rank that vanishes, appears or resets between the scrapes is refused
already (gates.proof.rules, pairing); the tests below prove it on the recorded expositions."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from _expositions import engine_counts, render

from gates.cli import main
from gates.core.verdicts import Outcome
from gates.inference import Repetition, g3_chains
from gates.proof import ProofContext, attribute, chain_measurement, engine_evidence, parse_metrics

DATA = Path(__file__).parent / "data" / "metrics"
KV, EXPECTED = 131072, 8192


def repetition(i: int, engine: str, before: str, after: str) -> Repetition:
    """Repetition i as gates.inference builds it: the attribution of two scrapes, the target's
    devices having read what the probe needed."""
    a = attribute(engine, parse_metrics(before), parse_metrics(after))
    return Repetition(arm="candidate", concurrency=8, repetition=i, ttfts=[1.0],
                      output_throughput=10.0, sent=1, errors=0, expected_kv_tokens=EXPECTED,
                      device_read_bytes=EXPECTED * KV, **engine_evidence(a))


def level(reps: list[Repetition], ranks: int | None = None):
    signals = g3_chains(reps, [], ProofContext(expected_ranks=ranks), KV)[8]
    rows = [s for s in signals if s.signal == "ranks the engine's counters name"]
    return chain_measurement("", signals), rows


def dp(disk: list[int]) -> Repetition:
    """A vLLM probe over len(disk) data-parallel engines, each reading disk[e] tokens."""
    idle = [engine_counts(prompt=8256, compute=64, disk=EXPECTED) for _ in disk]
    probed = [engine_counts(prompt=8256 + d, compute=64, disk=EXPECTED + d) for d in disk]
    return repetition(0, "vllm", render(idle), render(probed))


@pytest.mark.parametrize("ranks", [None, 3])
def test_a_replica_missing_from_one_repetition_is_a_rank_not_read(ranks):
    # Repetition 2's scrapes name engines 0 and 1 only (engine 2 gone between repetitions):
    # the level's sum for engine 2 is repetition 1's alone, and the row counted 3 ranks.
    reps = [dp([2731, 2731, 2730]), dp([4096, 4096])]
    m, [row] = level(reps, ranks)
    assert m.outcome is Outcome.ERROR, m.note  # was PASS
    assert row.agreement == "error"
    assert row.note == "ranks read 2 of 3 (67%); not read: engine=2 not in the counters of " \
        "repetition #2"
    assert (row.coverage.what, len(row.coverage.expected)) == ("ranks", 3)


def test_every_replica_in_every_repetition_is_read():
    m, [row] = level([dp([2731, 2731, 2730]), dp([4096, 4095, 1])], 3)
    assert m.outcome is Outcome.PASS, m.note
    assert row.agreement == "agrees" and row.note == "ranks read 3 of 3"


def _sglang(when: str, drop: str = "") -> str:
    text = (DATA / f"sglang-tp8.{when}.prom").read_text()
    return "\n".join(x for x in text.splitlines() if not drop or drop not in x) + "\n"


def test_a_shard_rank_missing_from_one_repetition_is_an_error_not_a_false_fail():
    # TP8; repetition 2's scrapes lack tp_rank 7 altogether: its level sum held half a shard.
    reps = [repetition(0, "sglang", _sglang("before"), _sglang("after")),
            repetition(1, "sglang", _sglang("before", 'tp_rank="7"'),
                       _sglang("after", 'tp_rank="7"'))]
    m, [row] = level(reps, 8)
    assert m.outcome is Outcome.ERROR, m.note  # was FAIL: "rank tp_rank=7 disagrees"
    assert "ranks read 7 of 8 (88%); not read: tp_rank=7 not in the counters of repetition " \
        "#2" in m.note


def _lmcache(name: str, drop: str = "") -> str:
    text = (DATA / f"{name}.prom").read_text()
    text = "\n".join(x for x in text.splitlines() if not drop or drop not in x) + "\n"
    return text + (DATA / f"vllm.{name.split('.')[-1]}.prom").read_text()


def proof(capsys, tmp_path: Path, before: str, after: str, *args: str) -> tuple[int, str]:
    (tmp_path / "before.prom").write_text(before)
    (tmp_path / "after.prom").write_text(after)
    code = main(["proof", "--engine", "lmcache", "--before", str(tmp_path / "before.prom"),
                 "--after", str(tmp_path / "after.prom"), "--expected-tokens", str(EXPECTED),
                 "--kv-bytes-per-token", str(KV), "--device-bytes", str(EXPECTED * KV),
                 "--prompt-tokens", "8208", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_rank_the_site_names_and_no_counter_names_is_not_read(capsys, tmp_path):
    # LMCache TP8, worker 7 in neither scrape (its process never registered its series).
    code, out = proof(capsys, tmp_path, _lmcache("lmcache-tp8.before", 'worker_id="7"'),
                      _lmcache("lmcache-tp8.after", 'worker_id="7"'), "--ranks", "8")
    assert code == 2 and out.splitlines()[-1].startswith("ERROR"), out
    assert "ranks read 7 of 8 (88%); not read: rank 8 of the site's 8 no counter names it " \
        "(the engine's counters name 7)" in out


def test_a_rank_reset_between_the_scrapes_is_refused_not_dropped(capsys, tmp_path):
    # Worker 3 restarted mid-probe: its lifetime count (16,384 before) fell to the probe's 8,192.
    before = _lmcache("lmcache-tp8.before")
    line = next(x for x in before.splitlines()
                if x.startswith("lmcache:num_hit_tokens_total{") and 'worker_id="3"' in x)
    earlier = before.replace(line, line.rsplit(" ", 1)[0] + " 16384.0")
    code, out = proof(capsys, tmp_path, earlier, _lmcache("lmcache-tp8.after"), "--ranks", "8")
    assert code == 2 and out.splitlines()[-1].startswith("ERROR"), out
    assert re.search(r'worker_id="3"} fell from 16,384 to 8,192 .*was reset', out), out


def test_a_rank_whose_series_vanished_after_is_refused_not_dropped(capsys, tmp_path):
    code, out = proof(capsys, tmp_path, _lmcache("lmcache-tp8.before"),
                      _lmcache("lmcache-tp8.after", 'worker_id="3"'), "--ranks", "8")
    assert code == 2 and out.splitlines()[-1].startswith("ERROR"), out
    assert re.search(r'worker_id="3".*not in the after scrape', out), out


def _without(text: str, engine: int, source: str) -> str:
    return "\n".join(x for x in text.splitlines()
                     if not (f'engine="{engine}"' in x and f'source="{source}"' in x)) + "\n"


def test_a_replica_whose_gpu_hit_series_is_missing_is_not_summed_as_none(capsys, tmp_path):
    # Three DP engines; engine 2 answered its share from the GPU cache (5 % of the probe), and
    # its GPU-hit series (source=local_cache_hit, and the cached split's source=device) are in
    # neither scrape: summed over engines 0 and 1, the hits read 0 % and the eviction passed.
    idle = [engine_counts(prompt=8256, compute=64, disk=EXPECTED) for _ in range(3)]
    probed = [engine_counts(prompt=8256 + 3892, compute=64, disk=EXPECTED + 3892)
              for _ in range(2)] + [engine_counts(prompt=8256 + 410, compute=64, gpu=410,
                                                  disk=EXPECTED)]
    before, after = render(idle), render(probed)
    for source in ("local_cache_hit", "device"):
        before, after = _without(before, 2, source), _without(after, 2, source)
    (tmp_path / "before.prom").write_text(before)
    (tmp_path / "after.prom").write_text(after)
    code = main(["proof", "--engine", "vllm", "--before", str(tmp_path / "before.prom"),
                 "--after", str(tmp_path / "after.prom"), "--expected-tokens", str(EXPECTED),
                 "--kv-bytes-per-token", str(KV), "--device-bytes", str(EXPECTED * KV)])
    out = capsys.readouterr().out
    assert code == 2 and out.splitlines()[-1].startswith("ERROR"), out  # was PASS (exit 0)
    assert "gpu_hit_tokens: rank engine=2" in out, out


def test_each_replica_a_gpu_hit_counter_lacks_is_named_and_its_figure_refused():
    # Four DP engines; engines 2 and 3 served a share from the GPU cache, and their GPU-hit
    # series are in neither scrape: the other counters name them, so the sum is refused.
    idle = [engine_counts(prompt=8256, compute=64, disk=EXPECTED) for _ in range(4)]
    probed = [engine_counts(prompt=8256 + 2000, compute=64, disk=EXPECTED + 2000)
              for _ in range(2)] + [engine_counts(prompt=8256 + 2096, compute=64, gpu=96,
                                                  disk=EXPECTED + 2000) for _ in range(2)]
    before, after = render(idle), render(probed)
    for engine in (2, 3):
        for source in ("local_cache_hit", "device"):
            before, after = _without(before, engine, source), _without(after, engine, source)
    a = attribute("vllm", parse_metrics(before), parse_metrics(after))
    assert a.gpu_hit_tokens is None and "gpu_hit_tokens" in a.unknown
    assert a.errors["gpu_hit_tokens"] == "; ".join(
        f"rank engine={e} is in the cpu_hit_tokens counter but in neither scrape of this one: "
        "its figure was not read, and the other ranks' cannot stand for it" for e in (2, 3))
    assert a.storage_read_tokens == 4 * 2000 and "storage_read_tokens" not in a.errors
