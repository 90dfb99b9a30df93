"""A level's probes one by one: which of them gave each figure the level adds up (issue #43).

G3 adds a level's repetitions up (ProbeEvidence.__add__). A repetition whose figure could not be
read (its scrape failed, a series was refused, its devices' or its processes' counters gave
nothing) does not make a smaller sum: it is "not read", with why, and counts against the rule
through its Coverage (gates.core.verdicts). The units are the level's repetitions in the order
they ran, #1 first; the level's plan, not what was read, says how many there are. So too for the
engine's ranks: a rank that some probes' counters name and another's do not was not read in that
one, and the level's sum for it is not its reads. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..core.verdicts import Coverage
from .probe import ProbeEvidence

REPS, RANKS = "repetitions", "ranks"


def _storage(name: str) -> Callable[[ProbeEvidence], float | None]:
    return lambda p: None if p.storage is None else getattr(p.storage, name)


# Each figure a level adds up: how to get it from one probe, what it is (said when it is not
# read), and the engine quantity (attribution.PROOF_QUANTITIES) whose refused series explains
# its absence ("" for the storage side's figures, which kvgate reads itself).
FIGURES: dict[str, tuple[Callable[[ProbeEvidence], float | None], str, str]] = {
    "storage_read_tokens": (lambda p: p.storage_read_tokens, "the engine's storage-read tokens",
                            "storage_read_tokens"),
    "storage_read_bytes": (lambda p: p.storage_read_bytes, "the engine's storage-read bytes",
                           "storage_read_bytes"),
    "gpu_hit_tokens": (lambda p: p.gpu_hit_tokens, "the engine's GPU-cache hits",
                       "gpu_hit_tokens"),
    "engine_prompt_tokens": (lambda p: p.engine_prompt_tokens, "the engine's prompt tokens",
                             "prompt_tokens"),
    "storage_read_failures": (lambda p: p.storage_read_failures,
                              "the engine's failed storage reads", "storage_read_failures"),
    "cpu_hit_tokens": (lambda p: p.cpu_hit_tokens, "the engine's CPU-tier hits",
                       "cpu_hit_tokens"),
    "device_bytes": (_storage("device_bytes"), "the block devices' read bytes", ""),
    "nic_bytes": (_storage("nic_bytes"), "the storage NICs' rx bytes", ""),
    "rdma_bytes": (_storage("rdma_bytes"), "the RDMA ports' received bytes", ""),
    "process_read_bytes": (lambda p: p.process_read_bytes,
                           "the engine's processes' read bytes (/proc/PID/io)", ""),
    "kv_dir_bytes": (lambda p: p.kv_dir_bytes, "the bytes in the arm's kv_dir", ""),
}


def value(p: ProbeEvidence, figure: str) -> float | None:
    """One probe's figure (FIGURES), None where it was not read."""
    return FIGURES[figure][0](p)


def why_not(p: ProbeEvidence, figure: str) -> str:
    """Why one probe has no such figure ("" when it has): its own words where it has them."""
    get, what, quantity = FIGURES[figure]
    if get(p) is not None:
        return ""
    if quantity and p.error:
        return p.error  # the scrape failed, or the engine could not be told
    said = [e for e in (*p.input_errors, *p.unclassified) if quantity
            and e.startswith(f"{quantity}: ")]
    if said:
        return "; ".join(said)
    if figure == "device_bytes" and p.devices_unwatched:
        return f"{what} were not read: {p.devices_unwatched}"
    return f"{what} were not read"


def figure_coverage(probes: Sequence[ProbeEvidence], figure: str) -> Coverage:
    """Which of the level's repetitions gave this figure; the others with why."""
    read, failed = [], {}
    for i, p in enumerate(probes, 1):
        if why := why_not(p, figure):
            failed[i] = why
        else:
            read.append(i)
    return Coverage(range(1, len(probes) + 1), read, failed, what=REPS)


def unread(probes: Sequence[ProbeEvidence]) -> dict[int, str]:
    """The repetitions whose evidence could not all be read, with why: a scrape that failed, a
    series refused, or a figure the level's other probes gave and this one did not."""
    given = [f for f in FIGURES if any(value(p, f) is not None for p in probes)]
    out = {}
    for i, p in enumerate(probes, 1):
        whys = [p.error, *p.input_errors, *(why_not(p, f) for f in given)]
        if said := [w for w in dict.fromkeys(whys) if w]:
            out[i] = "; ".join(said)
    return out


def rank_gaps(probes: Sequence[ProbeEvidence]) -> dict[str, str]:
    """Ranks some probes' counters name and others' do not, each with the repetitions that
    lack it (one whose storage-read counter was not read at all lacks every rank)."""
    named = list(dict.fromkeys(r for p in probes for r in p.rank_reads))
    lacking: dict[str, list[int]] = {}
    for i, p in enumerate(probes, 1):
        for rank in named:
            if p.storage_read_tokens is None or rank not in p.rank_reads:
                lacking.setdefault(rank, []).append(i)
    return {rank: "not in the counters of repetition " + ", ".join(f"#{i}" for i in reps)
            for rank, reps in lacking.items()}


def level_evidence(probes: Sequence[ProbeEvidence],
                   kv_bytes_per_token: int | None) -> ProbeEvidence:
    """A level's probes added up (ProbeEvidence.__add__), held at the level's KV bytes/token,
    with the repetitions and ranks whose figures could not be read."""
    total = ProbeEvidence()
    for p in probes:
        total = p if not total.repetitions else total + p
    return total.model_copy(update={"kv_bytes_per_token": kv_bytes_per_token,
                                    "unread": unread(probes), "rank_gaps": rank_gaps(probes)})


def probes_coverage(p: ProbeEvidence) -> Coverage:
    """The repetitions a level's (or one probe's) evidence covers, those not read with why."""
    n = max(p.repetitions, 1)
    failed = dict(p.unread)
    if n == 1 and not failed and (why := "; ".join(filter(None, [p.error, *p.input_errors]))):
        failed[1] = why  # one probe not added up by level_evidence: its own words
    return Coverage(range(1, n + 1), [i for i in range(1, n + 1) if i not in failed], failed,
                    what=REPS)
