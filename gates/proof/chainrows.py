"""The engine's and the storage side's rows of the evidence chain, each with a floor and a ceiling.

Engine side: the storage-read tokens lie between the floor (read_fraction_min of the tokens the
probe needed) and the ceiling (the tokens the probe asked for, and the prompt tokens the engine
itself counted); shard ranks each within both, replicas (split ranks) may be idle; the engine's
prompt count covers the probe and nothing else; the GPU-cache counter must exist. Storage side:
every signal agrees with every reference the probe has (the engine's read bytes, the KV bytes
the probe needed, the engine's tokens x KV bytes per token), and the engine's bytes agree with
its tokens. A figure that is not a count is an ERROR; one above its ceiling INCONCLUSIVE. Pure.
"""

from __future__ import annotations

from .evidence import Agreement, Kind, Signal, bad, bounded, within
from .probe import ProbeEvidence, ProofContext
from .ranks import rank_rows

GPU_HIT_MAX = 1.0  # % of the expected KV tokens a cold probe may find in the GPU cache
PROMPT_SLACK = 0.01  # the engine's prompt count may differ from what the probe sent by 1 %
DEVICES = "block devices"


def _ceiling(p: ProbeEvidence) -> tuple[float, str]:
    limits = [(p.probe_prompt_tokens or p.expected_tokens, "the tokens the probe asked for")]
    if p.engine_prompt_tokens is not None and not bad(p.engine_prompt_tokens):
        limits.append((p.engine_prompt_tokens, "the prompt tokens the engine counted"))
    return min(limits)


def engine_rows(p: ProbeEvidence, ctx: ProofContext) -> list[Signal]:
    """The engine's counters: storage tokens, ranks, prompt tokens, failures, GPU and CPU hits."""
    if p.error:
        return [Signal(kind=Kind.ENGINE, signal=p.counter or "the engine's counters",
                       agreement=Agreement.INCONCLUSIVE, note=p.error)]
    rows = [Signal(kind=Kind.ENGINE, signal="the engine's counters (bad input)",
                   agreement=Agreement.ERROR, note=e) for e in p.input_errors]
    rows += [Signal(kind=Kind.ENGINE, signal="the engine's labels",
                    agreement=Agreement.INCONCLUSIVE, note=u) for u in p.unclassified]
    if p.expected_tokens < 1:
        return rows + [Signal(kind=Kind.ENGINE, signal="expected tokens", value=0,
                              agreement=Agreement.ERROR, note="the probe needed no KV tokens: "
                              "nothing to hold the engine's counters against")]
    floor = ctx.read_fraction_min / 100 * p.expected_tokens
    ceiling, why = _ceiling(p)
    ok, note = bounded(p.storage_read_tokens, floor, ceiling)
    rows.append(Signal(kind=Kind.ENGINE, signal=p.counter or "storage-read tokens (engine)",
                       value=p.storage_read_tokens, unit="tokens", agreement=ok,
                       expected=f"≥ {floor:,.0f} of {p.expected_tokens:,} expected tokens, "
                       f"≤ {ceiling:,.0f} ({why})", caveat=p.caveat,
                       note="; ".join(filter(None, [note, f"{len(p.rank_reads)} ranks, "
                                                    f"{p.rank_mode}" if p.rank_reads else ""]))))
    rows += rank_rows(p, ctx, floor, ceiling)
    rows += _prompt_row(p)
    if p.storage_read_failures is not None:
        refused = bad(p.storage_read_failures)
        rows.append(Signal(kind=Kind.CONTROL, signal="the engine's failed storage reads",
                           value=p.storage_read_failures, unit="", expected="0",
                           agreement=Agreement.ERROR if refused
                           else within(p.storage_read_failures, 0.0, 0.0),
                           note="a failed read falls back to recompute or serves wrong KV"))
    rows.append(_hits("GPU-cache hits during the probe (eviction)", p.gpu_hit_tokens, p,
                      "the eviction was verified by the counters, not by an HTTP 200",
                      "the engine exposes no GPU-cache hit counter: the eviction cannot be "
                      "verified by its counters"))
    if p.cpu_hit_tokens is not None:
        rows.append(_hits("CPU-tier hits during the probe", p.cpu_hit_tokens, p,
                          "KV served from the engine's DRAM tier is not a storage read", ""))
    return rows


def _hits(name: str, tokens: float | None, p: ProbeEvidence, note: str, missing: str) -> Signal:
    if tokens is None:
        return Signal(kind=Kind.CONTROL, signal=name, agreement=Agreement.INCONCLUSIVE,
                      expected=f"≤ {GPU_HIT_MAX:g} % of the expected", note=missing)
    if bad(tokens):
        return Signal(kind=Kind.CONTROL, signal=name, value=tokens, agreement=Agreement.ERROR,
                      expected=f"≤ {GPU_HIT_MAX:g} % of the expected",
                      note=f"{tokens!r} is not a count: refused as bad input")
    pct = tokens / p.expected_tokens * 100
    return Signal(kind=Kind.CONTROL, signal=name, value=pct, unit="%", note=note,
                  expected=f"≤ {GPU_HIT_MAX:g} % of the expected",
                  agreement=within(pct, 0.0, GPU_HIT_MAX))


def _prompt_row(p: ProbeEvidence) -> list[Signal]:
    asked, counted = p.probe_prompt_tokens, p.engine_prompt_tokens
    if counted is None or not asked:
        return []
    lo, hi = asked * (1 - PROMPT_SLACK), asked * (1 + PROMPT_SLACK)
    ok, note = bounded(counted, lo, hi)
    if ok is Agreement.DISAGREES:
        ok, note = Agreement.INCONCLUSIVE, ("the engine counted fewer prompt tokens than the "
                                            "probe sent: its counters do not cover the probe")
    elif ok is Agreement.INCONCLUSIVE:
        note = "other requests reached the engine during the probe: its counters are not " \
            "the probe's alone"
    return [Signal(kind=Kind.CONTROL, signal="prompt tokens the engine counted", value=counted,
                   unit="tokens", expected=f"{lo:,.0f}-{hi:,.0f} (the probe sent {asked:,})",
                   agreement=ok, note=note)]


def _against(value: float, refs: list[tuple[float, str]], lo: float,
             hi: float) -> tuple[Agreement, float, str]:
    """A byte count held against every reference: below any fails, above any is undecided."""
    pcts = [(value / r * 100, what) for r, what in refs]
    worst = min(pcts)
    note = "; ".join(f"{pct:,.4g} % of {what}" for pct, what in pcts[1:])
    if worst[0] < lo:
        return Agreement.DISAGREES, pcts[0][0], f"{worst[0]:,.4g} % of {worst[1]}; {note}"
    if max(pcts)[0] > hi:
        return Agreement.INCONCLUSIVE, pcts[0][0], note
    return Agreement.AGREES, pcts[0][0], note


def storage_rows(p: ProbeEvidence, ctx: ProofContext) -> list[Signal]:
    """The storage side against every reference, and the engine's bytes against its tokens."""
    refs, (lo, hi) = p.storage_references(), ctx.band
    rows = _consistency(p, lo, hi) + _unwatched(p)
    s = p.storage
    for label, value in ((DEVICES, s and s.device_bytes), ("storage NICs (rx bytes)",
                                                           s and s.nic_bytes),
                         ("RDMA ports (port_rcv_data × 4)", s and s.rdma_bytes),
                         ("engine process read_bytes (/proc/PID/io)", p.process_read_bytes)):
        if value is None:
            continue
        note = f"{value:,.0f} bytes"
        if label != DEVICES:  # it cannot name the target's devices: support, never proof
            note += "; cannot name the target's devices (other traffic, other file systems)"
        if not refs:
            rows.append(Signal(kind=Kind.STORAGE, signal=label, note=note))
            continue
        ok, pct, more = _against(value, refs, lo, hi)
        if ok is Agreement.INCONCLUSIVE:
            # More than the probe needed: something else read them too. That hides whether
            # the engine's reads were among them, so it cannot say yes or no (not a FAIL).
            more += (f"; other I/O on them during the probe: at least "
                     f"{value - refs[0][0] * hi / 100:,.0f} B: run again with the target's "
                     "devices otherwise idle")
        rows.append(Signal(kind=Kind.STORAGE, signal=label, value=pct,
                           unit=f"% of {refs[0][1]}", expected=f"{lo:g}-{hi:g} %",
                           agreement=ok, note="; ".join(filter(None, [note, more]))))
    return rows


def _unwatched(p: ProbeEvidence) -> list[Signal]:
    """The target's devices that could not be watched: said, never a row quietly left out."""
    s = p.storage
    if not p.devices_unwatched or (s is not None and s.device_bytes is not None):
        return []
    # A network filesystem's bytes cross the storage NICs the site named: they carry the
    # storage side there (support, as ever). Without them nothing names the target's reads:
    # /proc/PID/io counts any filesystem's (a copy of the KV on a local disk reads the same).
    wire = s is not None and (s.nic_bytes is not None or s.rdma_bytes is not None)
    return [Signal(kind=Kind.STORAGE, signal=DEVICES, expected="the target's devices watched",
                   agreement=Agreement.ABSENT if wire else Agreement.INCONCLUSIVE,
                   note=f"could not be watched: {p.devices_unwatched}" + (
                       "; the storage NICs the site named carry the storage side" if wire else
                       "; nothing else names the target's own reads: name its block devices "
                       "in site.toml [topology] devices, or its storage NICs in [topology] "
                       "interfaces"))]


def _consistency(p: ProbeEvidence, lo: float, hi: float) -> list[Signal]:
    tokens, said = p.token_bytes, p.storage_read_bytes
    name = "the engine's read bytes vs its tokens x KV bytes per token"
    if tokens is None:
        # A tier-blind token counter must be held against bytes; without the KV bytes per
        # token it cannot be (LMCache's token counter counts its CPU tier too).
        blind = p.caveat.startswith("tier-blind") and p.storage_read_tokens is not None
        return [Signal(kind=Kind.CONTROL, signal=name, agreement=Agreement.INCONCLUSIVE,
                       note="the KV bytes per token are unknown: a tier-blind token count "
                       "cannot be held against bytes")] if blind else []
    if said is None:
        return []
    if said == 0:  # LMCache counts remote backends only: 0 is silence about the others
        return [Signal(kind=Kind.CONTROL, signal=name, value=0.0, unit="%",
                       note="the engine's byte counter read 0: it does not cover the backend "
                       "that served (LMCache counts remote backends only); the devices decide")]
    ok, pct, _ = _against(said, [(tokens, "")], lo, hi) if not bad(said) else \
        (Agreement.ERROR, said, "")
    # The KV bytes per token are the site's figure (or its [sizing] model's): a wrong one
    # looks like tokens from elsewhere, so the note names it beside the engine's cause.
    per = f"{p.kv_bytes_per_token:,} B" if p.kv_bytes_per_token else "the figure"
    note = {Agreement.DISAGREES: "fewer bytes than the tokens need: some of those tokens "
            "came from elsewhere (a memory tier the token counter also counts), or the KV "
            f"bytes per token ({per}, [workload] kv_bytes_per_token or the [sizing] model's) "
            "are not this engine's",
            Agreement.INCONCLUSIVE: "more bytes than the tokens need, or the KV bytes per token "
            f"({per}) are not this engine's",
            Agreement.ERROR: "not a count"}.get(ok, "")
    return [Signal(kind=Kind.CONTROL, signal=name, value=pct, unit="%",
                   expected=f"{lo:g}-{hi:g} %", agreement=ok,
                   note=f"{said:,.0f} of {tokens:,.0f} bytes" + (f"; {note}" if note else ""))]
