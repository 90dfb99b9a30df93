"""What a timing failure says, and which failures the `timing` marker's one retry is for.

G2 holds the baseline's run-to-run CV and the load generator's own lag against limits: timing
checks a busy machine can fail. A test marked ``@pytest.mark.timing`` raises TimingFailure for
those (tests/conftest.py retries it once); its message names the CPU other processes took during
each repetition, so a reader tells a busy machine from a broken engine. Any other failure is a
plain AssertionError and is not retried.
"""

from __future__ import annotations

import json
import resource
import warnings
from pathlib import Path

from gates.inference import Repetition
from gates.loadgen import CpuUse, cpu_snapshot, cpu_use
from gates.loadgen.cpu import CpuSnapshot

TIMING_CHECKS = ("g2.ttft_p50_cv", "g2.throughput_cv", "g2.loadgen_fit", "g3.loadgen_fit")
G2_REPS = "evidence/g2-baseline-repetitions.json"
G3_REPS = "evidence/g3-candidate-repetitions.json"


class TimingFailure(AssertionError):
    """A timing check failed; the message names what else used the CPU meanwhile."""


class AcceptedUnfair(UserWarning):
    """A timing verdict the machine gave no fair chance, accepted by a test with the reason."""


ACCEPTED = "accepted_unfair"  # the record's key listing what its tests accepted, and why
PROPERTY = "accepted_inconclusive"  # the JUnit property naming it
RUNNING: list = []  # the test pytest is running (tests/conftest.py keeps it): it is marked


def accept_unfair(record: dict, why: str) -> None:
    """Accept a not-PASS timing verdict of ``record`` for ``why``, visibly, never silently.

    Said three ways: a warning; the running test, and every later test handed the record,
    carries the reason as a JUnit <property name="accepted_inconclusive">; and the terminal
    summary lists them (tests/conftest.py).
    """
    if why not in record.setdefault(ACCEPTED, []):
        record[ACCEPTED].append(why)
    for item in RUNNING:
        mark_accepted(item, why)
    warnings.warn(AcceptedUnfair(why), stacklevel=2)


def mark_accepted(item, why: str) -> None:
    """The test item carries the accepted reason as a user property (once)."""
    if (PROPERTY, why) not in item.user_properties:
        item.user_properties.append((PROPERTY, why))


def repetitions(out: Path, record: dict, evidence: str) -> list[Repetition]:
    """The repetitions a record's evidence file holds ([] when the run wrote none)."""
    path = Path(out) / record["run_id"] / evidence
    return [Repetition.model_validate(r) for r in json.loads(path.read_text())] \
        if path.exists() else []


def cpu_lines(out: Path, record: dict, evidence: str = G2_REPS) -> list[str]:
    """Who used the CPU during each repetition behind a record, one line each."""
    return [f"{r.arm} repetition {r.repetition + 1} at concurrency {r.concurrency}: "
            f"{r.cpu.line()}" for r in repetitions(out, record, evidence) if r.cpu is not None]


def contended(out: Path, record: dict, evidence: str, other_cpu_max: float) -> bool:
    """Whether other processes took more than other_cpu_max % of the CPU in any repetition."""
    return any(r.cpu is not None and r.cpu.other_pct > other_cpu_max
               for r in repetitions(out, record, evidence))


def failed(record: dict) -> list[dict]:
    """The record's measurements that did not pass (a REPORTED figure has no limit to pass)."""
    return [m for m in record["measurements"] if m["outcome"] not in ("PASS", "REPORTED")]


def _all_timing(measurements: list[dict]) -> bool:
    return bool(measurements) and all(m["id"] in TIMING_CHECKS for m in measurements)


def only_timing(record: dict) -> bool:
    """Whether every check the record did not pass is a timing check (CV, generator lag)."""
    return _all_timing(failed(record))


def gate_failure(out: Path, record: dict, evidence: str = G2_REPS) -> str:
    """Why a gate's record (G2's by default) did not pass: its failing checks and the CPU used
    in each repetition of ``evidence``."""
    kind = "timing (CPU contention?)" if only_timing(record) else "checks"
    return "\n  ".join([f"{record.get('gate', 'g2').upper()} {record['verdict']} on {kind}:",
                        *(f"{m['name']}: {m['outcome']}: {m['note']}" for m in failed(record)),
                        *cpu_lines(out, record, evidence)])


def errors_only_timing(record: dict) -> bool:
    """Whether the record has ERRORs and every one is a timing check (an unfit load generator,
    a CV the machine's own speed spoiled): the INCONCLUSIVE a busy machine may give."""
    return _all_timing([m for m in record["measurements"] if m["outcome"] == "ERROR"])


def timing_verdict(out: Path, record: dict, name: str, other_cpu_max: float,
                   evidence: str = G3_REPS) -> bool:
    """Whether the timing measurement ``name`` PASSed; a MARGINAL or an ERROR while other
    processes took more than other_cpu_max % of the CPU (measured in the record's repetitions)
    is accepted, visibly (accept_unfair), and False; any other outcome fails, saying who
    used the CPU meanwhile."""
    m = next(m for m in record["measurements"] if m["name"] == name)
    if m["outcome"] == "PASS":
        return True
    busy = cpu_lines(out, record, evidence)
    assert m["outcome"] in ("MARGINAL", "ERROR") and contended(
        out, record, evidence, other_cpu_max), (m["outcome"], m["note"], busy)
    accept_unfair(record, f"{record['gate'].upper()} {name}: {m['outcome']} ({m['note']}), "
                  f"while other processes took more than {other_cpu_max:g} % of the CPU: "
                  + "; ".join(busy))
    return False


def raise_if_timing(out: Path, g2: dict) -> None:
    """TimingFailure when G2 failed on its timing checks alone, naming the CPU contention."""
    if only_timing(g2):
        raise TimingFailure(gate_failure(out, g2))


def children_cpu() -> CpuSnapshot:
    """The host's CPU now, with every child this test waited for (a `kvgate run` and what it
    started and reaped: the simulator, fio) counted as the engine: what is left is what other
    processes took from it."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return cpu_snapshot().model_copy(update={"engine": c.ru_utime + c.ru_stime})


def run_cpu(before: CpuSnapshot) -> CpuUse:
    """Who used the CPU since ``before`` (children_cpu), the run under test as the engine."""
    return cpu_use(before, children_cpu())
