"""The page cache dropped before a probe, and the storage reads of an engine's process tree."""

import os
import subprocess
import sys
import time

import psutil

from gates.inference import drop_page_cache, read_bytes_delta, tree_read_bytes
from gates.inference.kv_dir import MARKER


def test_drop_page_cache_walks_the_kv_dir_but_not_the_marker(tmp_path):
    (tmp_path / MARKER).write_text("marker")
    (tmp_path / "ctx-0000.bin").write_bytes(b"x" * 4096)
    (tmp_path / "0a1b" / "deeper").mkdir(parents=True)  # vLLM's ExampleConnector: a folder
    (tmp_path / "0a1b" / "model.layers.0.self_attn.attn.safetensors").write_bytes(b"y" * 8192)
    (tmp_path / "0a1b" / "deeper" / "z").write_bytes(b"z")
    said = drop_page_cache(tmp_path).how
    assert said.startswith("posix_fadvise(DONTNEED) after fsync on 3 KV files (0.0 MB)")
    assert str(tmp_path) in said


def test_a_child_s_reads_count_for_the_tree(tmp_path):
    """A real child process reads a file after its pages were dropped: the tree's delta sees it."""
    data = tmp_path / "kv.bin"
    data.write_bytes(os.urandom(4 << 20))
    go = tmp_path / "go"
    child = subprocess.Popen([sys.executable, "-c", f"""
import os, time
while not os.path.exists({str(go)!r}):
    time.sleep(0.01)
with open({str(data)!r}, 'rb') as f:
    while f.read(1 << 20):
        pass
time.sleep(30)
"""])
    parent = psutil.Process(os.getpid())
    try:
        deadline = time.monotonic() + 30
        while child.pid not in [c.pid for c in parent.children()] and time.monotonic() < deadline:
            time.sleep(0.01)
        drop_page_cache(tmp_path)
        before = tree_read_bytes(os.getpid())
        assert before is not None and child.pid in before
        go.write_text("")
        after = before
        while time.monotonic() < deadline:
            after = tree_read_bytes(os.getpid())
            if read_bytes_delta(before, after) >= 4 << 20:
                break
            time.sleep(0.05)
        # Reads of a file whose pages were dropped reach the storage layer: >= its size.
        assert read_bytes_delta(before, after) >= 4 << 20
    finally:
        child.kill()
        child.wait()


def test_a_gone_process_and_new_pids_are_not_credited():
    assert tree_read_bytes(None) is None
    assert read_bytes_delta(None, {1: 5}) is None
    # pid 7 started mid-probe: its whole counter predates nothing we can see, so it is left out.
    assert read_bytes_delta({1: 10, 2: 5}, {1: 30, 2: 5, 7: 10**9}) == 20
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert tree_read_bytes(dead.pid) is None


def test_the_kv_files_are_hashed_before_the_drop_and_read_back_after(tmp_path):
    """The exact signal beside the outputs (#29): bytes as stored vs bytes read back."""
    import hashlib

    from gates.inference import read_back

    (tmp_path / MARKER).write_text("marker")
    layers = {f"0a1b/model.layers.{i}.safetensors": os.urandom(65536 + i) for i in range(4)}
    for name, data in layers.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(data)
    stored: dict[str, str] = {}
    drop_page_cache(tmp_path, stored)
    assert stored == {n: hashlib.sha256(d).hexdigest() for n, d in layers.items()}
    assert read_back(tmp_path, stored).model_dump() == {
        "files": 4, "bytes": sum(map(len, layers.values())), "changed": [], "vanished": 0,
        "gone": []}
    # One byte rots at rest, one file is removed by the engine, the probe writes a new one.
    rotted = bytearray(layers["0a1b/model.layers.2.safetensors"])
    rotted[40000] ^= 1
    (tmp_path / "0a1b/model.layers.2.safetensors").write_bytes(bytes(rotted))
    (tmp_path / "0a1b/model.layers.3.safetensors").unlink()
    (tmp_path / "0a1b/model.layers.9.safetensors").write_bytes(b"new")
    found = read_back(tmp_path, stored)
    assert found.changed == ["0a1b/model.layers.2.safetensors"]
    assert (found.files, found.vanished) == (3, 1)
    assert found.gone == ["0a1b/model.layers.3.safetensors"]
