"""What the G4 tests share: a site whose candidate is the simulator, the G3 record a soak starts
from, and a load that moves a fake clock instead of sending requests."""

from __future__ import annotations

import json
from pathlib import Path

from _chain import SITE, add_gate, m, open_run

from gates.core.verdicts import GateRecord, Limit, RequestOutcome, RequestRecord
from gates.store import Store

SIM = '["{python}", "-m", "gates.sim", "--profile", "tiny", "--port", "{port}"'
# Arms a soak never starts, for a site that names all three (G2/G3's arms): port 9 answers none.
ENDPOINT_ARMS = """[arms.baseline]
kind = "endpoint"
urls = ["http://127.0.0.1:9"]
[arms.recompute]
kind = "endpoint"
urls = ["http://127.0.0.1:9"]
"""


def soak_site(target: Path, *, target_extra: str = "", sections: str = "",
              soak_extra: str = "", engine: str | None = None, other_arms: str = "") -> str:
    """A site.toml for a short soak of the simulator on ``target``: ``target_extra`` lines in
    [target], ``sections`` (a [topology], say) before [soak], ``soak_extra`` lines first in
    [soak], the candidate's ``engine`` word, and ``other_arms`` after it."""
    engine_line = f'engine = "{engine}"\n' if engine else ""
    return f"""
[site]
name = "{SITE}"
[target]
directory = "{target}"
create = true
{target_extra}[fio]
file_size = "16MiB"
{sections}[soak]
{soak_extra}sessions = 2
turns = 2
first_tokens = 128
turn_tokens = 16
output_tokens = 8
verify_size = "4MiB"
[arms.candidate]
kind = "launch"
{engine_line}model = "kvgate-sim-tiny"
startup_timeout = "60s"
stop_timeout = "10s"
command = {SIM}, "--kv-dir", "{{kv_dir}}"]
kv_dir = "{target}/kv-candidate"
{other_arms}"""


def g3_for_soak(out: Path, reduction: float, throughput: float = 1.0) -> GateRecord:
    """A G3 record (TTFT p50 reduction ``reduction`` % against a 30 % floor: PASS at 60, FAIL at
    5), with the candidate repetitions G4 takes its operating point from."""
    with Store(out) as store:
        folder = open_run(store, "g3-run")
        reps = folder / "evidence" / "g3-candidate-repetitions.json"
        reps.write_text(json.dumps([{"arm": "candidate", "concurrency": 2, "repetition": r,
                                     "ttfts": [0.1], "output_throughput": throughput, "sent": 4,
                                     "errors": 0} for r in range(2)]))
        store.add_evidence("g3-run", reps)
        record, _ = add_gate(store, "g3-run", "g3", measurements=[
            m("g3.ttft_p50_reduction", reduction, Limit.at_least(30, "%"), 2)])
    return record


class FakeLoad:
    """Two requests per window; the clock moves by the window's length. ``fail(i)`` of window
    i's requests fail, ``ttft(i)`` is their TTFT, ``crash_at`` raises half-way through a
    window (a kill -9), ``check(i)`` is called first."""

    def __init__(self, clock, fail=lambda i: 0, crash_at=None, ttft=lambda i: 0.1, check=None):
        self.clock, self.fail, self.crash_at, self.ttft, self.check = (clock, fail, crash_at,
                                                                      ttft, check)

    def run(self, index, seconds):
        if self.check:
            self.check(index)
        if index == self.crash_at:
            self.clock.sleep(seconds / 2)
            raise RuntimeError("kill -9 in the middle of a window")
        self.clock.sleep(seconds)
        bad = self.fail(index)
        return [RequestRecord(request_id=f"w{index}-{k}", t0=0.0, ttft=self.ttft(index),
                              e2e=1.0, content_times=[self.ttft(index), 1.0], output_tokens=500,
                              outcome=RequestOutcome.HTTP_ERROR if k < bad
                              else RequestOutcome.OK) for k in range(2)]
