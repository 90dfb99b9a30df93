"""What each gate measures, declared once (gates.core.measures): ids, titles, levels.

The titles are the display names the records have always carried; the suites, the rules and
the procurement summary select by id.
"""

from __future__ import annotations

from .measures import ONE_READING, Declarations, Declared, Per, Scope

# What each rule is over (Declared.over): the units its Coverage counts.
HOSTS, REPS, PAIRS, FILES, CONTEXTS = "hosts", "repetitions", "pairs", "files", "contexts"
WINDOWS, SPANS = "windows", "spans"

# G2 and G3 measure at every concurrency level of thresholds.toml [g2]: a record needs each.
_C = Per("concurrency", levels=lambda scope: scope.thresholds.g2.concurrency)

G1 = Declarations("g1", [
    Declared("g1.seq_read_bw", "Sequential read 1 MiB bandwidth", over=HOSTS),
    Declared("g1.seq_write_bw", "Sequential write 1 MiB bandwidth", over=HOSTS),
    Declared("g1.kv_restore_bw", "KV-restore read bandwidth", over=HOSTS),
    Declared("g1.seq_read_steady_spread", "Sequential read 1 MiB: steady-state spread",
             over=HOSTS),
    Declared("g1.seq_read_steady_slope", "Sequential read 1 MiB: steady-state slope", over=HOSTS),
    Declared("g1.seq_write_steady_spread", "Sequential write 1 MiB: steady-state spread",
             over=HOSTS),
    Declared("g1.seq_write_steady_slope", "Sequential write 1 MiB: steady-state slope",
             over=HOSTS),
    Declared("g1.kv_restore_steady_spread", "KV-restore read: steady-state spread", over=HOSTS),
    Declared("g1.kv_restore_steady_slope", "KV-restore read: steady-state slope", over=HOSTS),
    Declared("g1.randread_qd1_p99", "4 KiB random read QD1 p99 latency", over=HOSTS),
    Declared("g1.randread_iops", "4 KiB random read IOPS", per="queue depth",
             form="{title} at QD{at}", over=HOSTS),
    Declared("g1.verify_errors", "fio verify errors", over=ONE_READING),
])

G2 = Declarations("g2", [
    Declared("g2.arm_protocol", "Baseline arm protocol", over=ONE_READING),
    Declared("g2.request_errors", "Baseline request errors", _C, over=REPS),
    Declared("g2.ttft_p50", "Baseline TTFT p50", _C, over=REPS),
    Declared("g2.ttft_p99", "Baseline TTFT p99", _C, over=REPS),
    Declared("g2.output_throughput", "Baseline output throughput", _C, over=REPS),
    Declared("g2.ttft_p50_cv", "Baseline TTFT p50 run-to-run CV", _C, over=REPS),
    Declared("g2.throughput_cv", "Baseline throughput run-to-run CV", _C, over=REPS),
    Declared("g2.loadgen_fit", "Load generator fit for a gate", _C, over=REPS),
])

G3 = Declarations("g3", [
    Declared("g3.comparison", "G3 comparison", over=ONE_READING),
    Declared("g3.recompute_reference", "Recompute reference", over=ONE_READING),
    Declared("g3.request_errors", "Candidate request errors", _C, over=REPS),
    Declared("g3.ttft_p50_reduction", "TTFT p50 reduction", _C, over=PAIRS),
    Declared("g3.throughput_gain", "Output-throughput gain", _C, over=PAIRS),
    Declared("g3.storage_read_fraction", "KV tokens read from the candidate storage", _C,
             over=REPS),
    Declared("g3.gpu_hit_fraction", "KV tokens served from the GPU cache during the probe", _C,
             over=REPS),
    Declared("g3.device_reads", "KV devices' read bytes vs the engine's storage reads", _C,
             over=REPS),
    Declared("g3.process_reads", "Engine process's storage reads vs its KV restores", _C,
             over=REPS),
    Declared("g3.kv_read_back", "KV files read back as stored", _C, over=FILES),
    Declared("g3.evidence_chain", "Storage-read evidence chain", _C, over=REPS),
    Declared("g3.ttft_speedup_vs_recompute", "TTFT speed-up vs recompute", _C, over=REPS),
    Declared("g3.throughput_speedup_vs_recompute", "Throughput speed-up vs recompute", _C,
             over=REPS),
    Declared("g3.loadgen_fit", "Load generator fit for a gate", _C, over=REPS),
    Declared("g3.correctness", "Outputs identical to recompute", over=ONE_READING),
    # The correctness rule's own name says how many tokens it compared at concurrency 1.
    Declared("g3.outputs_differing", "Outputs differing from recompute", per="token count",
             form="{title} (first {at} tokens, concurrency 1)", over=CONTEXTS),
])

G4 = Declarations("g4", [
    Declared("g4.soak", "G4 soak", over=ONE_READING),
    Declared("g4.effective_duration", "Effective soak duration", over=WINDOWS),
    Declared("g4.gap_time", "Total gap time", over=WINDOWS),
    Declared("g4.request_errors", "Soak request errors", over=WINDOWS),
    Declared("g4.verify_errors", "fio verify errors", over=WINDOWS),
    Declared("g4.media_errors", "New NVMe media errors", over=WINDOWS),
    Declared("g4.critical_warnings", "NVMe critical warnings raised", over=WINDOWS),
    Declared("g4.kernel_errors", "Kernel storage errors", over=WINDOWS),
    Declared("g4.paths_live", "NVMe-oF paths live", over=WINDOWS),
    Declared("g4.throughput_floor", "Lowest span throughput", over=SPANS),
    Declared("g4.ttft_drift", "TTFT p50 drift", over=WINDOWS),
    Declared("g4.window_spread", "Window throughput spread (SNIA)", over=WINDOWS),
    Declared("g4.window_slope", "Window throughput slope (SNIA)", over=WINDOWS),
])

DECLARED = {d.gate: d for d in (G1, G2, G3, G4)}


# ---- what a complete record needs, beyond every id at every level (gates.core.measures) ------

def _devices_named(scope: Scope) -> str:
    return "" if scope.site.topology.devices else \
        "no NVMe devices named for the target (site.toml [topology] devices)"


def _fabrics(scope: Scope) -> str:
    transport = scope.site.topology.transport
    return "" if transport in ("tcp", "rdma") else \
        f"no NVMe over Fabrics in the topology (site.toml [topology] transport = {transport!r})"


def _launched_candidate(scope: Scope) -> str:
    arm = scope.site.arms.get("candidate")
    return "" if arm is not None and arm.kind == "launch" else \
        "the candidate is an endpoint arm: its engine's processes run where kvgate cannot read"


def _candidate_files(scope: Scope) -> str:
    arm = scope.site.arms.get("candidate")
    return "" if arm is not None and arm.kind == "launch" and arm.kv_dir is not None else \
        "the candidate names no KV directory kvgate can read (an endpoint arm, or no kv_dir)"


# Carriers say only why a gate, an arm or a check could not run; never required.
for _carrier in ("g2.arm_protocol", "g3.comparison", "g3.recompute_reference", "g3.correctness",
                 "g4.soak"):
    DECLARED[_carrier[:2]].require(_carrier, carrier=True)
# The fact of the site that excuses an id; where it applies, NOT APPLICABLE is an ERROR.
for _id, _excuse in (("g3.device_reads", _devices_named), ("g3.process_reads",
                     _launched_candidate), ("g3.kv_read_back", _candidate_files),
                     ("g4.media_errors", _devices_named),
                     ("g4.critical_warnings", _devices_named), ("g4.paths_live", _fabrics)):
    DECLARED[_id[:2]].require(_id, excuse=_excuse)
