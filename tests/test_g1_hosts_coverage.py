"""G1's fio rules are over the hosts the site planned (#43): a planned host that sent no entry of
a job is "not read" with why, and no bandwidth, latency or IOPS figure, nor "the worst host's"
steady state, may PASS without it.

On real fio output: two network-namespace hosts (tests/_netns.py) running G1's own steps,
recorded in tests/data/fio/hosts2/ (see its README row), and once live on the netns hosts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gates.core.configuration import Ceilings, FioSettings, G1Limits
from gates.core.verdicts import G1, Outcome
from gates.core.verdicts.measures import ONE_READING
from gates.storage import StepOutcome, g1_steps, parse_fio_json
from gates.storage import g1 as _g1
from gates.storage import g1hosts as _hosts
from gates.storage import g1shared as _shared
from gates.storage.fio import combine
from gates.storage.fiorun import plan

DATA = Path(__file__).parent / "data" / "fio"
HOSTS2 = DATA / "hosts2"
A, B = "169.254.132.2", "169.254.132.6"  # the recording's two hosts
FIO = FioSettings(hosts=[A, B], qd_sweep=[1, 4], file_size="8MiB")
STEPS = {s.key: s for s in g1_steps(FIO)}
NO_CEILINGS = Ceilings()


def limits(**kw) -> G1Limits:
    # Floors below one host's figure: a rule summing one host alone would PASS them.
    values = {"seq_read_bw_min": "100 MB/s", "seq_write_bw_min": "100 MB/s",
              "kv_restore_bw_min": "100 MB/s", "randread_4k_qd1_p99_max": "10ms",
              "randread_4k_iops_min": 1000, "steady_state_spread_max": 60,
              "steady_state_slope_max": 60, **kw}
    return G1Limits(**values)


def document(key: str, drop=lambda entry: False, **change) -> dict:
    """A recorded two-host step's JSON less the client_stats entries ``drop`` picks (as fio
    would write it had they not come), with ``change`` set on host B's entries."""
    text = (HOSTS2 / f"fio-{key}.json").read_text()
    found = json.loads(text[text.index("\n{") + 1:])
    found["client_stats"] = [e for e in found["client_stats"] if not drop(e)]
    for entry in found["client_stats"]:
        if entry.get("hostname") == B and entry["jobname"] != "All clients":
            entry.update(change)
    return found


def recorded(key: str, drop=lambda entry: False, **change) -> StepOutcome:
    """A recorded two-host step as run_step hands it over (with the step's plan)."""
    report = parse_fio_json(json.dumps(document(key, drop, **change)))
    return StepOutcome(report=report.model_copy(update={"planned": plan(STEPS[key], FIO)}),
                       evidence=[f"evidence/fio-{key}.json"])


def of_host(host: str, *jobs: str):
    return lambda e: e.get("hostname") == host and (not jobs or e["jobname"] in jobs)


def assert_names_b(m, job: str, figure: bool = False) -> None:
    """ERROR naming host B as not read; ``figure``: the value over A is kept for the reader."""
    assert m.outcome is Outcome.ERROR, m
    assert (m.value is not None) is figure
    assert m.coverage.what == "hosts" and (m.coverage.expected, m.coverage.read) == (2, 1)
    assert f"not read: {B} fio reported no job named {job!r} from it" in m.note, m.note
    assert m.evidence[0].startswith("hosts read 1 of 2 (50%)"), m.evidence


# ---- every planned host read: the figures over both ----------------------------------------

@pytest.mark.parametrize("key", ["seqread", "kvrestore"])
def test_both_hosts_read_sum_and_pass(key):
    step = recorded(key)
    m = _g1.bandwidth(key, step, limits(), NO_CEILINGS)
    both = sum(e.read.bw_bytes for e in step.report.named(key))
    assert {e.hostname for e in step.report.named(key)} == {A, B}
    assert m.outcome is Outcome.PASS and m.value * 1e6 == pytest.approx(both)
    assert m.coverage.describe() == "hosts read 2 of 2"


# ---- a planned host that sent no entry of the job ------------------------------------------

@pytest.mark.parametrize("key", ["seqread", "kvrestore"])
def test_a_host_missing_from_the_report_is_an_error_naming_it_not_a_smaller_sum(key):
    step = recorded(key, of_host(B))
    alone = combine(step.report.named(key), "read").bw_bytes
    assert alone > 100e6  # what the rule summed before: one host's, above the floor (PASS)
    assert_names_b(_g1.bandwidth(key, step, limits(), NO_CEILINGS), key)


def test_steady_state_with_a_host_missing_is_not_judged_on_the_other_alone():
    for m in _g1.steady_state("kvrestore", recorded("kvrestore", of_host(B)), limits()):
        assert_names_b(m, "kvrestore", figure=True)


def test_a_host_without_a_steady_state_block_is_not_read():
    step = recorded("seqread")
    for entry in step.report.client_stats:
        if entry.hostname == B:
            entry.steadystate = None
    spread, slope = _g1.steady_state("seqread", step, limits())
    for m in (spread, slope):
        assert m.outcome is Outcome.ERROR, m
        assert f"not read: {B} job 'seqread' has no steady-state block" in m.note, m.note


def test_a_steady_state_fail_on_the_hosts_read_stands():
    # The worst host: one not read could only be worse, so a FAIL found on A is final.
    spread, _ = _g1.steady_state("kvrestore", recorded("kvrestore", of_host(B)),
                                 limits(steady_state_spread_max=0.001))
    assert spread.outcome is Outcome.FAIL and spread.coverage.read == 1


def test_qd1_latency_with_a_host_missing_is_an_error():
    assert_names_b(_g1.qd1_latency(recorded("randread-qd1", of_host(B)), limits()),
                   "randread-qd1")


def test_qd_sweep_with_one_depth_missing_on_one_host_is_an_error_naming_both():
    step = recorded("qd-sweep", of_host(B, "randread-qd4"))
    assert step.report.named("randread-qd4")  # A's QD4 entry is there: fio "has" the job
    assert_names_b(_g1.qd_sweep(step, limits(), [1, 4]), "randread-qd4")
    healthy = _g1.qd_sweep(recorded("qd-sweep"), limits(), [1, 4])
    assert healthy.outcome is Outcome.PASS and healthy.coverage.read == 2


# ---- a planned host whose entry ended with an error, or carries no figure -------------------

EIO = "error 5 (EIO, Input/output error)"
JOBS = {"seqread": "seqread", "kvrestore": "kvrestore", "randread-qd1": "randread-qd1",
        "qd-sweep": "randread-qd1"}  # the job each step's rules name first


def rules(key: str, step: StepOutcome) -> list:
    """Every G1 rule over the hosts of one step."""
    if key == "randread-qd1":
        return [_g1.qd1_latency(step, limits())]
    if key == "qd-sweep":
        return [_g1.qd_sweep(step, limits(), [1, 4])]
    return [_g1.bandwidth(key, step, limits(), NO_CEILINGS), *_g1.steady_state(key, step,
                                                                                limits())]


@pytest.mark.parametrize("key", JOBS)
def test_a_host_whose_entry_ended_with_an_error_is_not_read_naming_it(key):
    healthy = rules(key, recorded(key))
    assert {m.outcome for m in healthy} == {Outcome.PASS}, healthy  # what B's error caps
    for m in rules(key, recorded(key, error=5)):
        assert m.outcome is Outcome.ERROR, m
        assert m.coverage.what == G1[m.id].over == "hosts"
        assert (m.coverage.expected, m.coverage.read) == (2, 1), m.coverage
        assert f"not read: {B} job {JOBS[key]!r} ended with {EIO}" in m.note, m.note


def test_a_host_whose_job_moved_no_bytes_is_not_read_not_a_smaller_sum():
    step = recorded("kvrestore", read={"io_bytes": 0, "bw_bytes": 0})
    assert combine(step.report.named("kvrestore"), "read").bw_bytes > 100e6  # A alone PASSes
    m = _g1.bandwidth("kvrestore", step, limits(), NO_CEILINGS)
    assert m.outcome is Outcome.ERROR and m.value is None
    assert f"not read: {B} job 'kvrestore' moved no bytes (read)" in m.note, m.note


def test_a_host_that_counted_no_latency_is_not_read_not_left_out_of_the_merged_p99():
    entries = document("randread-qd1")["client_stats"]
    read = next(e for e in entries if e.get("hostname") == B)["read"]
    step = recorded("randread-qd1", read={**read, "clat_ns": {"N": 0}})
    m = _g1.qd1_latency(step, limits())
    assert m.outcome is Outcome.ERROR and m.value is None
    assert f"not read: {B} job 'randread-qd1' counted no completion latency" in m.note, m.note


@pytest.mark.parametrize(("change", "why"), [
    ({"error": 5}, f"{B} job 'kvrestore' ended with {EIO}"),
    ({"drop": of_host(B)}, f"{B} fio reported no job named 'kvrestore' from it")])
def test_a_step_fio_failed_on_one_host_names_it_in_its_coverage(tmp_path, change, why):
    """run_step records the plan; the suite hands its error on with the report (as
    fixtures/g1.py does): every rule is an ERROR whose coverage names the host."""
    from gates.storage import run_step
    from gates.storage.runner import Completed, ScriptedRunner

    def fio(argv):
        output = Path(next(a for a in argv if a.startswith("--output=")).split("=", 1)[1])
        output.write_text(json.dumps(document("kvrestore", **change)))
        return Completed(argv, 1 if "error" in change else 0, "", "")
    run = run_step(ScriptedRunner(fio), STEPS["kvrestore"], FIO, tmp_path, tmp_path)
    assert run.report.planned == {"kvrestore": [A, B]} and B in run.error, run.error
    step = StepOutcome(report=run.report, error=run.error)
    for m in rules("kvrestore", step):
        assert m.outcome is Outcome.ERROR and m.note == run.error, m
        assert m.evidence[0] == f"hosts read 1 of 2 (50%); not read: {why}", m.evidence


# ---- the shared array's rules (g1hosts) over the same planned hosts --------------------------

def shared_rules(step: StepOutcome) -> list:
    lim = limits(hosts_aggregate_bw_min="100 MB/s", hosts_spread_max=90)
    return [_hosts.aggregate(step, lim), _hosts.spread(step, lim), _hosts.merged_p99(step)]


def test_the_shared_array_rules_over_every_planned_host():
    step = recorded("kvrestore")
    aggregate, spread, p99 = shared_rules(step)
    assert (aggregate.outcome, spread.outcome, p99.outcome) == (
        Outcome.PASS, Outcome.PASS, Outcome.REPORTED)
    assert all(m.coverage.describe() == "hosts read 2 of 2" for m in (aggregate, spread, p99))
    assert [m.name for m in _hosts.per_host(step)] == [f"KV-restore read on {h}" for h in (A, B)]


@pytest.mark.parametrize(("change", "why"), [
    ({"drop": of_host(B)}, f"{B} fio reported no job named 'kvrestore' from it"),
    ({"error": 5}, f"{B} job 'kvrestore' ended with {EIO}")])
def test_the_shared_array_rules_name_a_planned_host_not_read(change, why):
    step = recorded("kvrestore", **change)
    for m in shared_rules(step):
        assert m.outcome is Outcome.ERROR and m.value is None, m
        assert m.note.startswith(f"hosts read 1 of 2 (50%); not read: {why}"), m.note
    first, second = _hosts.per_host(step)
    assert (first.name, first.outcome) == (f"KV-restore read on {A}", Outcome.REPORTED)
    assert (second.name, second.outcome) == (f"KV-restore read on {B}", Outcome.ERROR)
    assert second.note == why.removeprefix(f"{B} ")


def test_a_scaling_level_missing_a_planned_host_is_named_not_drawn_lower():
    alone = recorded("kvrestore", of_host(B))  # A alone, as a one-host level runs it
    one = alone.model_copy(update={"report": alone.report.model_copy(
        update={"planned": {"kvrestore": [A]}})})
    curve = _shared.scaling({1: one, 2: recorded("kvrestore")})
    assert curve.outcome is Outcome.REPORTED and "2: " in curve.note, curve
    lost = _shared.scaling({1: one, 2: recorded("kvrestore", of_host(B))})
    assert lost.outcome is Outcome.ERROR and lost.note == (
        f"2 hosts: hosts read 1 of 2 (50%); not read: {B} fio reported no job named "
        "'kvrestore' from it"), lost.note


def test_a_client_report_without_its_plan_is_an_error():
    step = recorded("kvrestore")
    bare = StepOutcome(report=step.report.model_copy(update={"planned": None}))
    m = _g1.bandwidth("kvrestore", bare, limits(), NO_CEILINGS)
    assert m.outcome is Outcome.ERROR and "not which hosts" in m.note, m.note


def test_a_host_the_step_did_not_plan_is_an_error():
    step = recorded("kvrestore")
    one = StepOutcome(report=step.report.model_copy(update={"planned": {"kvrestore": [A]}}))
    m = _g1.bandwidth("kvrestore", one, limits(), NO_CEILINGS)
    assert m.outcome is Outcome.ERROR and f"from {B}, which the step did not plan" in m.note


# ---- every rule stamps with its coverage: healthy one-host and two-host reports -------------

def _local(name: str, job: str, direction: str = "read") -> StepOutcome:
    """A recorded one-host read job, renamed; for ``direction`` "write" its figures moved to
    the write side."""
    document = json.loads((DATA / name).read_text())
    for entry in document["jobs"]:
        entry["jobname"] = job
        if direction == "write":
            entry["read"], entry["write"] = entry["write"], entry["read"]
    return StepOutcome(report=parse_fio_json(json.dumps(document)))


def _every_rule(steps: dict[str, StepOutcome], depths: list[int]):
    lim = limits(steady_state_spread_max=100, steady_state_slope_max=100)
    bandwidths = ("seqread", "seqwrite", "kvrestore")
    return [*(_g1.bandwidth(key, steps[key], lim, NO_CEILINGS) for key in bandwidths),
            *(m for key in bandwidths for m in _g1.steady_state(key, steps[key], lim)),
            _g1.qd1_latency(steps["randread-qd1"], lim),
            _g1.qd_sweep(steps["qd-sweep"], lim, depths)]


def test_g1_measurements_stamp_with_their_coverage():
    """Every G1 rule over hosts stamps what it found on recorded fio
    output, one host and two, each with the coverage its declaration is over."""
    one = {"seqread": _local("steadystate_attained.json", "seqread"),
           # fio recorded no local write job with a steady-state window: a read one stands in
           "seqwrite": _local("steadystate_attained.json", "seqwrite", "write"),
           "kvrestore": _local("steadystate_attained.json", "kvrestore"),
           "randread-qd1": _local("randread_4k_qd1.json", "randread-qd1"),
           "qd-sweep": StepOutcome(report=parse_fio_json((DATA / "qd_sweep.json").read_text()))}
    two = {key: recorded(key) for key in ("seqread", "seqwrite", "kvrestore", "randread-qd1",
                                          "qd-sweep")}
    for steps, depths, hosts in ((one, [1, 4, 16, 32], 1), (two, [1, 4], 2)):
        found = _every_rule(steps, depths)
        assert {m.id for m in found} == {d.id for d in G1.by_id.values()
                                         if d.over == "hosts"}  # every G1 rule over hosts
        for m in found:
            assert m.outcome in (Outcome.PASS, Outcome.MARGINAL, Outcome.FAIL), m
            assert m.coverage.what == G1[m.id].over, m
            assert m.coverage.describe() == f"hosts read {hosts} of {hosts}", m
    verify = _g1.verify_errors(StepOutcome(report=parse_fio_json(
        (DATA / "verify_flipped.json").read_text())))
    assert G1[verify.id].over == ONE_READING and verify.outcome is Outcome.FAIL


# ---- live: run_step on two netns hosts records the plan the rules read ----------------------

@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_run_step_on_two_netns_hosts_plans_both_and_a_lost_entry_names_the_host(tmp_path):
    from _netns import test_hosts

    from gates.storage import SubprocessRunner, run_step
    target, evidence = tmp_path / "target", tmp_path / "evidence"
    target.mkdir()
    evidence.mkdir()
    fio = {"file_size": "8MiB", "runtime": "7s", "ioengine": "psync", "direct": False,
           "steady_state": {"criterion": "bw:50%", "window": "5s", "ramp": "1s"},
           "timeout": "60s", "kv_jobs": 1, "precondition_passes": 1}
    local = FioSettings(**fio)
    assert run_step(SubprocessRunner(), g1_steps(local)[0], local, target, evidence).ok
    with test_hosts(2, logs=tmp_path) as hosts:
        settings = FioSettings(**fio, hosts=hosts.addresses)
        step = next(s for s in g1_steps(settings) if s.key == "kvrestore")
        run = run_step(SubprocessRunner(), step, settings, target, evidence)
    assert run.ok, run.error
    assert run.report.planned == {"kvrestore": hosts.addresses}
    second = hosts.addresses[1]
    lost = run.report.model_copy(update={"client_stats": [
        e for e in run.report.client_stats if e.hostname != second]})
    m = _g1.bandwidth("kvrestore", StepOutcome(report=lost), limits(kv_restore_bw_min="1 MB/s"),
                      NO_CEILINGS)
    assert m.outcome is Outcome.ERROR and f"not read: {second}" in m.note, m.note
