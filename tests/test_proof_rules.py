"""The evidence chain's rules, one test per hole issue #25 found with crafted before/after
expositions (`kvgate proof`, the rules G3 uses): each of these gave a PASS (or a traceback, or a
false FAIL) on 010cc10. Items 7-9 (G3 beside the offline proof): test_proof_g3.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _expositions import engine_counts, render

from gates.cli import main
from gates.proof.pairing import Pairing, PairingError
from gates.proof.promtext import MetricSet, Sample
from gates.proof.rules import Found, Rule, Unclassified, answer, rule

DATA = Path(__file__).parent / "data" / "metrics"
KV = 131072  # KV bytes per token
EXPECTED = 8192
NEEDED = EXPECTED * KV


def proof(capsys, tmp_path: Path, before: str, after: str, *args: str,
          engine: str = "vllm") -> tuple[int, str]:
    (tmp_path / "before.prom").write_text(before)
    (tmp_path / "after.prom").write_text(after)
    code = main(["proof", "--engine", engine, "--before", str(tmp_path / "before.prom"),
                 "--after", str(tmp_path / "after.prom"), *args])
    out = capsys.readouterr()
    return code, out.out + out.err


STANDARD = ("--expected-tokens", str(EXPECTED), "--kv-bytes-per-token", str(KV),
            "--device-bytes", str(NEEDED))
# A vLLM engine whose connector names the disk tier; its lifetime counters already hold one
# probe's worth of disk hits (the seed's run earlier).
IDLE = engine_counts(prompt=8256, compute=64, disk=EXPECTED)
PROBED = engine_counts(prompt=16512, compute=128, disk=2 * EXPECTED)


def test_a_probe_that_read_its_context_from_disk_passes(capsys, tmp_path):
    code, out = proof(capsys, tmp_path, render([IDLE]), render([PROBED]), *STANDARD)
    assert code == 0 and out.rstrip().splitlines()[-1].startswith("PASS"), out


# ---- 1. a series missing from before is not counted from zero --------------------------------

def test_an_empty_before_is_an_error_naming_the_series(capsys, tmp_path):
    # No movement at all: the after scrape's lifetime counter would be the probe's delta.
    code, out = proof(capsys, tmp_path, "", render([IDLE]), *STANDARD)
    assert code == 2 and "ERROR" in out, out
    assert re.search(r'vllm:prompt_tokens_cached_by_source_total\{engine="0",model_name="m",'
                     r'source="[a-z_]+"\} is in the after scrape only', out), out


@pytest.mark.parametrize("fmt", ["om", "om_"])
def test_a_format_change_between_the_scrapes_still_pairs_the_series(capsys, tmp_path, fmt):
    # Text before, OpenMetrics after ('vllm_' with prometheus_client's default escaping): the
    # same counter, unmoved. Keyed on the exact name, 8,192 lifetime tokens became the delta.
    code, out = proof(capsys, tmp_path, render([IDLE]), render([IDLE], fmt), *STANDARD)
    assert code == 1 and "FAIL" in out, out
    assert re.search(r"= 0 tokens, expected ≥ 7,373 of 8,192 expected tokens.*: disagrees", out)
    code, out = proof(capsys, tmp_path, render([IDLE]), render([PROBED], fmt), *STANDARD)
    assert code == 0, out


def test_extra_labels_in_after_are_an_error_naming_the_labels(capsys, tmp_path):
    extra = {"instance": "10.0.0.7:8000", "job": "vllm"}
    code, out = proof(capsys, tmp_path, render([IDLE]), render([IDLE], extra=extra), *STANDARD)
    assert code == 2 and "ERROR" in out, out
    assert "instance,job" in out and "a scraper added or dropped labels" in out


# ---- 2. counter resets ---------------------------------------------------------------------

def test_a_counter_that_fell_is_an_error_not_the_new_value(capsys, tmp_path):
    before = render([engine_counts(prompt=20000, compute=128, disk=2 * EXPECTED)])
    after = render([engine_counts(prompt=8256, compute=64, disk=EXPECTED)])  # restarted
    code, out = proof(capsys, tmp_path, before, after, *STANDARD)
    assert code == 2 and "ERROR" in out and "fell from 16,384 to 8,192" in out, out
    assert "reset" in out


def test_a_restart_is_accepted_only_when_expected_and_shown_by_the_start_time(capsys, tmp_path):
    before = render([engine_counts(prompt=20000, compute=128, disk=2 * EXPECTED)],
                    start_time=1.7e9)
    after = render([engine_counts(prompt=8256, compute=64, disk=EXPECTED)], start_time=1.7e9 + 60)
    code, out = proof(capsys, tmp_path, before, after, *STANDARD)
    assert code == 2 and "restart" in out, out  # not expected: an error
    code, out = proof(capsys, tmp_path, before, after, *STANDARD, "--restarted")
    assert code == 0, out  # expected and shown: every series counts from the restart
    same = render([engine_counts(prompt=8256, compute=64, disk=EXPECTED)], start_time=1.7e9)
    code, out = proof(capsys, tmp_path, before, same, *STANDARD, "--restarted")
    assert code == 2 and "does not show one" in out, out
    # A restart with no counter falling (16,384 -> restart -> 24,576) is caught by the time.
    rose = render([engine_counts(prompt=30000, compute=192, disk=3 * EXPECTED)],
                  start_time=1.7e9 + 60)
    code, out = proof(capsys, tmp_path, before, rose, *STANDARD)
    assert code == 2 and "the engine restarted between the scrapes" in out, out


# ---- 3. every engine-side figure has a floor and a ceiling -----------------------------------

@pytest.mark.parametrize("disk, words", [
    (100 * EXPECTED, "more than the probe could have read"),
    (1e300, "more than the probe could have read"),
])
def test_more_tokens_than_the_probe_could_need_never_pass(capsys, tmp_path, disk, words):
    after = engine_counts(prompt=16512, compute=128, disk=EXPECTED + disk)
    code, out = proof(capsys, tmp_path, render([IDLE]), render([after]), *STANDARD)
    assert code != 0 and "PASS" not in out.splitlines()[-1], out
    assert words in out


def test_more_storage_tokens_than_the_engine_counted_prompt_tokens_is_not_a_pass(capsys, tmp_path):
    after = engine_counts(prompt=8256 + 4096, compute=64, disk=2 * EXPECTED)
    code, out = proof(capsys, tmp_path, render([IDLE]), render([after]), *STANDARD,
                      "--prompt-tokens", "8256")
    assert code == 2 and "INCONCLUSIVE" in out, out
    assert "the prompt tokens the engine counted" in out


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_infinite_or_nan_counters_are_refused_as_bad_input(capsys, tmp_path, value):
    after = engine_counts(prompt=16512, compute=128, disk=value)
    code, out = proof(capsys, tmp_path, render([IDLE]), render([after]), *STANDARD)
    assert code == 2 and out.splitlines()[-1].startswith("ERROR"), out
    assert "not a count" in out and "nan tokens" not in out


# ---- 4. a storage-side signal that cannot name the target's devices --------------------------

@pytest.mark.parametrize("flag", ["--nic-bytes", "--rdma-bytes", "--process-bytes"])
def test_nic_rdma_or_process_bytes_never_alone_rule_memory_out(capsys, tmp_path, flag):
    # ExampleConnector: its hits are external_unspecified, so the tier-blind counter answers.
    before = render([engine_counts(prompt=8256, compute=64, unspecified=EXPECTED)])
    after = render([engine_counts(prompt=16512, compute=128, unspecified=2 * EXPECTED)])
    common = ("--expected-tokens", str(EXPECTED), "--kv-bytes-per-token", str(KV),
              "--memory", "1TiB")
    code, out = proof(capsys, tmp_path, before, after, *common, flag, str(NEEDED))
    assert code == 2 and "INCONCLUSIVE" in out, out
    assert "cannot name the target's devices" in out
    code, out = proof(capsys, tmp_path, before, after, *common, "--device-bytes", str(NEEDED))
    assert code == 0, out


# ---- 5. ranks --------------------------------------------------------------------------------

def _lmcache(name: str, label: str = "worker_id", drop: str = "") -> str:
    """An LMCache TP8 recording with vLLM's own families (the GPU-hit counter) beside it."""
    text = (DATA / f"{name}.prom").read_text().replace("worker_id=", f"{label}=")
    text = "\n".join(x for x in text.splitlines() if not drop or drop not in x) + "\n"
    return text + (DATA / f"vllm.{name.split('.')[-1]}.prom").read_text()


LMCACHE = ("--expected-tokens", str(EXPECTED), "--kv-bytes-per-token", str(KV),
           "--device-bytes", str(NEEDED), "--prompt-tokens", "8208")


def test_a_rank_label_the_rules_do_not_know_is_not_summed(capsys, tmp_path):
    # TP8 labelled tp_rank, rank 5 at zero: summed into one "rank" it was 7 x 8,192 and passed.
    after = _lmcache("lmcache-tp8.after", "tp_rank").replace(
        'tp_rank="5"} 8192.0', 'tp_rank="5"} 0.0')
    code, out = proof(capsys, tmp_path, _lmcache("lmcache-tp8.before", "tp_rank"), after,
                      *LMCACHE, engine="lmcache")
    assert code == 2 and "INCONCLUSIVE" in out, out
    assert "label tp_rank takes several values" in out


@pytest.mark.parametrize("side, words", [("before", "appears in the after scrape only"),
                                         ("after", "not in the after scrape")])
def test_a_rank_appearing_or_vanishing_between_the_scrapes_is_an_error(capsys, tmp_path, side,
                                                                        words):
    before, after = _lmcache("lmcache-tp8.before"), _lmcache("lmcache-tp8.after")
    if side == "before":
        before = _lmcache("lmcache-tp8.before", drop='worker_id="7"')
    else:
        after = _lmcache("lmcache-tp8.after", drop='worker_id="7"')
    code, out = proof(capsys, tmp_path, before, after, *LMCACHE, engine="lmcache")
    assert code == 2 and "ERROR" in out and words in out, out
    assert re.search(r'worker_id="?7', out)


def test_a_rank_count_the_engine_contradicts_is_an_error_not_a_fail(capsys, tmp_path):
    args = ("--ranks", "4")
    code, out = proof(capsys, tmp_path, _lmcache("lmcache-tp8.before"),
                      _lmcache("lmcache-tp8.after"), *LMCACHE, *args, engine="lmcache")
    assert code == 2 and out.splitlines()[-1].startswith("ERROR"), out
    assert "the site's 4 ranks contradict the 8 the engine's counters name" in out
    code, out = proof(capsys, tmp_path, _lmcache("lmcache-tp8.before"),
                      _lmcache("lmcache-tp8.after"), *LMCACHE, "--ranks", "8", engine="lmcache")
    assert code == 0, out


def test_an_idle_data_parallel_replica_does_not_fail_the_probe(capsys, tmp_path):
    # One probe request, routed to DP engine 0; engine 1 served nothing and read nothing.
    before = render([IDLE, engine_counts(prompt=100, compute=100)])
    after = render([PROBED, engine_counts(prompt=100, compute=100)])
    code, out = proof(capsys, tmp_path, before, after, *STANDARD, "--json")
    body = json.loads(out)
    idle = next(s for s in body["signals"] if s["signal"] == "rank engine=1")
    assert "idle" in idle["note"] and idle["agreement"] == "not exposed"
    assert code == 0, body["reason"]


# ---- 6. every numeric option finite and in range ---------------------------------------------

@pytest.mark.parametrize("args, option", [
    (("--expected-tokens", "0"), "--expected-tokens"),
    (("--expected-tokens", "-5"), "--expected-tokens"),
    (("--expected-tokens", "nan"), "--expected-tokens"),
    (("--read-fraction-min", "-50"), "--read-fraction-min"),
    (("--read-fraction-min", "150"), "--read-fraction-min"),
    (("--kv-bytes-per-token", "-131072"), "--kv-bytes-per-token"),
    (("--device-bytes=-1e9",), "--device-bytes"),
    (("--device-bytes", "inf"), "--device-bytes"),
    (("--nic-bytes", "inf"), "--nic-bytes"),
    (("--process-bytes", "inf"), "--process-bytes"),
    (("--probe-seconds", "nan"), "--probe-seconds"),
    (("--probe-seconds", "-1"), "--probe-seconds"),
    (("--ranks", "0"), "--ranks"),
    (("--block-tokens", "0"), "--block-tokens"),
    (("--prompt-tokens", "inf"), "--prompt-tokens"),
    (("--memory=-1GiB",), "--memory"),
    (("--restore-bw", "inf GB/s"), "--restore-bw"),
])
def test_an_option_out_of_range_is_refused_naming_it(capsys, tmp_path, args, option):
    pairs = [a.split("=", 1) if "=" in a else None for a in args]
    given = dict(p for p in pairs if p) or dict(zip(args[::2], args[1::2], strict=True))
    base = dict(zip(STANDARD[::2], STANDARD[1::2], strict=True)) | given
    code, out = proof(capsys, tmp_path, render([IDLE]), render([PROBED]),
                      *[f"{k}={v}" for k, v in base.items()])
    assert code == 2 and option in out and "Traceback" not in out, out
    assert "PASS" not in out and "FAIL" not in out


def test_negative_bytes_per_token_and_device_bytes_are_both_named(capsys, tmp_path):
    code, out = proof(capsys, tmp_path, render([IDLE]), render([PROBED]),
                      "--expected-tokens", "8192", "--kv-bytes-per-token", "-8",
                      "--device-bytes=-65536")
    assert code == 2 and "--kv-bytes-per-token" in out and "--device-bytes" in out, out


def test_a_gzip_or_binary_file_is_refused_naming_the_file(capsys, tmp_path):
    import gzip

    (tmp_path / "g.prom").write_bytes(gzip.compress(render([IDLE]).encode()))
    (tmp_path / "b.prom").write_bytes(b"vllm:x 1\n\xff\xfe\x00binary\n")
    for name, words in (("g.prom", "gzip"), ("b.prom", "not a text exposition")):
        code = main(["proof", "--engine", "vllm", "--before", str(tmp_path / name), "--after",
                     str(tmp_path / name), *STANDARD])
        out = capsys.readouterr()
        assert code == 2 and name in out.err and words in out.err, out.err


# ---- issue #43 case 6: the engine's own tier split outranks a tier-blind counter -------------
def _peer(p2p: float, unspecified: float, compute: float, prompt: float) -> dict:
    counts = engine_counts(prompt=prompt, compute=compute, disk=0.0)
    counts["vllm:prompt_tokens_by_source"]["external_kv_transfer"] = p2p + unspecified
    counts["vllm:prompt_tokens_cached_by_source"] |= {"p2p": p2p,
                                                      "external_unspecified": unspecified}
    return counts


def test_tokens_the_engine_names_another_instances_memory_are_not_storage(capsys, tmp_path):
    # A P2P connector (vLLM's NixlConnector reports p2p) served 8,191 tokens from another
    # instance's GPU and left 1 unattributed. A small host memory rules the local page cache
    # out, and the devices saw the bytes (other I/O): on ac73f28 the tier-blind
    # external_kv_transfer counter claimed all 8,192 and the chain PASSed.
    before, after = _peer(0, 0, 64, 8256), _peer(EXPECTED - 1, 1, 128, 8256 + 8256)
    code, out = proof(capsys, tmp_path, render([before]), render([after]), *STANDARD,
                      "--memory", "512MiB")
    last = out.rstrip().splitlines()[-1]
    assert code != 0 and not last.startswith("PASS"), out
    assert "= 1 tokens" in out and "p2p 8,191 (peer)" in out, out


# ---- the rules themselves (gates.proof.rules), on hand-made scrapes ---------------------------
# Each rule is built here, at test time, with rule(): the adapters' tables are built at import.

def _scrape(*series: tuple[str, dict[str, str], float]) -> MetricSet:
    return MetricSet(samples=[Sample(name=n, labels=labels, value=v) for n, labels, v in series])


def _answer(r: Rule, before: MetricSet, after: MetricSet, *, same_engine: bool = False,
            worst: bool = False) -> Found | None:
    p = Pairing(before, after)
    p.same_engine = same_engine
    return answer(r, p, worst)


def _tp(values: dict[str, float], name: str = "hits_total", **labels: str) -> list:
    return [(name, {"tp_rank": k, **labels}, v) for k, v in values.items()]


def test_a_rule_with_only_a_pattern_is_the_plain_rule():
    # Every keyword rule() leaves out keeps the Rule's own default (no tier, roster, caveat...).
    assert rule("hits_total") == Rule(pattern="hits_total")


def test_a_plain_rule_answers_its_familys_delta_with_no_caveat_and_no_ranks():
    found = _answer(rule("hits_total"), _scrape(("hits_total", {}, 5.0)),
                    _scrape(("hits_total", {}, 12.0)))
    assert found == Found(value=7.0, series=["hits_total"])


def test_a_rules_label_values_choose_its_series():
    r = rule("hits_total", source="disk")
    series = [("hits_total", {"source": "disk"}, 10.0), ("hits_total", {"source": "cpu"}, 10.0)]
    after = [("hits_total", {"source": "disk"}, 14.0), ("hits_total", {"source": "cpu"}, 30.0)]
    found = _answer(r, _scrape(*series), _scrape(*after))
    assert found.value == 4.0 and found.series == ['hits_total{source="disk"}']


def test_a_rules_caveat_travels_with_its_answer():
    r = rule("hits_total", caveat="tier-blind")
    found = _answer(r, _scrape(("hits_total", {}, 0.0)), _scrape(("hits_total", {}, 3.0)))
    assert found.caveat == "tier-blind"


def test_shard_ranks_read_the_least_of_them_and_split_ranks_their_sum():
    before = _scrape(*_tp({"0": 0, "1": 0}))
    after = _scrape(*_tp({"0": 8.0, "1": 6.0}))
    shard = _answer(rule("hits_total", shard=("tp_rank",)), before, after)
    assert (shard.value, shard.mode) == (6.0, "shard")
    assert _answer(rule("hits_total", shard=("tp_rank",)), before, after, worst=True).value == 8
    split = _answer(rule("hits_total", split=("tp_rank",)), before, after)
    assert (split.value, split.mode) == (14.0, "split")


def test_ranks_sort_as_numbers_and_a_label_that_is_no_number_sorts_after_them():
    # "²" is a digit to str.isdigit and no number to int(): it sorted into a ValueError.
    before = _scrape(*_tp({"10": 0, "9": 0, "²": 0}))
    after = _scrape(*_tp({"10": 5.0, "9": 7.0, "²": 6.0}))
    found = _answer(rule("hits_total", shard=("tp_rank",)), before, after)
    assert list(found.ranks) == ["tp_rank=9", "tp_rank=10", "tp_rank=²"]
    assert found.value == 5.0


def test_a_rank_in_the_after_scrape_only_is_an_error_naming_it():
    before = _scrape(*_tp({"0": 0, "1": 0}))
    after = _scrape(*_tp({"0": 8.0, "1": 8.0, "2": 8.0}))
    with pytest.raises(PairingError) as e:
        _answer(rule("hits_total", shard=("tp_rank",)), before, after)
    assert str(e.value) == ("rank tp_rank=2 appears in the after scrape only: the engine's ranks "
                            "changed between the scrapes (a restart or a different deployment?)")


def test_ranks_that_appear_and_vanish_in_the_roster_are_each_named():
    # The roster names every rank: two ranks (of two rank labels) left it, one came.
    r = rule("hits_total", shard=("tp_rank",), split=("dp_rank",), roster="up")
    rows = [("hits_total", {"tp_rank": "0", "dp_rank": "0"}, 0.0)]
    before = _scrape(*rows, *[("up", {"tp_rank": t, "dp_rank": "0"}, 1.0) for t in "012"])
    after = _scrape(*rows, *[("up", {"tp_rank": t, "dp_rank": "0"}, 1.0) for t in "03"])
    with pytest.raises(PairingError) as e:
        _answer(r, before, after)
    assert str(e.value) == (
        "rank tp_rank=3,dp_rank=0 appears in the after scrape only; rank tp_rank=1,dp_rank=0; "
        "tp_rank=2,dp_rank=0 vanished from the after scrape: the engine's ranks changed between "
        "the scrapes (a restart or a different deployment?)")
    fewer = _scrape(*rows, *[("up", {"tp_rank": t, "dp_rank": "0"}, 1.0) for t in "01"])
    with pytest.raises(PairingError) as e:
        _answer(r, before, fewer)
    assert str(e.value) == (
        "rank tp_rank=2,dp_rank=0 vanished from the after scrape: the engine's ranks changed "
        "between the scrapes (a restart or a different deployment?)")


def test_a_rank_the_roster_names_and_the_family_never_counted_reads_zero():
    r = rule("hits_total", shard=("tp_rank",), roster="up")
    up = [("up", {"tp_rank": t}, 1.0) for t in "01"]
    before = _scrape(*_tp({"0": 0}), *up)
    after = _scrape(*_tp({"0": 8.0}), *up)
    found = _answer(r, before, after)
    assert found.value == 0 and found.ranks == {"tp_rank=0": 8.0, "tp_rank=1": 0.0}


def test_ranks_are_listed_by_number_then_by_name_and_labels_by_name():
    # tp_rank=10 after tp_rank=9 (not after 1), a rank named by a word last; dp before tp.
    r = rule("hits_total", shard=("tp_rank",), split=("dp_rank",))
    ranks = ["9", "10", "x", "1"]
    before = _scrape(*[("hits_total", {"tp_rank": t, "dp_rank": "0"}, 0.0) for t in ranks],
                     ("hits_total", {"tp_rank": "1", "dp_rank": "1"}, 0.0))
    after = _scrape(*[("hits_total", {"tp_rank": t, "dp_rank": "0"}, 4.0) for t in ranks],
                    ("hits_total", {"tp_rank": "1", "dp_rank": "1"}, 3.0))
    found = _answer(r, before, after)
    assert list(found.ranks) == ["dp_rank=0,tp_rank=1", "dp_rank=1,tp_rank=1",
                                 "dp_rank=0,tp_rank=9", "dp_rank=0,tp_rank=10",
                                 "dp_rank=0,tp_rank=x"]
    assert (found.value, found.mode) == (4.0 + 3.0, "split")


def test_a_phase_where_the_unless_series_rose_leaves_the_rule_unanswered():
    r = rule("hits_total", unless={"source": "unspecified"}, source="all")
    before = _scrape(("hits_total", {"source": "all"}, 0.0),
                     ("hits_total", {"source": "unspecified"}, 0.0))
    after = _scrape(("hits_total", {"source": "all"}, 8.0),
                    ("hits_total", {"source": "unspecified"}, 1.0))
    assert _answer(r, before, after) is None
    quiet = _scrape(("hits_total", {"source": "all"}, 8.0),
                    ("hits_total", {"source": "unspecified"}, 0.0))
    assert _answer(r, before, quiet).value == 8.0


def _tiered(values: dict[str, float]) -> MetricSet:
    return _scrape(*[("hits_total", {"cache_hit_source": k}, v) for k, v in values.items()])


def test_only_the_tier_class_the_rule_reads_counts():
    r = rule("hits_total", tier="cache_hit_source", space="vllm.cache_hit_source", cls="storage")
    found = _answer(r, _tiered({"disk": 1.0, "host": 2.0}), _tiered({"disk": 9.0, "host": 50.0}))
    assert found.value == 8.0 and found.series == ['hits_total{cache_hit_source="disk"}']


def test_an_unknown_tier_that_moved_is_unclassified_naming_it():
    r = rule("hits_total", tier="cache_hit_source", space="vllm.cache_hit_source", cls="storage")
    with pytest.raises(Unclassified, match='cache_hit_source="nvme9" moved in the probe'):
        _answer(r, _tiered({"disk": 0.0, "nvme9": 0.0}), _tiered({"disk": 0.0, "nvme9": 4.0}))


def test_a_tier_that_defers_to_the_backend_is_read_as_the_roster_names_it():
    r = rule("cached_total", tier="cache_source", space="sglang.cache_source", cls="storage",
             roster="info", backend="storage_backend")
    before = _scrape(("cached_total", {"cache_source": "storage"}, 0.0),
                     ("info", {"storage_backend": "file"}, 1.0))
    after = _scrape(("cached_total", {"cache_source": "storage"}, 6.0),
                    ("info", {"storage_backend": "file"}, 1.0))
    assert _answer(r, before, after).value == 6.0
    peer = [MetricSet(samples=[s.model_copy(update={"labels": {"storage_backend": "mooncake"}})
                               if s.name == "info" else s for s in m.samples])
            for m in (before, after)]
    assert _answer(r, *peer) is None  # another host's memory: nothing of the storage class


def test_a_family_first_created_in_the_probe_counts_only_where_the_rule_says_it_may():
    before, after = _scrape(("other", {}, 1.0)), _scrape(("other", {}, 1.0), ("new_total", {}, 5.0))
    with pytest.raises(PairingError, match="is in the after scrape only"):
        _answer(rule("new_total"), before, after, same_engine=True)
    assert _answer(rule("new_total", lazy=True), before, after, same_engine=True).value == 5.0


@pytest.mark.parametrize("r, text", [
    (rule("hits_total"), "hits_total"),
    (rule("hits_total", source="disk"), 'hits_total{source=~"disk"}'),
    (rule("hits_total", source="disk", engine="0|1"),
     'hits_total{source=~"disk",engine=~"0|1"}'),
    (rule("hits_total", tier="tier", space="vllm.tier", cls="storage"),
     "hits_total{tier is storage}"),
    (rule("hits_total", tier="tier", space="vllm.tier", cls="storage", engine="0"),
     'hits_total{engine=~"0",tier is storage}'),
])
def test_a_rule_describes_itself_in_promql_notation(r, text):
    assert r.describe() == text


def test_a_label_the_rule_does_not_know_that_varies_within_a_rank_is_unclassified():
    # Two hosts and two zones under tp_rank=0: shards of one rank, or replicas? Not added.
    r = rule("hits_total", shard=("tp_rank",))
    rows = [("hits_total", {"tp_rank": "0", "host": h, "zone": z, "model_name": m}, 0.0)
            for h, z, m in (("a", "1", "m"), ("b", "2", "n"))]
    moved = [(n, labels, 4.0) for n, labels, _ in rows]
    with pytest.raises(Unclassified) as e:
        _answer(r, _scrape(*rows), _scrape(*moved))
    assert str(e.value) == (
        "hits_total: label host, zone takes several values within one rank; the rules for this "
        "engine do not say whether those are ranks that each count every token (the least "
        "counts) or replicas serving different requests (they add up), so they are not added")


def test_a_rule_reads_its_family_with_or_without_a_counters_total():
    # The Rust crate and the text format may leave "_total" off; OpenMetrics adds it.
    found = _answer(rule("hits_total"), _scrape(("hits", {}, 1.0)), _scrape(("hits", {}, 4.0)))
    assert found.value == 3.0 and found.series == ["hits"]
    found = _answer(rule("hits"), _scrape(("hits_total", {}, 1.0)),
                    _scrape(("hits_total", {}, 5.0)))
    assert found.value == 4.0 and found.series == ["hits_total"]
    assert _answer(rule("hit"), _scrape(("hits_total", {}, 1.0)),
                   _scrape(("hits_total", {}, 5.0))) is None


def test_a_rank_label_a_series_lacks_reads_as_empty():
    r = rule("hits_total", shard=("tp_rank",), split=("dp_rank",))
    rows = [{"tp_rank": "0", "dp_rank": "0"}, {"tp_rank": "1"}]
    found = _answer(r, _scrape(*[("hits_total", x, 0.0) for x in rows]),
                    _scrape(*[("hits_total", x, 2.0) for x in rows]))
    assert list(found.ranks) == ["dp_rank=0,tp_rank=0", "dp_rank=,tp_rank=1"]


def test_a_series_without_the_tier_label_that_moved_is_unclassified_by_its_empty_value():
    r = rule("hits_total", tier="cache_hit_source", space="vllm.cache_hit_source", cls="storage")
    with pytest.raises(Unclassified) as e:
        _answer(r, _scrape(("hits_total", {}, 0.0)), _scrape(("hits_total", {}, 2.0)))
    assert str(e.value) == (
        'hits_total: cache_hit_source="" moved in the probe, and the engine\'s source read for '
        "kvgate does not say whether that tier is storage, memory or another host's memory")


@pytest.mark.parametrize("backends, named", [([], "(not named)"), (["file", "mooncake"],
                                                                   "file|mooncake")])
def test_a_tier_deferring_to_a_backend_none_or_several_name_is_unclassified(backends, named):
    r = rule("cached_total", tier="cache_source", space="sglang.cache_source", cls="storage",
             roster="info", backend="storage_backend")
    info = [("info", {"storage_backend": b}, 1.0) for b in backends]
    before = _scrape(("cached_total", {"cache_source": "storage"}, 0.0),
                     ("cached_total", {"cache_source": "odd"}, 0.0), *info)
    after = _scrape(("cached_total", {"cache_source": "storage"}, 6.0),
                    ("cached_total", {"cache_source": "odd"}, 1.0), *info)
    with pytest.raises(Unclassified) as e:
        _answer(r, before, after)
    assert str(e.value) == (
        f'cached_total: cache_source="storage" with storage_backend="{named}", cache_source="odd" '
        "moved in the probe, and the engine's source read for kvgate does not say whether that "
        "tier is storage, memory or another host's memory")


def _nvme(before: float, after: float) -> tuple[MetricSet, MetricSet]:
    return (_tiered({"disk": 0.0, "nvme9": before}), _tiered({"disk": 3.0, "nvme9": after}))


def test_an_unknown_tier_counts_against_the_rule_only_once_it_moved():
    r = rule("hits_total", tier="cache_hit_source", space="vllm.cache_hit_source", cls="storage")
    assert _answer(r, *_nvme(5.0, 5.0)).value == 3.0  # there, but did not move
    with pytest.raises(Unclassified, match='cache_hit_source="nvme9" moved'):
        _answer(r, *_nvme(5.0, 6.0))  # one token is a move


def test_an_unknown_tier_before_an_expected_restart_is_judged_by_its_move_after_it():
    r = rule("hits_total", tier="cache_hit_source", space="vllm.cache_hit_source", cls="storage")
    before, after = _nvme(5.0, 0.0)
    before.samples.append(Sample(name="process_start_time_seconds", value=1.0))
    after.samples.append(Sample(name="process_start_time_seconds", value=2.0))
    p = Pairing(before, after, restart_expected=True)
    assert answer(r, p).value == 3.0


def test_a_lazy_family_new_in_the_probe_is_classified_and_checked_as_it_says():
    r = rule("hits_total", tier="cache_hit_source", space="vllm.cache_hit_source", cls="storage",
             lazy=True)
    with pytest.raises(Unclassified, match='cache_hit_source="nvme9" moved'):
        _answer(r, _scrape(("other", {}, 1.0)), _tiered({"disk": 3.0, "nvme9": 1.0}),
                same_engine=True)
    unless = rule("hits_total", unless={"source": "unspecified"}, source="all", lazy=True)
    after = _scrape(("other", {}, 1.0), ("hits_total", {"source": "all"}, 8.0),
                    ("hits_total", {"source": "unspecified"}, 1.0))
    assert _answer(unless, _scrape(("other", {}, 1.0)), after, same_engine=True) is None


def test_a_label_a_series_lacks_reads_as_empty_as_in_promql():
    r = rule("hits_total", source="(?:disk)?")
    rows = [("hits_total", {"source": "disk"}, 0.0), ("hits_total", {}, 0.0),
            ("hits_total", {"source": "cpu"}, 0.0)]
    found = _answer(r, _scrape(*rows), _scrape(*[(n, labels, 2.0) for n, labels, _ in rows]))
    assert found.value == 4.0 and found.series == ['hits_total{source="disk"}', "hits_total"]


def test_one_rank_alone_is_no_ranks():
    r = rule("hits_total", shard=("tp_rank",))
    found = _answer(r, _scrape(*_tp({"0": 1.0})), _scrape(*_tp({"0": 5.0})))
    assert found == Found(value=4.0, series=['hits_total{tp_rank="0"}'])


def test_without_a_before_scrape_a_rule_answers_the_totals_and_shards_their_least():
    r = rule("hits_total", shard=("tp_rank",))
    found = answer(r, Pairing(None, _scrape(*_tp({"0": 5.0, "1": 7.0}))))
    assert (found.value, found.ranks) == (5.0, {"tp_rank=0": 5.0, "tp_rank=1": 7.0})


def test_series_that_vanished_are_an_error_naming_the_first():
    before = _scrape(*_tp({"0": 1.0, "1": 1.0, "2": 1.0}))
    with pytest.raises(PairingError) as e:
        _answer(rule("hits_total"), before, _scrape(*_tp({"0": 2.0})))
    assert str(e.value) == ('hits_total{tp_rank="1"} is in the before scrape but not in the '
                            "after scrape")
