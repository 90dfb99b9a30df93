"""`kvgate verify` of a sweep's folder: intact, or each edit named (hash, figures, evidence)."""

import json
import shutil
from pathlib import Path

import pytest

from gates.core.configuration import Decision, G3Limits
from gates.inference import SweepPoint, sweep_figure
from gates.model import Tier, sweep_forecast
from gates.report import SweepRecord, examine, write_sweep
from gates.report.sweep_check import sweep_digest
from gates.store import sha256_file

RUN = "20261205T120000Z-abcdef"
CPU = Tier(name="CPU tier", bytes=12000, source="test", kind="cpu")


def point(size, base, cand, proof="PASS"):
    limits, decision = G3Limits(), Decision()
    bt = [100.0 + i for i in range(len(base))]
    return SweepPoint(asked=0, contexts=size, working_set=size * 1000, concurrency=8,
                      baseline_ttft_p50=base, candidate_ttft_p50=cand,
                      baseline_throughput=bt, candidate_throughput=[b * 1.5 for b in bt],
                      ttft_reduction=sweep_figure("g3.ttft_p50_reduction", base, cand, limits,
                                                  decision),
                      throughput_gain=sweep_figure("g3.throughput_gain", bt,
                                                   [b * 1.5 for b in bt], limits, decision),
                      proof=proof)


@pytest.fixture
def written(tmp_path) -> Path:
    evidence = tmp_path / RUN / "evidence"
    evidence.mkdir(parents=True)
    (evidence / "sweep-arm.log").write_text("engine log\n")
    points = [point(9, [2.0, 2.1, 2.2], [1.9, 2.0, 2.1], proof="ERROR"),
              point(17, [4.0, 4.1, 4.2], [1.0, 1.1, 1.2])]
    record = SweepRecord(run_id=RUN, created="2026-12-05T12:00:00+00:00", site="s",
                         engine="e", simulated=True, workload_hash="w",
                         thresholds_revision="r", thresholds_sha256="t", concurrency=8,
                         pairs=3, context_bytes=1000, points=points, break_even=17000,
                         proof_from=17000, sizes_planned=2,
                         forecast=sweep_forecast([9000, 17000], [CPU], (10e6, "site"),
                                                 (40e6, "G1")),
                         evidence={"evidence/sweep-arm.log":
                                   sha256_file(evidence / "sweep-arm.log")})
    return write_sweep(tmp_path, record, signer=None)["json"].parent


def edit(folder: Path, change) -> None:
    body = json.loads((folder / "sweep.json").read_text())
    change(body)
    body["sweep_sha256"] = sweep_digest(body)
    (folder / "sweep.json").write_text(json.dumps(body, sort_keys=True, indent=2) + "\n")


def test_a_sweep_as_written_is_intact_and_unsigned(written):
    found = examine(written)
    assert found.problems == [] and found.files == ["sweep.json", "sweep.html"]
    assert found.signers == {"sweep.json": None}


def test_a_gain_raised_and_rehashed_is_named(written):
    edit(written, lambda b: b["points"][0]["ttft_reduction"].update(point=60.0))
    problems = examine(written).problems
    assert any("its point at 9,000 B states a ttft_reduction its pairs do not give" in p
               for p in problems), problems
    assert any("does not match sweep.html" in p for p in problems)  # the page shows the old


def test_the_forecast_is_drawn_and_tabled_and_an_edited_one_is_named(written):
    html = (written / "sweep.html").read_text()
    assert "KV model prediction" in html and "The dashed line is the KV bandwidth model" in html
    assert "75.0 %, ≤ +300 %" in html and "CPU tier" in html  # 1 - 10/40; 40/10 - 1
    edit(written, lambda b: b["forecast"]["points"][1].update(ttft_reduction=90.0))
    assert "sweep.json: its KV-model forecast is not what the model gives for the bandwidths "\
        "and tiers it states" in examine(written).problems


def test_a_break_even_moved_is_named(written):
    edit(written, lambda b: b.update(break_even=9000))
    assert any("states a break-even size of 9000, its points give 17000" in p
               for p in examine(written).problems)


def test_an_evidence_file_altered_or_gone_is_named(written):
    log = written.parent / RUN / "evidence" / "sweep-arm.log"
    log.write_text("rewritten\n")
    assert any("sweep-arm.log: altered" in p for p in examine(written).problems)
    shutil.rmtree(written.parent / RUN)
    assert any("its run's folder" in p and "is not beside it" in p
               for p in examine(written).problems)


def test_a_file_kvgate_does_not_write_there_is_named(written):
    (written / "notes.txt").write_text("x")
    assert any("notes.txt: unlisted" in p for p in examine(written).problems)


def test_a_sweep_is_never_overwritten(written):
    body = json.loads((written / "sweep.json").read_text())
    record = SweepRecord.model_validate({k: v for k, v in body.items() if k != "sweep_sha256"})
    with pytest.raises(FileExistsError, match="never overwrites a sweep"):
        write_sweep(written.parent, record, signer=None)
