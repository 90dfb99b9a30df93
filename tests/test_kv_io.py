"""G1 tries the engine's own KV I/O on the target: real files, real flags, real filesystems.

A loop device with 4096-byte logical sectors refuses O_DIRECT transfers that are 512-byte but not
4096-byte aligned (EINVAL), as an NVMe namespace formatted with 4 KiB LBAs under XFS does; the
development VM's own disk (512-byte logical sectors) takes them.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from _loopdev import loop_device, mounted, need_root
from faultfs import Fault
from faultfs.fixture import faultfs  # noqa: F401  (the fixture)

from gates.core.configuration import Site, load_site
from gates.core.verdicts import Outcome
from gates.storage.kvio import judge, patterns
from gates.storage.kvio_run import try_pattern

REPO = Path(__file__).resolve().parent.parent
# 16 tokens x 1,056 B = 16,896 B per chunk: 33 x 512, not a multiple of 4096.
ODD = {"chunk_tokens": 16, "kv_bytes_per_token": 1056}


def site_with(engine: str, env: dict | None = None, **arm) -> Site:
    candidate = {"kind": "launch", "command": ["engine", "{port}"], "engine": engine,
                 "env": env or {}, **arm}
    return Site.model_validate({"site": {"name": "kv-io"}, "target": {"directory": "/x"},
                                "fio": {"file_size": "1MiB"}, "arms": {"candidate": candidate},
                                "workload": {"chunk_tokens": ODD["chunk_tokens"]}})


def tried(site: Site, where: Path, files: int = 64, bytes_per_token: int = 1056):
    found, unknown = patterns(site, bytes_per_token)
    return judge([try_pattern(p, where, files=files) for p in found], unknown)


@pytest.fixture
def sector_4k(tmp_path):
    """An ext4 filesystem on a loop device with 4096-byte logical sectors."""
    need_root("mkfs.ext4")
    with loop_device(tmp_path / "4k.img", 64 * 1024**2, sector_size=4096) as device:
        import subprocess
        done = subprocess.run(["mkfs.ext4", "-q", "-F", device], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        with mounted(device, tmp_path / "mnt") as mountpoint:
            yield mountpoint


def test_vllm_native_o_direct_fails_on_4k_sectors_naming_einval(sector_4k):
    result = tried(site_with("vllm-native"), sector_4k)
    assert result.outcome is Outcome.FAIL
    assert "O_DIRECT write of 16,896 B failed: EINVAL" in result.note
    assert "arms.candidate vllm-native: the fs tier's O_DIRECT (always on)" in result.note


def test_the_same_pattern_passes_on_512_byte_sectors(tmp_path):
    result = tried(site_with("vllm-native"), tmp_path)
    assert result.outcome is Outcome.PASS, result.note
    assert "64 files written and read back by 8 threads" in result.note


def test_dynamo_kvbm_blocks_in_one_o_direct_file_fail_on_4k_sectors(sector_4k):
    result = tried(site_with("dynamo-kvbm", kv_block_tokens=16), sector_4k)
    assert result.outcome is Outcome.FAIL
    assert "kv-blocks.bin@16896: O_DIRECT write of 16,896 B failed: EINVAL" in result.note
    assert "DYN_KVBM_DISK_DISABLE_O_DIRECT unset: O_DIRECT" in result.note


def test_lmcache_use_odirect_on_an_unaligned_chunk_is_a_silent_buffered_fallback(tmp_path):
    env = {"LMCACHE_EXTRA_CONFIG": '{{"use_odirect": true}}', "LMCACHE_CHUNK_SIZE": "16"}
    result = tried(site_with("lmcache", env), tmp_path)
    assert result.outcome is Outcome.FAIL
    assert "silent buffered fallback: 16,896 B per chunk is not a multiple of the filesystem " \
        "block (4096 B" in result.note
    assert "LMCACHE_EXTRA_CONFIG use_odirect = true" in result.note
    aligned = tried(site_with("lmcache", env), tmp_path, bytes_per_token=4096)
    assert aligned.outcome is Outcome.PASS, aligned.note


def test_short_writes_and_eio_on_the_fault_filesystem_fail(faultfs):  # noqa: F811
    faultfs.set(Fault(kind="short", op="write", path="/.kvgate-kv-io/chunk-0003.kv"),
                Fault(kind="error", op="read", errno=errno.EIO,
                      path="/.kvgate-kv-io/chunk-0005.kv"))
    result = tried(site_with("sglang"), faultfs.mountpoint, files=8)
    assert result.outcome is Outcome.FAIL
    assert "chunk-0003.kv: write of 16,896 B was short" in result.note
    assert "chunk-0005.kv: read of 16,896 B failed: EIO" in result.note
    assert "HiCacheFile (buffered)" in result.note


def test_an_engine_kvgate_cannot_name_is_an_error():
    result = tried(site_with("auto"), Path("/nonexistent"))
    assert result.outcome is Outcome.ERROR
    assert "arms.candidate engine = 'auto'" in result.note


def test_the_embedded_default_passes_on_its_target():
    site, _ = load_site(REPO / "site.toml")
    target = site.target.directory
    target.mkdir(parents=True, exist_ok=True)
    found, unknown = patterns(site, 1024)
    assert [p.engine for p in found] == ["kvgate-sim"] and not unknown
    result = judge([try_pattern(p, target) for p in found], unknown)
    assert result.outcome is Outcome.PASS, result.note
    assert "256 files written and read back" in result.note
    assert not (target / ".kvgate-kv-io").exists()


def test_every_example_names_an_engine_whose_kv_io_kvgate_knows():
    from gates.model import kv_geometry

    for path in sorted((REPO / "examples").glob("*.toml")):
        site, _ = load_site(path)
        per_token = site.workload.kv_bytes_per_token or kv_geometry(
            site.sizing.model, site.sizing.dtype, site.sizing.tp).stored_bytes_per_token
        found, unknown = patterns(site, per_token)
        assert found and not unknown, (path.name, unknown)
        for p in found:  # the shipped chunk sizes are whole 4 KiB blocks: no fallback
            assert p.file_bytes % 4096 == 0, (path.name, p.describe())


def test_o_direct_on_a_target_whose_residency_cannot_be_seen_is_an_error(faultfs):  # noqa: F811
    """The fault filesystem (FUSE, direct_io) takes O_DIRECT but refuses a shared mmap (ENODEV),
    so whether it honours O_DIRECT cannot be seen: not a PASS (before: a note, and PASS)."""
    result = tried(site_with("vllm-native"), faultfs.mountpoint, files=8, bytes_per_token=4096)
    assert result.outcome is Outcome.ERROR, result.note
    assert "page-cache residency after O_DIRECT writes not measured: mmap of " in result.note
    assert "ENODEV" in result.note or "No such device" in result.note, result.note
