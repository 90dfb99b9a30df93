"""`python -m gates.sim` is a standalone program: it loads nothing of kvgate outside gates.sim."""

import argparse
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from gates.core.quantities import UnitError, parse_rate, parse_size
from gates.sim.cli import bandwidth, paced_profile, size, tiered_profile
from gates.sim.model import get_profile

REPO = Path(__file__).resolve().parent.parent
# Generous bounds: the machine running the tests may be busy; nothing here is a timing check.
TIMEOUT = 60


def kvgate_outside_sim(names):
    """The kvgate modules among ``names`` that are neither the package root nor gates.sim."""
    return sorted(n for n in names if n.startswith("gates.") and n != "gates.sim"
                  and not n.startswith("gates.sim."))


def python(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=TIMEOUT)


def test_importing_the_entry_loads_only_the_simulator():
    done = python("-c", "import json, sys, gates.sim.__main__; "
                        "print(json.dumps(list(sys.modules)))")
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert "gates.sim.cli" in loaded and "gates" in loaded
    assert kvgate_outside_sim(loaded) == []


def test_importtime_of_help_lists_no_kvgate_module_outside_the_simulator():
    done = python("-X", "importtime", "-m", "gates.sim", "--help")
    assert done.returncode == 0, done.stderr
    # stderr lines: "import time: self [us] | cumulative | name", the name indented by depth.
    names = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
             if line.startswith("import time:") and "|" in line]
    assert "gates.sim.server" in names
    assert kvgate_outside_sim(names) == []


def test_help_shows_the_options_and_examples():
    done = python("-m", "gates.sim", "--help")
    assert done.returncode == 0, done.stderr
    for text in ("--profile", "--kv-dir", "--host", "--port", "--faults", "--read-limit",
                 "--prefill-tokens-per-s", "examples:",
                 "python -m gates.sim --profile tiny --kv-dir /tmp/kv --port 8000"):
        assert text in done.stdout


@pytest.mark.parametrize("flag, value, said", [
    ("--read-limit", "bogus", "bad --faults or --read-limit"),
    ("--faults", '{"nope": 1}', "bad --faults or --read-limit"),
    ("--prefill-tokens-per-s", "0", "finite number above 0, e.g. 2000, not '0'"),
    ("--prefill-tokens-per-s", "nan", "finite number above 0, e.g. 2000, not 'nan'"),
    ("--prefill-tokens-per-s", "inf", "finite number above 0, e.g. 2000, not 'inf'"),
    ("--port", "99999", "from 0 (any free port) to 65535, not '99999'"),
    ("--port", "-1", "from 0 (any free port) to 65535, not '-1'"),
    ("--port", "80.5", "from 0 (any free port) to 65535, not '80.5'"),
    ("--cpu-tier", "3 parsecs", "'3 parsecs' is not a size: write bytes or a size"),
    ("--gpu-cache", "0x10", "'0x10' is not a size"),
    ("--gpu-cache", "2TiB", "more than the 1 TiB a simulated cache may hold")])
def test_bad_settings_exit_2_naming_the_value_without_a_traceback(flag, value, said):
    done = python("-m", "gates.sim", flag, value)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_taken_port_exits_2_naming_it_without_a_traceback(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        done = python("-m", "gates.sim", "--port", str(taken), "--kv-dir", str(tmp_path / "kv"))
    assert done.returncode == 2, done.stderr
    assert f"cannot serve on 127.0.0.1:{taken} with KV tier {tmp_path / 'kv'}" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_paced_profile_changes_the_prefill_speed_alone():
    tiny = get_profile("tiny")
    paced = paced_profile("tiny", 2000)
    assert paced.prefill_tokens_per_s == 2000
    assert paced.model_dump() | {"prefill_tokens_per_s": tiny.prefill_tokens_per_s} == \
        tiny.model_dump()
    assert paced_profile("tiny", None) == tiny
    with pytest.raises(ValueError):
        paced_profile("tiny", -5)


@pytest.mark.parametrize("text", ["20MB/s", "20 MB/s", "800MiB/s", "5.2 GB/s", ".5GB/s",
                                  "100 Gbit/s", "10Gb/s", "25Gbps", "1 TiB/s", "7 b/s", "gb/s",
                                  "20 Mib/s", "3 furlongs/s", "MB/s", "-1MB/s", "9" * 400 + "TB/s"])
def test_read_limit_reads_bandwidth_exactly_like_the_core(text):
    try:
        expected = parse_rate(text)
    except UnitError:
        with pytest.raises(ValueError):
            bandwidth(text)
    else:
        assert bandwidth(text) == expected


@pytest.mark.parametrize("text", ["12MiB", "12 MiB", "24MB", "1.5GiB", ".5KiB", "16k", "4096",
                                  "7B", "3 GB", "3 parsecs", "MiB", "-1MiB", "1e3MiB"])
def test_cache_sizes_read_exactly_like_the_core(text):
    try:
        expected = parse_size(text)
    except UnitError:
        with pytest.raises(argparse.ArgumentTypeError):
            size(text)
    else:
        assert size(text) == expected


def test_a_tiered_profile_keeps_whole_chunks_and_the_rest():
    tiny = get_profile("tiny")
    tiered = tiered_profile(tiny, 12 * 1024**2, 24 * 1024**2 + 5)
    assert (tiered.gpu_cache_chunks, tiered.cpu_tier_chunks) == (768, 1536)
    assert tiered_profile(tiny, None, 0).model_dump() == tiny.model_dump()
    assert tiered.model_dump() | {"gpu_cache_chunks": 64, "cpu_tier_chunks": 0} == \
        tiny.model_dump()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, dict(response.headers), response.read().decode()


def test_standalone_simulator_serves_health_models_and_metrics(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "gates.sim", "--profile", "tiny", "--kv-dir",
                             str(tmp_path / "kv"), "--port", str(port),
                             "--prefill-tokens-per-s", "2000"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if get(url + "/health")[0] == 200:
                    break
            except OSError:
                assert time.monotonic() < deadline, f"no /health within {TIMEOUT} s"
                time.sleep(0.1)
        status, headers, body = get(url + "/v1/models")
        assert status == 200 and headers["X-KVGate-Simulator"] == "1"
        assert json.loads(body)["data"][0]["id"] == "kvgate-sim-tiny"
        status, _, body = get(url + "/metrics")
        assert status == 200 and "kvgate_sim_storage_read_bytes_total" in body
        assert "vllm:prompt_tokens_total" in body
        status, _, body = get(url + "/sim/info")
        assert status == 200 and json.loads(body)["profile"]["prefill_tokens_per_s"] == 2000
    finally:
        proc.terminate()  # our own child, by its handle
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
