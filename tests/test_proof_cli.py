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


def with_vllm(tmp_path: Path, name: str, when: str) -> str:
    """An LMCache or KVBM recording with the vLLM worker's own families as a second target."""
    path = tmp_path / f"{name}.{when}.prom"
    path.write_text((DATA / f"{name}.{when}.prom").read_text()
                    + (DATA / f"vllm.{when}.prom").read_text())
    return str(path)


def test_eight_healthy_ranks_are_judged_each_not_summed(capsys, tmp_path):
    common = ["--engine", "lmcache", "--json", "--expected-tokens", "8192", "--ranks", "8",
              "--device-bytes", str(NEEDED), "--kv-bytes-per-token", str(KV_PER_TOKEN)]
    code, out = proof(capsys, *common, "--before", with_vllm(tmp_path, "lmcache-tp8", "before"),
                      "--after", with_vllm(tmp_path, "lmcache-tp8", "after"))
    body = json.loads(out)
    ranks = [s for s in body["signals"] if s["signal"].startswith("rank ")]
    assert len(ranks) == 8 and all(s["agreement"] == "agrees" for s in ranks)
    engine = body["signals"][0]
    assert engine["value"] <= 8192, "eight ranks' counters were summed"
    assert "tier-blind" in engine["caveat"]
    assert code == 0, out


def test_lmcache_alone_has_no_gpu_hit_counter_so_its_proof_is_inconclusive(capsys):
    # The lmcache:* families alone say nothing of the GPU cache: G3 gives an ERROR for the
    # missing GPU-hit counter, so the offline proof must not pass either (issue #25, item 7).
    code, out = proof(capsys, "--engine", "lmcache",
                      "--before", str(DATA / "lmcache-tp8.before.prom"),
                      "--after", str(DATA / "lmcache-tp8.after.prom"),
                      "--expected-tokens", "8192", "--ranks", "8",
                      "--device-bytes", str(NEEDED), "--kv-bytes-per-token", str(KV_PER_TOKEN))
    assert code == 2 and "no GPU-cache hit counter" in out, out


def test_kvbm_passes_only_with_the_target_devices_agreeing(capsys, tmp_path):
    # KVBM counts an onboard before the transfer: only the target's own block devices can
    # show the bytes came off the storage; its NICs may carry other traffic (issue #25 item 4).
    common = ["--engine", "dynamo-kvbm", "--before", with_vllm(tmp_path, "dynamo-kvbm", "before"),
              "--after", with_vllm(tmp_path, "dynamo-kvbm", "after"), "--expected-tokens", "8192",
              "--block-tokens", "16", "--kv-bytes-per-token", str(KV_PER_TOKEN)]
    code, out = proof(capsys, *common)
    assert code == 2 and "INCONCLUSIVE" in out, out
    code, out = proof(capsys, *common, "--nic-bytes", str(NEEDED))
    assert code == 2 and "cannot name the target's devices" in out, out
    code, out = proof(capsys, *common, "--device-bytes", str(NEEDED))
    assert code == 0 and "PASS" in out, out
    code, out = proof(capsys, *common, "--device-bytes", str(NEEDED // 10))
    assert code == 1 and "block devices" in out, out


def test_the_scrape_targets_of_an_arm_are_given_one_by_one(capsys):
    # The KVBM leader's port and the vLLM worker's /metrics, as G3 scrapes an arm's targets.
    code, out = proof(capsys, "--engine", "dynamo-kvbm",
                      "--before", str(DATA / "dynamo-kvbm.before.prom"),
                      "--before", str(DATA / "vllm.before.prom"),
                      "--after", str(DATA / "dynamo-kvbm.after.prom"),
                      "--after", str(DATA / "vllm.after.prom"), "--expected-tokens", "8192",
                      "--block-tokens", "16", "--kv-bytes-per-token", str(KV_PER_TOKEN),
                      "--device-bytes", str(NEEDED))
    assert code == 0, out
    code, out = proof(capsys, "--engine", "vllm", "--before", str(DATA / "vllm.before.prom"),
                      "--after", str(DATA / "vllm.after.prom"),
                      "--after", str(DATA / "vllm.after.prom"), "--expected-tokens", "8192")
    assert code == 2 and "1 --before but 2 --after" in out, out


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


# ---- large files (issue #25 item 8: 50 MiB took 164 s and 1.26 GB, with no limit) -----------

def test_a_file_over_the_size_limit_is_refused_naming_it(capsys, tmp_path):
    from gates.proof import MAX_EXPOSITION

    huge = tmp_path / "huge.prom"
    with huge.open("wb") as f:
        f.truncate(MAX_EXPOSITION + 1)  # sparse: no disk written
    code, out = proof(capsys, "--engine", "vllm", "--before", str(huge), "--after", str(huge),
                      "--expected-tokens", "10")
    assert code == 2 and "huge.prom" in out and "64 MiB kvgate reads" in out, out


def test_a_large_exposition_streams_in_bounded_memory(capsys, tmp_path):
    # 2 MiB of families no rule reads, before the vLLM recording: they are checked line by
    # line and dropped, so memory stays far below the file's size (bench/parse_memory.py).
    import tracemalloc

    noise = "".join(f'# TYPE noise_{f}_total counter\n' + "".join(
        f'noise_{f}_total{{pod="pod-{i:05d}",path="/srv/data/{i}",code="200"}} {i}.0\n'
        for i in range(350)) for f in range(100))
    (tmp_path / "after.prom").write_text(noise + (DATA / "vllm.after.prom").read_text())
    assert (tmp_path / "after.prom").stat().st_size > 2 * 2**20
    tracemalloc.start()
    try:
        code, out = proof(capsys, "--engine", "vllm", "--before", str(DATA / "vllm.before.prom"),
                          "--after", str(tmp_path / "after.prom"), "--expected-tokens", "8192",
                          "--kv-bytes-per-token", str(KV_PER_TOKEN),
                          "--device-bytes", str(NEEDED), "--json")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert json.loads(out)["signals"][0]["value"] == 8192, out
    assert peak < 2**20, f"{peak / 2**20:.1f} MiB for a 2 MiB file"
