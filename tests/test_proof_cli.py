"""`kvgate proof` on the recorded expositions (tests/data/metrics/README.md says whence)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gates.cli import main

DATA = Path(__file__).parent / "data" / "metrics"
KV_PER_TOKEN = 131072
NEEDED = 8192 * KV_PER_TOKEN  # the probe's 8,192 context tokens of KV


def proof(capsys, *args: str) -> tuple[int, str]:
    code = main(["proof", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_eight_ranks_with_one_at_zero_fail_naming_the_rank(capsys):
    code, out = proof(capsys, "--engine", "lmcache",
                      "--before", str(DATA / "lmcache-tp8.before.prom"),
                      "--after", str(DATA / "lmcache-tp8-rank3-zero.after.prom"),
                      "--expected-tokens", "8192", "--ranks", "8",
                      "--device-bytes", str(NEEDED), "--kv-bytes-per-token", str(KV_PER_TOKEN))
    assert code == 1, out
    assert "FAIL" in out and "worker_id=3" in out


def test_eight_healthy_ranks_are_judged_each_not_summed(capsys):
    code, out = proof(capsys, "--engine", "lmcache", "--json",
                      "--before", str(DATA / "lmcache-tp8.before.prom"),
                      "--after", str(DATA / "lmcache-tp8.after.prom"),
                      "--expected-tokens", "8192", "--ranks", "8",
                      "--device-bytes", str(NEEDED), "--kv-bytes-per-token", str(KV_PER_TOKEN))
    body = json.loads(out)
    ranks = [s for s in body["signals"] if s["signal"].startswith("rank ")]
    assert len(ranks) == 8 and all(s["agreement"] == "agrees" for s in ranks)
    engine = body["signals"][0]
    assert engine["value"] <= 8192, "eight ranks' counters were summed"
    assert "tier-blind" in engine["caveat"]
    assert code == 0, out


def test_kvbm_passes_only_with_the_storage_side_agreeing(capsys):
    common = ["--engine", "dynamo-kvbm", "--before", str(DATA / "dynamo-kvbm.before.prom"),
              "--after", str(DATA / "dynamo-kvbm.after.prom"), "--expected-tokens", "8192",
              "--block-tokens", "16", "--kv-bytes-per-token", str(KV_PER_TOKEN)]
    code, out = proof(capsys, *common)
    assert code == 2 and "INCONCLUSIVE" in out, out
    code, out = proof(capsys, *common, "--nic-bytes", str(NEEDED))
    assert code == 0 and "PASS" in out, out
    code, out = proof(capsys, *common, "--nic-bytes", str(NEEDED // 10))
    assert code == 1 and "storage NICs" in out, out


@pytest.mark.parametrize("text", ["vllm:x{a=\"1\" 3\n", "garbage line here\n"])
def test_a_garbled_exposition_is_an_error_naming_the_file_and_line(capsys, tmp_path, text):
    bad = tmp_path / "bad.prom"
    bad.write_text(text)
    code, out = proof(capsys, "--engine", "vllm", "--before", str(bad), "--after", str(bad),
                      "--expected-tokens", "10")
    assert code == 2 and "bad.prom" in out and "line 1" in out and "Traceback" not in out


def test_a_missing_file_is_named(capsys, tmp_path):
    code, out = proof(capsys, "--engine", "vllm", "--before", str(tmp_path / "no.prom"),
                      "--after", str(tmp_path / "no.prom"), "--expected-tokens", "10")
    assert code == 2 and "no.prom" in out


def test_hits_of_the_cpu_tier_are_never_storage_reads(capsys, tmp_path):
    # The connector said the probe's 8,192 tokens came from the host (DRAM) tier: vLLM's
    # external_kv_transfer still counts them, the CPU-tier control names what really answered.
    after = (DATA / "vllm.after.prom").read_text().replace(
        'source="host"} 0.0', 'source="host"} 8192.0')
    (tmp_path / "after.prom").write_text(after)
    args = ["--engine", "vllm", "--before", str(DATA / "vllm.before.prom"),
            "--after", str(tmp_path / "after.prom"), "--expected-tokens", "8192",
            "--device-bytes", str(NEEDED), "--kv-bytes-per-token", str(KV_PER_TOKEN)]
    code, out = proof(capsys, *args)
    assert code == 1 and "CPU-tier hits during the probe" in out, out
    args[5] = str(DATA / "vllm.after.prom")
    code, out = proof(capsys, *args)
    assert "CPU-tier hits during the probe = 0 %" in out, out
