"""Issue #25 item 12: a gate's verdict needs every measurement it declares.

Before the fix a G1 run with one check selected (`kvgate run g1 -- -k …`) wrote a G1 record
of whatever ran, PASS if that passed, and G2 then ran on it; the declared measurements were
never asked for, and a requested gate that wrote no record left the exit code 0.
"""

import json
import subprocess
import sys

from _chain import read_all

from gates.cli import summary_exit_code
from gates.core.configuration import load_site
from gates.core.configuration.config import load_thresholds
from gates.core.verdicts import (
    DECLARED,
    G2,
    G4,
    INCOMPLETE,
    GateRecord,
    Limit,
    Measurement,
    Outcome,
    Scope,
)


def scope(tmp_path, repo, topology=""):
    (tmp_path / "site.toml").write_text(f'[site]\nname = "s"\n[fio]\nfile_size = "1MiB"\n'
                                        f'[target]\ndirectory = "t"\n[topology]\n{topology}\n')
    site, _ = load_site(tmp_path / "site.toml")
    return Scope(site, load_thresholds(repo / "thresholds.toml")[0])


def test_every_declared_id_at_every_level_or_the_gate_is_incomplete(tmp_path, repo):
    here = scope(tmp_path, repo)
    levels = here.thresholds.g2.concurrency
    whole = [read_all(d, 1, Limit.at_least(0), at) for d, at in G2.required(here)]
    assert {m.at for m in whole} == set(levels) and len(whole) == 7 * len(levels)
    assert G2.complete(whole, here) == whole  # nothing missing: nothing added
    short = [m for m in whole if not (m.id == "g2.ttft_p99" and m.at == levels[-1])]
    *kept, incomplete = G2.complete(short, here, not_run=["test_baseline_ttft"])
    assert kept == short and incomplete.outcome is Outcome.ERROR and incomplete.id == "g2.complete"
    assert incomplete.note.startswith(f"{INCOMPLETE}: not measured: g2.ttft_p99 @ concurrency "
                                      f"{levels[-1]}; checks not run: test_baseline_ttft")
    record = GateRecord(gate="g2", run_id="r", site="s", started="t",
                        measurements=G2.complete(short, here))
    assert record.verdict is Outcome.ERROR


def test_a_carrier_is_never_required_and_an_arm_error_leaves_the_rest_named(tmp_path, repo):
    here = scope(tmp_path, repo)
    assert "g2.arm_protocol" not in {d.id for d, _ in G2.required(here)}
    [error, incomplete] = G2.complete([G2["g2.arm_protocol"].error("arm down")], here)
    assert error.outcome is incomplete.outcome is Outcome.ERROR
    assert "g2.request_errors @ concurrency" in incomplete.note


def test_a_gate_its_carrier_says_was_blocked_is_blocked_not_incomplete(tmp_path, repo):
    """G3 blocked by a workload that differs from G2's: nothing was attempted, nothing is
    missing; a check the user deselected is still named."""
    from gates.core.verdicts import G3
    here = scope(tmp_path, repo)
    blocked = [G3["g3.comparison"].blocked("workload differs from G2's: rerun G2 first")]
    assert G3.complete(blocked, here) == blocked
    record = GateRecord(gate="g3", run_id="r", site="s", started="t",
                        measurements=G3.complete(blocked, here))
    assert record.verdict is Outcome.BLOCKED
    *_, named = G3.complete(blocked, here, not_run=["test_ttft_p50_reduction"])
    assert named.note == (f"{INCOMPLETE}: checks not run: test_ttft_p50_reduction (a gate's "
                          "verdict needs every measurement it declares: run its checks whole)")


def test_not_applicable_only_for_a_fact_of_the_site(tmp_path, repo):
    """G4's SMART rules apply once devices are named: "nvme-cli is missing" is then an ERROR."""
    smart = G4["g4.media_errors"].not_applicable("nvme-cli is not installed")
    named = scope(tmp_path, repo, 'devices = ["/dev/nvme0n1"]')
    [judged, _] = G4.complete([smart], named)
    assert judged.outcome is Outcome.ERROR
    assert judged.note == "not measured, although it applies to this site: nvme-cli is not " \
                          "installed"
    bare = scope(tmp_path, repo)  # no devices named: a fact of the site, N/A stands
    assert G4.complete([smart], bare)[0] == smart
    assert "g4.media_errors" not in {d.id for d, _ in G4.required(bare)}
    assert "g4.media_errors" in {d.id for d, _ in G4.required(named)}


def test_every_gate_declares_its_completeness_carrier():
    for gate, declared in DECLARED.items():
        assert declared[f"{gate}.complete"].title == "Every declared measurement taken"
        assert declared.needs[f"{gate}.complete"].carrier


def test_a_requested_gate_that_wrote_no_record_is_not_exit_0():
    passed = GateRecord(gate="g1", run_id="r", site="s", started="t",
                        measurements=[Measurement(name="m", outcome=Outcome.PASS)])
    assert summary_exit_code([passed], ["g1"]) == 0
    assert summary_exit_code([passed], ["g1", "g2"]) == 2
    assert summary_exit_code([], ["g1"]) == 2


def kvgate(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "gates.cli", *map(str, argv)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def test_run_g1_with_a_keyword_is_incomplete_and_g2_is_blocked(tmp_path, repo, tiny_site):
    """The README's own example, `kvgate run g1 -- -k seq_read`: INCOMPLETE, then BLOCKED."""
    (tmp_path / "site.toml").write_text(tiny_site(tmp_path / "target"))
    common = ["--site", "site.toml", "--thresholds", repo / "thresholds.toml", "--out", "out"]
    g1 = kvgate("run", "g1", *common, "--", "-k", "seq_read", cwd=tmp_path)
    assert g1.returncode == 2, g1.stdout + g1.stderr
    [record] = [json.loads(p.read_text()) for p in (tmp_path / "out").glob("*/g1.json")]
    assert record["verdict"] == "ERROR"
    [incomplete] = record["measurements"]
    assert incomplete["note"].startswith("INCOMPLETE: not measured: g1.seq_read_bw, ")
    assert "test_bandwidth[seqread]" in incomplete["note"] and "test_roce_v2" in incomplete["note"]
    assert "ERROR (INCOMPLETE)" in g1.stdout
    g2 = kvgate("run", "g2", *common, cwd=tmp_path)
    assert g2.returncode == 3, g2.stdout + g2.stderr
    [blocked] = [json.loads(p.read_text()) for p in (tmp_path / "out").glob("*/g2.json")]
    assert blocked["verdict"] == "BLOCKED"
    assert f"G1 did not pass (run {record['run_id']}: ERROR)" in blocked["measurements"][0]["note"]
