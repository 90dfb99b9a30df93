"""The engine's own KV I/O, as G1 tries it on the target before G2: which flags, sizes and file
layout each engine's storage tier uses, and the G1 verdict on trying them. Pure.

Each engine's pattern is read from its source (cited beside it); the sizes follow from the arm,
[workload] chunk_tokens and the KV bytes per token of the model. A pattern kvgate does not know
is named, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..core.configuration import Arm, Site
from ..core.verdicts import Limit, Measurement

NAME = "Engine KV I/O on the target"
FILES = 256  # a few hundred files, as a seeded set of contexts leaves behind
THREADS = 8  # written and read concurrently, as the engines' worker pools do


@dataclass(frozen=True)
class KvIoPattern:
    """How one engine writes and reads its KV files."""

    arm: str
    engine: str
    file_bytes: int
    direct_write: bool  # O_DIRECT on the writes
    direct_read: bool
    # The engine itself switches to buffered I/O when a file's size is not a multiple of the
    # filesystem block (statvfs f_bsize), saying nothing: LMCache's local disk backend.
    fallback_unaligned: bool = False
    one_file: bool = False  # all blocks at offsets of one preallocated file (Dynamo KVBM)
    setting: str = ""  # the engine setting that decides the flags, named in a failure
    source: str = ""  # where in the engine's source the flags come from

    def describe(self) -> str:
        """The pattern in a line: flags, chunk size, layout, the setting and its source."""
        flags = "/".join(f"{'O_DIRECT' if d else 'buffered'} {w}" for d, w in
                         ((self.direct_write, "writes"), (self.direct_read, "reads")))
        layout = "blocks at offsets of one file" if self.one_file else "one file per chunk"
        return (f"arms.{self.arm} ({self.engine}): {flags}, {self.file_bytes:,} B per chunk, "
                f"{layout} ({self.setting}; {self.source})")


def _lmcache_direct(arm: Arm) -> bool:
    # An arm's env is a template: literal braces are doubled (site.toml, examples/).
    text = arm.env.get("LMCACHE_EXTRA_CONFIG", "").replace("{{", "{").replace("}}", "}")
    try:
        extra = json.loads(text or "{}")
    except ValueError:
        return False
    return isinstance(extra, dict) and extra.get("use_odirect") is True


def pattern(name: str, arm: Arm, site: Site, kv_bytes_per_token: int) -> KvIoPattern | str:
    """The arm's KV I/O pattern, or why kvgate cannot say what it is."""
    per_rank = kv_bytes_per_token // max(1, arm.tp)
    chunk = site.workload.chunk_tokens
    common = {"arm": name, "engine": arm.engine}
    match arm.engine:
        case "lmcache":
            # LMCache 0.5.x lmcache/v1/storage_backend/local_disk_backend.py write_file/read_file
            # (commit 2bbf159): O_DIRECT only with extra_config use_odirect and a size that is a
            # multiple of statvfs f_bsize, else open(path, "wb") / "rb" without a word; one
            # <key>.pt file per chunk per worker (TP rank).
            tokens = int(arm.env.get("LMCACHE_CHUNK_SIZE", chunk) or chunk)
            direct = _lmcache_direct(arm)
            return KvIoPattern(**common, file_bytes=tokens * per_rank, direct_write=direct,
                               direct_read=direct, fallback_unaligned=direct,
                               setting=f"LMCACHE_EXTRA_CONFIG use_odirect = "
                               f"{str(direct).lower()}, LMCACHE_CHUNK_SIZE {tokens}",
                               source="lmcache/v1/storage_backend/local_disk_backend.py")
        case "vllm-native":
            # vllm/v1/kv_offload/tiering/fs/io.py store_block/load_block (commit ddd2c39):
            # O_CREAT|O_EXCL|O_WRONLY|O_TRUNC|O_DIRECT to a temp file, os.replace; reads
            # O_RDONLY|O_DIRECT, a short read raises; one file per block, no fallback.
            return KvIoPattern(**common, file_bytes=chunk * per_rank, direct_write=True,
                               direct_read=True, setting="the fs tier's O_DIRECT (always on)",
                               source="vllm/v1/kv_offload/tiering/fs/io.py")
        case "sglang":
            # python/sglang/srt/mem_cache/hicache_storage.py HiCacheFile.set/get (commit
            # 001067f): numpy tofile() to a temp file, os.replace; open(..., "rb",
            # buffering=0).readinto; one <key>_<model>_<tp_rank>_<tp_size>.bin per page.
            return KvIoPattern(**common, file_bytes=chunk * per_rank, direct_write=False,
                               direct_read=False, setting="HiCacheFile (buffered)",
                               source="python/sglang/srt/mem_cache/hicache_storage.py")
        case "dynamo-kvbm":
            # lib/llm/src/block_manager/storage/disk.rs DiskStorage::new (commit 5385df5): one
            # mkostemp file dynamo-kvbm-disk-cache-XXXXXX in DYN_KVBM_DISK_CACHE_DIR, O_DIRECT
            # set by fcntl unless DYN_KVBM_DISK_DISABLE_O_DIRECT, fallocate'd; blocks at offsets.
            direct = "DYN_KVBM_DISK_DISABLE_O_DIRECT" not in arm.env
            tokens = arm.kv_block_tokens or chunk
            return KvIoPattern(**common, file_bytes=tokens * per_rank, direct_write=direct,
                               direct_read=direct, one_file=True,
                               setting="DYN_KVBM_DISK_DISABLE_O_DIRECT "
                               + ("unset: O_DIRECT" if direct else "set: buffered"),
                               source="lib/llm/src/block_manager/storage/disk.rs")
        case "kvgate-sim":
            # gates/sim/tier.py KvTier.write_chunk (buffered, temp + replace) and read_direct
            # (O_DIRECT, page-aligned; it says so and reads buffered where O_DIRECT is refused).
            return KvIoPattern(**common, file_bytes=chunk * kv_bytes_per_token,
                               direct_write=False, direct_read=True,
                               setting="the simulator's O_DIRECT reads",
                               source="gates/sim/tier.py")
        case "vllm" | "llamacpp":
            # vLLM ExampleConnector: safetensors save_file/load_file per layer (gates/engines/
            # vllm/arms.py); llama.cpp slot save: one file per slot. Both buffered.
            return KvIoPattern(**common, file_bytes=chunk * per_rank, direct_write=False,
                               direct_read=False, setting=f"{arm.engine} (buffered files)",
                               source="gates/engines/vllm/arms.py" if arm.engine == "vllm"
                               else "llama.cpp tools/server slot save")
    return (f"arms.{name} engine = {arm.engine!r}: kvgate does not know which I/O flags it "
            "uses for its KV files; name the engine (engine = lmcache, vllm-native, sglang, "
            "dynamo-kvbm, ...)")


def patterns(site: Site, kv_bytes_per_token: int) -> tuple[list[KvIoPattern], list[str]]:
    """The patterns of the arms whose KV lands on the array (the candidate), and what is unknown."""
    arm = site.arms.get("candidate")
    if arm is None:
        return [], []
    found = pattern("candidate", arm, site, kv_bytes_per_token)
    return ([found], []) if isinstance(found, KvIoPattern) else ([], [found])


@dataclass(frozen=True)
class KvIoResult:
    """What trying one pattern on the target found."""

    pattern: KvIoPattern
    files: int
    failures: list[str]  # each names the file, the operation, the setting and the errno
    note: str = ""
    unmeasured: str = ""  # a property the try could not see (O_DIRECT honoured), with why


def judge(results: list[KvIoResult], unknown: list[str], why_not: str = "") -> Measurement:
    """G1's verdict: a failure of the engine's own I/O on the target is a FAIL naming it."""
    limit = Limit.at_most(0, "failures", key="g1.kv_io")
    if why_not:
        return Measurement.not_applicable(NAME, why_not)
    if unknown:
        return Measurement.error(NAME, "; ".join(unknown), limit)
    failures = [f for r in results for f in r.failures]
    done = "; ".join(f"{r.pattern.describe()}: {r.files} files written and read back by "
                     f"{THREADS} threads" + (f" ({r.note})" if r.note else "") for r in results)
    shown = failures[:5] + ([f"... {len(failures) - 5} more"] if len(failures) > 5 else [])
    unseen = [r.unmeasured for r in results if r.unmeasured]
    if unseen and not failures:  # a failure found stands; a property not seen is no pass
        return Measurement.error(NAME, "; ".join([*unseen, done]), limit)
    return Measurement.measured(NAME, len(failures), limit,
                                note=done + ("; " + "; ".join(shown) if shown else ""))
