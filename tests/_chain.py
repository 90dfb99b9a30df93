"""A real store with real run folders: records, evidence, gate JSONs and sealed HTML reports."""

import json

from gates.core.verdicts import (
    DECLARED,
    Cause,
    Coverage,
    Deviation,
    GateRecord,
    Limit,
    Measurement,
    UpstreamRef,
)
from gates.core.verdicts.measures import ONE_READING
from gates.report.sealing import seal, seal_placeholder
from gates.store import Store

SITE = "acceptance site"


def read_all(declared, value, limit, at=None):
    """A declared measurement judged against its limit as its rule gives it having read every
    one of its inputs: a rule over many (windows, pairs, hosts) carries their full Coverage."""
    said = Measurement.measured(declared.name(at), value, limit)
    if declared.over != ONE_READING:
        said = Coverage([1], [1], what=declared.over).judge(said)
    return declared.stamp(said, at)


def m(id, value, limit, at=None):
    """A declared measurement (by id, at a level) judged against its limit, every input read."""
    return read_all(DECLARED[id.split(".")[0]][id], value, limit, at)


def the_rest(session, gate, have=()):
    """A passing measurement for every id (and level) the gate declares that `have` lacks:
    a test of something else records a complete gate, as a whole run of its suite does."""
    taken = {(x.id, x.at) for x in have} | {(x.id, None) for x in have}
    return [read_all(d, 1.0, Limit.at_least(0, "figure"), at)
            for d, at in DECLARED[gate].required(session.scope(gate)) if (d.id, at) not in taken]


PASSING = {
    "g1": [m("g1.seq_read_bw", 5.2, Limit.at_least(4, "GB/s")),
           m("g1.kv_restore_bw", 4.8, Limit.at_least(4, "GB/s")),
           m("g1.randread_qd1_p99", 180, Limit.at_most(500, "µs"))],
    "g2": [m("g2.ttft_p50", 2.0, Limit.at_least(0, "s"), 8),
           m("g2.ttft_p50", 3.5, Limit.at_least(0, "s"), 16),
           m("g2.output_throughput", 400, Limit.at_least(0, "tok/s"), 8),
           m("g2.output_throughput", 610, Limit.at_least(0, "tok/s"), 16)],
    "g3": [m("g3.ttft_p50_reduction", 60, Limit.at_least(30, "%"), 8),
           m("g3.ttft_p50_reduction", 52, Limit.at_least(30, "%"), 16),
           m("g3.throughput_gain", 31, Limit.at_least(20, "%"), 8),
           m("g3.storage_read_fraction", 100, Limit.at_least(95, "%"), 8),
           m("g3.outputs_differing", 0, Limit.at_most(0, "requests"), 16)],
    "g4": [m("g4.effective_duration", 259200, Limit.at_least(259200, "s")),
           m("g4.request_errors", 0, Limit.at_most(0, "requests")),
           m("g4.throughput_floor", 95, Limit.at_least(90, "%")),
           m("g4.ttft_drift", 2, Limit.at_most(10, "%"))],
}


def write_report(folder, gate, title):
    """<gate>.html (sealed) and <gate>.html.seal beside it, as write_reports writes them."""
    html, digest = seal(f"<!DOCTYPE html><html><body><h1>{title}</h1><p>{seal_placeholder()}"
                        "</p></body></html>")
    (folder / f"{gate}.html").write_text(html)
    (folder / f"{gate}.html.seal").write_text(f"{digest}  {gate}.html\n")


# What a session writes into a G2–G4 record whose arms ran the simulator.
SIMULATED = [Deviation(cause=Cause.SIMULATED_ENGINE, text="simulated engine: the arms baseline, "
                       "candidate run kvgate's reference engine simulator, not a real "
                       "inference engine")]


def open_run(store: Store, run_id: str):
    """Register a run and return its folder."""
    return store.begin_run(run_id, SITE)


def add_gate(store, run_id, gate, measurements=None, cites=None, **fields):
    """Store a gate record as a session does and write its JSON, sealed HTML and evidence.

    cites is the (record, sha256) the gate stands on. Returns (record, sha256).
    """
    folder = store.run_dir(run_id)
    evidence = folder / "evidence" / f"{gate}-raw.json"
    evidence.write_text(json.dumps({"gate": gate, "samples": [1, 2, 3]}))
    store.add_evidence(run_id, evidence)
    upstream = UpstreamRef(gate=cites[0].gate, run_id=cites[0].run_id, verdict=cites[0].verdict,
                           record_sha256=cites[1]) if cites else None
    record = GateRecord(gate=gate, run_id=run_id, site=SITE, started="2026-11-29T17:00:00+00:00",
                        measurements=PASSING[gate] if measurements is None else measurements,
                        upstream=upstream, evidence=store.manifest(run_id), **fields)
    digest = store.save_record(record)
    body = json.loads(record.canonical_json()) | {"decision_rule": "…", "record_sha256": digest}
    (folder / f"{gate}.json").write_text(json.dumps(body, indent=2) + "\n")
    write_report(folder, gate, record.title)
    return record, digest


def full_chain(store, run_id, gates=("g1", "g2", "g3", "g4"), cites=None, **fields):
    """Gates in order in one run, each citing the one before; returns {gate: (record, sha)}."""
    open_run(store, run_id)
    out = {}
    for gate in gates:
        out[gate] = cites = add_gate(store, run_id, gate, cites=cites, **fields)
    return out
