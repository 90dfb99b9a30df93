"""G2 then G3 through `kvgate run` against a real engine: the world, the runs, the records.

Shared by tests/test_llamacpp_e2e.py and tests/test_vllm_e2e.py: a passing G1 record, a small
thresholds file (one concurrency level, two repetitions, G3's pairs looked at after 3),
the engine's site file; G3 runs only on a G2 that passed, and a G2 that did not says whether
contention caused it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

from _records import g2_from_measured
from _timing import g2_failure, only_timing
from test_g2g3_e2e import passed_g1


def engine_world(root: Path, repo: Path, site_text: str) -> Path:
    """root with thresholds.toml for a small run, site.toml, and a passing G1 record."""
    text = (repo / "thresholds.toml").read_text()
    text = text.replace("concurrency = [8, 16]", "concurrency = [1]")
    text = text.replace("repetitions = 3", "repetitions = 2")
    text = text.replace("correctness_tokens = 16", "correctness_tokens = 8")
    # G3's pairs: one look at 3 at confidence 0.7 (15 % per side; the sign test's fewest
    # pairs there), as in tests/test_g2g3_e2e.py: these tests are of the engines' wiring.
    text = text.replace("confidence = 0.95", "confidence = 0.7")
    text = text.replace("pair_looks = [7, 14, 28]", "pair_looks = [3]")
    (root / "thresholds.toml").write_text(text)
    (root / "site.toml").write_text(site_text)
    passed_g1(root / "out")
    return root


def run_gate(world: Path, gate: str, timeout: float) -> tuple[subprocess.CompletedProcess, dict]:
    """`kvgate run GATE` on the world's files; its result and the record it wrote."""
    done = subprocess.run([sys.executable, "-m", "gates.cli", "run", gate, "--site",
                           str(world / "site.toml"), "--thresholds",
                           str(world / "thresholds.toml"), "--out", str(world / "out")],
                          capture_output=True, text=True, timeout=timeout)
    found = sorted((world / "out").glob(f"*/{gate}.json"))
    assert found, f"kvgate run {gate} wrote no record:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
    return done, json.loads(found[-1].read_text())


def g2_on(world: Path, timeout: float) -> dict:
    """G2 on the world's engine, once.

    Two repetitions on a shared 2-core host: a CV of 6-10 % happens with no other process on
    the CPU (the engine's own threads queue for its one core, whose speed the CPU reference
    sees move by 10-30 % here). Such a timing failure is warned with the CPU each repetition
    saw, and G3 then stands on this G2's measured repetitions (g3_on); any other failure fails.
    """
    done, record = run_gate(world, "g2", timeout)
    # A CV failure while the machine's own speed moved is an INCONCLUSIVE ERROR (exit 2).
    assert done.returncode in (0, 1) or only_timing(record), done.stdout[-3000:]
    if record["verdict"] != "PASS":
        assert only_timing(record), g2_failure(world / "out", record)
        warnings.warn(f"G2 failed on timing alone: {g2_failure(world / 'out', record)}",
                      stacklevel=2)
    return record


def g3_on(world: Path, g2: dict, timeout: float) -> dict:
    """G3 against a G2 record that passed, or that failed on timing alone (named, warned).

    G3 decides from its own interleaved pairs; of G2 it needs the workload and the baseline's
    repetitions. A G2 that failed on anything but timing fails the G3 tests, saying why.
    """
    if g2["verdict"] != "PASS":
        why = g2_failure(world / "out", g2)
        # A timing failure says whether contention caused it: the failing checks, and the CPU
        # other processes took during each baseline repetition.
        assert only_timing(g2), why
        warnings.warn(f"G3 stands on G2's measured repetitions: {why}", stacklevel=2)
        g2_from_measured(world / "out", g2, why.splitlines()[0])
    done, record = run_gate(world, "g3", timeout)
    assert done.returncode in (0, 1), done.stdout[-3000:]
    return record
