"""Measuring a sweep: G3's paired cold-recovery probe at each working set, committed one by one.

Every size runs the baseline and candidate arms of the chosen engine (as G3 does: the same
arms, eviction, page-cache drop, machine controls and evidence chain) in a few ABBA pairs with
the workload's contexts set to the size; its point is committed to the store before the next
size starts, so a killed sweep resumes at the first size without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack

from ..core.configuration import Site
from ..core.quantities import format_size
from ..engines import (
    ArmRunner,
    EngineRun,
    ProtocolError,
    abba_pair,
    arm_problem,
    engine_site,
    kv_bytes_per_token,
    machine_readings,
)
from ..inference import Pair, SweepPoint, measured_pair, sweep_point
from ..model import SweepSize, sweep_sizes
from ..proof import ProofContext
from ..session import GateSession
from ..storage import step_progress
from .forecast import proofs_of
from .measures import attempt_tag, changed, measured
from .store import SweepPlan, SweepStore

GATE = "sweep"  # names its logs and device references in the evidence, as a gate's would
SECONDS_PER_CONTEXT = 0.5  # a guess for the progress bar's ETA; the bar corrects as runs finish


def sweep_run(run: EngineRun, site: Site) -> EngineRun:
    """The chosen engine as the sweep runs it: [sweep] eviction, and on the site's own arms
    [sweep] gpu_cache and cpu_tier (an installed engine's arms are kvgate's: said, not set)."""
    sweep = site.sweep
    tiers = {k: v for k in ("gpu_cache", "cpu_tier") if (v := getattr(sweep, k)) is not None}
    arms, said = run.arms, run.engine
    if tiers and run.install is None:  # the site's model checked that its arms take them
        arms = {name: arm.model_copy(update=tiers) for name, arm in arms.items()}
    elif tiers:
        said += (f"; [sweep] {' and '.join(tiers)} not applied: {run.tool}'s arms are "
                 "kvgate's own")
    return run.model_copy(update={"arms": arms, "engine": said,
                                  "workload": run.workload | {"eviction": sweep.eviction}})


def chosen(session: GateSession) -> EngineRun:
    """The session's engine as the sweep runs it (sweep_run)."""
    return sweep_run(session.engine(), session.site)


def context_bytes(session: GateSession) -> int:
    """KV bytes of one context of the chosen engine's workload (ValueError, OSError: the
    model in [sizing] cannot be sized)."""
    run = chosen(session)
    site = engine_site(session.site, run)
    return site.workload.context_tokens * kv_bytes_per_token(site, run)


def plan_of(session: GateSession, per_context: int) -> SweepPlan:
    """The sizes as whole contexts of the chosen engine's workload (ValueError names a size)."""
    sweep = session.site.sweep
    return SweepPlan(run_id=session.run_id, site_file=str(session.site_file.path),
                     thresholds_file=str(session.thresholds_file.path),
                     sizes=sweep_sizes(sweep.sizes, sweep.concurrency, per_context),
                     pairs=sweep.pairs, concurrency=sweep.concurrency,
                     context_bytes=per_context, engine=chosen(session).engine,
                     measures=measures_now(session))


def measures_now(session: GateSession) -> dict[str, str]:
    """What this session's sweep would measure (gates.sweep.measures)."""
    return measured(engine_site(session.site, chosen(session)), session.thresholds_file.sha256)


def resume_problem(session: GateSession, plan: SweepPlan, per_context: int) -> str:
    """Why this run cannot go on measuring the plan ("" if it can): the points would not be
    of one engine and one workload."""
    if problem := changed(plan.run_id, plan.measures, measures_now(session)):
        return problem
    engine = chosen(session).engine
    if plan.engine and engine != plan.engine:
        return (f"sweep {plan.run_id} began on {plan.engine}; this machine now chooses "
                f"{engine} ([engine] prefer and what is installed): its points would not be of "
                "one engine; start a new sweep")
    if per_context != plan.context_bytes:
        return (f"sweep {plan.run_id} began with contexts of {plan.context_bytes:,} B of KV; "
                f"the site's workload now gives {per_context:,} B: its points would not be of "
                "one workload; start a new sweep")
    return ""


def point_site(site: Site, contexts: int) -> Site:
    """The engine's site with the workload's contexts set to one size's."""
    kind = type(site.workload)
    return site.model_copy(update={"workload": kind.model_validate(
        site.workload.model_dump() | {"contexts": contexts})})


def _failed(size: SweepSize, plan: SweepPlan, why: str, seconds: float = 0.0,
            set_aside: int = 0) -> SweepPoint:
    return SweepPoint(asked=size.asked, contexts=size.contexts, working_set=size.working_set,
                      concurrency=plan.concurrency, error=why, seconds=seconds,
                      set_aside=set_aside)


def _pairs(session: GateSession, site: Site, plan: SweepPlan, tag: str, bar,
           step_s: float, aside: list[Pair]) -> list[Pair]:
    """The size's ABBA pairs, both arms entered once (a kept server starts once); aside gets
    the pairs set aside because the load generator was unfit in them."""
    # Each size's device references are numbered on their own: named by the size's tag.
    machine, _ = machine_readings(session, site, f"{GATE}{tag}", ("baseline", "candidate"),
                                  session.thresholds.g2.device_reference)
    pairs: list[Pair] = []
    with ExitStack() as stack:
        arms = {name: stack.enter_context(ArmRunner.of(session, site, name, GATE, machine,
                                                       tag=tag))
                for name in ("baseline", "candidate")}
        machine.start()

        def pair(i: int, again: int) -> Pair:
            return abba_pair(arms, plan.concurrency, i, again, lambda name: bar.tick(
                f"pair {i + 1}/{plan.pairs}{' again' if again else ''}, {name}", 0, step_s),
                lambda: bar.step_done(step_s))
        for i in range(plan.pairs):  # a pair the load generator was unfit in: again, as G3
            pairs.append(measured_pair(lambda again, i=i: pair(i, again), aside,
                                       lambda: False))
    return pairs


def measure(session: GateSession, run: EngineRun, plan: SweepPlan, size: SweepSize,
            proofs: tuple[ProofContext, int | None], tag: str = "") -> SweepPoint:
    """One size's point, or a point that says why it has no figures; proofs: what the
    storage-read proof holds the probes against (engines.proof_context), and KV bytes/token;
    tag: its evidence files' (measures.attempt_tag)."""
    site = point_site(engine_site(session.site, run), size.contexts)
    for name in ("baseline", "candidate"):
        if problem := arm_problem(site, name, run, session.site_file.path):
            return _failed(size, plan, problem)
    started, aside = time.monotonic(), []
    step_s = size.contexts * SECONDS_PER_CONTEXT
    with step_progress(f"sweep {format_size(size.working_set)} ({size.contexts} contexts)",
                       2 * plan.pairs * step_s) as bar:
        try:
            pairs = _pairs(session, site, plan, tag or f"-{size.contexts}ctx", bar, step_s,
                           aside)
        except ProtocolError as exc:
            return _failed(size, plan, str(exc), time.monotonic() - started)
    seconds = time.monotonic() - started
    unfit = sorted({x for p in pairs for r in p if not r.fit for x in r.unfit_reasons})
    if unfit:  # the generator measured itself, not the storage: no figure (G3 re-measures)
        return _failed(size, plan, "INCONCLUSIVE: the load generator was unfit: "
                       + "; ".join(unfit), seconds, len(aside))
    proof, per_token = proofs
    try:
        point = sweep_point(size.asked, size.contexts, size.working_set, plan.concurrency,
                            pairs, session.thresholds.g3, session.thresholds.decision, proof,
                            per_token, seconds)
    except ValueError as exc:  # a repetition without a successful probe
        return _failed(size, plan, f"no figure: {exc}", seconds, len(aside))
    said = next((r.server for p in pairs for r in p if r.server), "")
    return point.model_copy(update={"set_aside": len(aside), "server": said, "simulated": any(
        r.simulated for p in pairs for r in p)})


def run_sweep(session: GateSession, plan: SweepPlan, sweeps: SweepStore,
              say: Callable[[str], None]) -> dict[int, SweepPoint]:
    """Every size of the plan that has no point yet, each committed as it finishes."""
    run = chosen(session)
    proofs = proofs_of(session, run)
    done = sweeps.points(plan.run_id)
    for idx, size in enumerate(plan.sizes):
        if idx in done:
            continue
        evidence = session.store.run_dir(plan.run_id) / "evidence"
        names = [*sweeps.store.manifest(plan.run_id), *(p.name for p in evidence.glob("*"))]
        point = measure(session, run, plan, size, proofs, attempt_tag(size.contexts, names))
        sweeps.add_point(plan.run_id, idx, point)
        done[idx] = point
        say(point_line(idx, len(plan.sizes), point))
    return done


def point_line(idx: int, total: int, p: SweepPoint) -> str:
    """One size's result for the terminal."""
    head = f"[{idx + 1}/{total}] {format_size(p.working_set)} ({p.contexts} contexts): "
    if p.error or not (p.ttft_reduction and p.throughput_gain):
        return head + (p.error or "no figures")
    r, g = p.ttft_reduction, p.throughput_gain
    return head + (f"TTFT p50 reduction {r.point:.1f} % [{r.lo:.1f}, {r.hi:.1f}], throughput "
                   f"gain {g.point:+.1f} % [{g.lo:+.1f}, {g.hi:+.1f}] at {100 * r.level:.4g} %;"
                   f" proof {p.proof_word} ({p.seconds:.0f} s)")
