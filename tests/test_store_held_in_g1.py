"""#45 item 5: the store taken or removed under a running G1.

A store locked by another process while G1 runs stops the run with one message that names the
store and the process holding it (its pid), never a traceback per check (~760 lines before);
a store deleted while G1 runs is named as deleted, with what became of the record (its
JSON in the run folder, the store's rows gone with the file), never "PASS" and then "no record
was written" alone.
"""

from __future__ import annotations

import pytest

from gates.store import faults

HOLD = ("import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(float(sys.argv[2]))")

SUITE = """
import subprocess, sys
from pathlib import Path
import pytest
from gates import Limit, Measurement

pytestmark = [pytest.mark.gate, pytest.mark.g1]


@pytest.fixture(scope="module")
def written(kvgate):
    # G1's fixtures keep their fio output as evidence (fixtures/g1.py): here, with the store
    # taken by another process first.
    {before}
    evidence = kvgate.evidence_dir / "g1-fio.json"
    evidence.write_text("{{}}")
    kvgate.add_evidence(evidence)
    yield
    {after}


@pytest.mark.parametrize("n", range(6))
def test_figure(check, written, n):
    check(Measurement.measured(f"figure {{n}}", 12.0, Limit.at_least(10, "GB/s")))
"""

# Held a little longer than a write waits: the first write fails, the next ones would not.
LOCK = f"""holder = subprocess.Popen([sys.executable, "-c", {HOLD!r}, str(kvgate.store.path),
                               "0.8"], stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    Path("holder.pid").write_text(str(holder.pid))"""


def test_a_store_locked_during_g1_stops_it_with_one_message_naming_the_holder(gate_dir,
                                                                             monkeypatch):
    monkeypatch.setattr(faults, "BUSY_TIMEOUT", 0.5)  # not the 30 s a real run waits
    gate_dir.makepyfile(test_g1_held=SUITE.format(before=LOCK, after="holder.kill()"))
    out = gate_dir.path / "reports"
    result = gate_dir.runpytest("-m", "g1", "--out", str(out))
    text = result.stdout.str() + result.stderr.str()
    pid = (gate_dir.path / "holder.pid").read_text()
    assert result.ret == 2, text
    assert "Traceback" not in text and "INTERNALERROR" not in text, text
    assert f"kvgate store {out / 'kvgate.sqlite'}: another process holds it locked" in text
    assert f"pid {pid}" in text, text
    # Said once: the run stops at the first failed write, not a traceback per check after it.
    assert text.count("another process holds it locked") == 1, text
    assert text.count("ERROR at setup") <= 1 and text.count("\n") < 40, text


def test_a_store_deleted_during_g1_is_named_with_what_became_of_the_record(gate_dir):
    gate_dir.makepyfile(test_g1_gone=SUITE.format(
        before="kvgate.store.path.unlink()", after="pass"))
    out = gate_dir.path / "reports"
    result = gate_dir.runpytest("-m", "g1", "--out", str(out))
    text = " ".join((result.stdout.str() + result.stderr.str()).split())
    assert result.ret == 2, text
    assert f"kvgate store {out / 'kvgate.sqlite'} was deleted while the run was writing it" \
        in text, text
    assert "g1.json" in text and "Traceback" not in text, text


@pytest.fixture(autouse=True)
def _no_holder_left(gate_dir):
    yield
    pid = gate_dir.path / "holder.pid"
    if pid.exists():  # the suite kills it; a failed suite may not have
        import os
        import signal
        with __import__("contextlib").suppress(ProcessLookupError):
            os.kill(int(pid.read_text()), signal.SIGKILL)
