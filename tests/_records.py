"""Gate records a test writes into the store, so the gate under test stands on a known record.

G3 compares its candidate with the baseline repetitions of the G2 record it stands on, and a G2
run on a busy machine can fail its CV limit (issue #17): a test of G3's logic must not depend
on the machine being quiet. ``trusted_g2`` writes the record G2 writes for the e2e site's
baseline arm on a quiet machine: repetitions from the simulator's model (the arm's read limit
paces every TTFT), measurements from G2's own code, the file's SHA-256 in the manifest where G3
checks it. The `timing` test in tests/test_g2g3_e2e.py holds this model against a real G2 run.
"""

from __future__ import annotations

import json
from pathlib import Path

from gates.core.configuration import WorkloadSettings, load_site
from gates.core.configuration.config import load_thresholds
from gates.core.verdicts import GateRecord, Limit, Measurement, UpstreamRef
from gates.inference import Repetition, g2_measurements
from gates.loadgen import workload_hash, workload_plan
from gates.sim.cli import paced_profile
from gates.sim.model import decode_seconds, prefill_seconds
from gates.store import Store

G2_FILE = "g2-baseline-repetitions.json"  # fixtures/g2g3.py BASELINE_FILE
G3_FILE = "g3-candidate-repetitions.json"  # gates.soak's G3_FILE: G4's operating point
SITE = "e2e site"
FIXTURE = "written by the test from the simulator's model, not measured (tests/_records.py)"


def modelled_ttfts(contexts: int, concurrency: int, read_seconds: float,
                   tail_seconds: float) -> tuple[list[float], float]:
    """Each probe's TTFT and the probe's span: every context's KV read through one throttle.

    The simulator's throttle books a request's chunk reads in the order they arrive, so in a
    closed loop of ``concurrency`` requests each waits for the reads booked before its own.
    """
    free, finished, ttfts = 0.0, [], []
    for i in range(contexts):
        sent = finished[i - concurrency] if i >= concurrency else 0.0
        free = max(free, sent) + read_seconds
        finished.append(free + tail_seconds)
        ttfts.append(finished[-1] - sent)
    return ttfts, finished[-1]


def modelled_repetitions(arm: str, workload: WorkloadSettings, levels: list[int],
                         repetitions: int, read_limit: float | None,
                         prefill_tokens_per_s: float) -> list[Repetition]:
    """What the tiny simulator measures for an arm whose reads are capped at read_limit B/s."""
    p = paced_profile("tiny", prefill_tokens_per_s)
    per_context = workload.context_tokens // p.chunk_tokens * p.chunk_bytes
    read = per_context / read_limit if read_limit else 0.0
    tail = prefill_seconds(p, workload.question_tokens)
    out = []
    for c in levels:
        ttfts, span = modelled_ttfts(workload.contexts, c, read, tail)
        span += workload.output_tokens * decode_seconds(p, c)
        out += [Repetition(arm=arm, concurrency=c, repetition=r, ttfts=ttfts,
                           output_throughput=workload.contexts * workload.output_tokens / span,
                           sent=workload.contexts, errors=0, simulated=True,
                           # the simulator's word for itself (gates.proof.identity)
                           server=f"kvgate-sim ({FIXTURE})") for r in range(repetitions)]
    return out


def _latest(store: Store, gate: str) -> UpstreamRef | None:
    found = store.latest_record(gate, SITE)
    return UpstreamRef(gate=gate, run_id=found[0].run_id, verdict=found[0].verdict,
                       record_sha256=found[1]) if found else None


def _save(out: Path, record: GateRecord, file: str, reps: list[Repetition]) -> dict:
    with Store(out) as store:
        record.upstream = _latest(store, {"g2": "g1", "g3": "g2"}[record.gate])
        store.begin_run(record.run_id, SITE)
        path = store.run_dir(record.run_id) / "evidence" / file
        path.write_text(json.dumps([r.model_dump(mode="json") for r in reps], indent=1))
        record.evidence[f"evidence/{file}"] = store.add_evidence(record.run_id, path)
        write_record(store, record, store.save_record(record))
    return json.loads(record.canonical_json())


def write_record(store: Store, record: GateRecord, digest: str) -> None:
    """<run>/<gate>.json as a run writes it: what compare and verify check a cited record by."""
    body = json.loads(record.canonical_json()) | {"decision_rule": "written by the test",
                                                  "record_sha256": digest}
    (store.run_dir(record.run_id) / f"{record.gate}.json").write_text(json.dumps(body) + "\n")


def trusted_g2(out: Path, site: Path, thresholds: Path, read_limit: float,
               prefill_tokens_per_s: float) -> dict:
    """A passing G2 record for the site's baseline arm in the store under out, as G3 reads it."""
    # The simulator's arms run [workload] as written (no [engine] keys replace it).
    workload, limits = load_site(site)[0].engine_workload({}), load_thresholds(thresholds)[0]
    reps = modelled_repetitions("baseline", workload, limits.g2.concurrency,
                                limits.g2.repetitions, read_limit, prefill_tokens_per_s)
    record = GateRecord(gate="g2", run_id="g2-fixture", site=SITE, started="t",
                        measurements=g2_measurements(reps, limits.g2), deviations=[FIXTURE],
                        facts={"workload_hash": workload_hash(workload_plan(workload),
                                                              eviction=workload.eviction)})
    return _save(out, record, G2_FILE, reps)


def g2_from_measured(out: Path, g2: dict, why: str) -> dict:
    """A passing G2 record holding a real G2 run's own repetitions, for G3 to stand on.

    For a G2 that measured a real engine and failed on timing alone (its CV on a machine whose
    speed moved): G3 decides from its own pairs, and needs of G2 only its workload and its
    baseline repetitions. The record says it was written by the test, and why.
    """
    source = out / g2["run_id"] / "evidence" / G2_FILE
    reps = [Repetition.model_validate(r) for r in json.loads(source.read_text())]
    record = GateRecord(gate="g2", run_id="g2-from-measured", site=g2["site"], started="t",
                        deviations=[f"written by the test from G2 run {g2['run_id']}'s measured "
                                    f"repetitions (tests/_records.py): {why}"],
                        facts={"workload_hash": g2["facts"]["workload_hash"]},
                        measurements=[Measurement.measured("stand-in", 1.0,
                                                           Limit.at_least(0.5))])
    return _save(out, record, G2_FILE, reps)


def trusted_g3(out: Path, site: Path, thresholds: Path, prefill_tokens_per_s: float) -> dict:
    """A passing G3 record whose unthrottled candidate sets G4's operating point."""
    limits = load_thresholds(thresholds)[0]
    reps = modelled_repetitions("candidate", load_site(site)[0].engine_workload({}),
                                limits.g2.concurrency, limits.g2.repetitions, None,
                                prefill_tokens_per_s)
    record = GateRecord(gate="g3", run_id="g3-fixture", site=SITE, started="t",
                        deviations=[FIXTURE], measurements=[Measurement.measured(
                            "stand-in", 1.0, Limit.at_least(0.5))])
    return _save(out, record, G3_FILE, reps)
