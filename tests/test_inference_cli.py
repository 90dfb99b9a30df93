"""`kvgate sim serve` in one process and `kvgate loadgen` in another, as a user runs them."""

import json
import subprocess
import sys

import pytest
from _simserve import sim_serve

from gates.inference.ports import free_port
from gates.store import Store


@pytest.fixture
def simulator(tmp_path):
    with sim_serve(tmp_path / "kv", subprocess.PIPE) as (url, _):
        yield url


def loadgen(*args):
    return subprocess.run([sys.executable, "-m", "gates.cli", "loadgen", *args],
                          capture_output=True, text=True, timeout=120)


def test_loadgen_prints_latency_table_and_storage_attribution(simulator, tmp_path):
    out = tmp_path / "run.json"
    done = loadgen("--url", simulator, "--workload", "cold-recovery", "--requests", "4",
                   "--context-tokens", "512", "--chunk-tokens", "16", "--concurrency", "2",
                   "--json", str(out), "--out", str(tmp_path / "store"))
    assert done.returncode == 0, done.stderr
    for text in ("TTFT p50", "TPOT (= ITL) mean", "inter-chunk latency p99",
                 "output throughput (span)", "storage reads (kvgate-sim): 2,048 tokens of "
                 "2,048 expected", "self-check"):
        assert text in done.stdout
    body = json.loads(out.read_text())
    assert body["summary"]["outcomes"]["ok"] == 4
    assert len(body["probe"]["records"]) == 4
    with Store(tmp_path / "store") as store:
        [run] = store.db.execute("SELECT run_id FROM runs").fetchall()
        stored = store.requests(run["run_id"])
    phases = [r.phase for r in stored]
    assert phases.count("probe") == 4 and phases.count("seed") == 4  # warm-up, seed, probe


def test_loadgen_against_a_dead_endpoint_says_so_and_exits_2():
    done = loadgen("--url", f"http://127.0.0.1:{free_port()}", "--model", "m")
    assert done.returncode == 2 and "127.0.0.1" in done.stderr


def test_a_failed_model_lookup_is_one_unwrapped_line_naming_the_url():
    url = f"http://127.0.0.1:{free_port()}/" + "a-base-path-long-enough-to-wrap-at-80-columns" * 2
    done = loadgen("--url", url)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr
    assert f"GET {url}/v1/models: cannot connect" in lines[0] and "--model NAME" in lines[0]


def test_loadgen_shared_prefix_open_loop(simulator):
    done = loadgen("--url", simulator, "--workload", "shared-prefix", "--requests", "8",
                   "--context-tokens", "64", "--rate", "50")
    assert done.returncode == 0, done.stderr
    assert "requests sent" in done.stdout and "│ 8" in done.stdout


@pytest.mark.parametrize("flag, value", [("--read-limit", "bogus"), ("--faults", '{"nope": 1}')])
def test_sim_serve_refuses_bad_fault_settings(flag, value):
    done = subprocess.run([sys.executable, "-m", "gates.cli", "sim", "serve", flag, value],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "bad --faults or --read-limit" in done.stderr
    assert "Traceback" not in done.stderr
