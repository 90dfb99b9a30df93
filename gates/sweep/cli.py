"""`kvgate sweep`: where the candidate starts to pay, working set by working set (issue #28).

The sweep is a run of its own (a run id, evidence, the target locked while it measures) with no
gate record: its result is reports/sweep-<run_id>/ (sweep.html, sweep.json, sweep.json.sig).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import psutil
from rich.console import Console
from rich.markup import escape

from ..core.configuration import ConfigError
from ..core.quantities import format_size
from ..engines import engine_site
from ..inference import SweepPoint, break_even, proof_from
from ..loadgen import workload_hash, workload_plan
from ..model import space_needed, tiers
from ..options import RunConfig, RunOptions, add_run_options, run_id
from ..report import SweepRecord, write_sweep
from ..session import GateSession
from ..storage import TargetError
from ..store import Store, StoreError, utc_now
from .forecast import forecast
from .run import chosen, context_bytes, plan_of, point_site, resume_problem, run_sweep
from .store import SweepPlan, SweepStore

EXAMPLES = """examples:
  kvgate sweep                               the sizes in ./site.toml [sweep] (or the default
                                             series), reports under ./reports/sweep-<run>/
  kvgate sweep --site examples/vllm-lmcache.toml --out /data/kvgate-reports
  kvgate sweep --resume 20261205T130000Z-3f9a1c   continue a sweep that was stopped

Each working set in site.toml [sweep] sizes is G3's cold-recovery probe (the same arms,
page-cache drop and evidence chain; [sweep] eviction, by default none: the working set itself
evicts the GPU cache) at [sweep] concurrency, in [sweep] pairs ABBA pairs of the baseline and
candidate arms; a size's point is committed before the next starts. The page draws both
gains against the working set with the memory tiers kvgate knows (the candidate's gpu_cache
and cpu_tier, or [sweep]'s, the host's memory), and says from which size up
both gains clear G3's limits and the evidence chain proves storage reads. It has no verdict.

exit codes: 0 every size measured, 1 a size that could not be measured (its reason on the
page), 2 bad input (the files, a size, a run to resume that has no sweep or would measure
something else, no room on the target), 130 interrupted (continue with --resume)"""


def add_sweep_commands(commands: argparse._SubParsersAction) -> None:
    """Register `kvgate sweep`."""
    sweep = commands.add_parser(
        "sweep", help="G3's paired probe at a series of KV working sets: where the candidate "
        "starts to pay", formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLES)
    add_run_options(sweep.add_argument, only=("site", "thresholds", "out"),
                    inherit=("site", "thresholds"),
                    inherited_from="{default}, or the resumed sweep's")
    sweep.add_argument("--resume", type=run_id, default="", metavar="RUN_ID",
                       help="continue the sweep of RUN_ID at its first size without a point")


def _error(text: str) -> int:
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(text)}",
                                               highlight=False)
    return 2


def _resumed(args: argparse.Namespace) -> tuple[RunOptions, SweepPlan | None, str]:
    """The run options (a resume: its run id and files) and the stored plan, or why not."""
    options = RunOptions.from_namespace(args)
    if not args.resume:
        options.site = args.site or Path("site.toml")
        options.thresholds = args.thresholds or Path("thresholds.toml")
        return options, None, ""
    try:
        with Store.reading(options.out) as store:
            plan = SweepStore(store).plan(args.resume) \
                if store.has_table("sweep_plans") else None
    except StoreError:  # no store there at all
        plan = None
    if plan is None:
        return options, None, f"no sweep {args.resume} in {options.out}: start one with " \
                              "`kvgate sweep`"
    if (options.out / f"sweep-{args.resume}").exists():
        return options, None, (f"sweep {args.resume} is finished: its page is "
                               f"{options.out / f'sweep-{args.resume}'}/ (kvgate never "
                               "overwrites a sweep)")
    options.run_id = options.sweep_resume = args.resume
    options.site = args.site or Path(plan.site_file)
    options.thresholds = args.thresholds or Path(plan.thresholds_file)
    return options, plan, ""


INTERRUPTED = 130  # the shell's code for Ctrl-C: nothing failed, the sweep is only paused


def _interrupted(plan: SweepPlan, sweeps: SweepStore, out: Path) -> int:
    done = len(sweeps.points(plan.run_id))
    Console(stderr=True, soft_wrap=True).print(
        f"[yellow]interrupted[/]: sweep {plan.run_id} stopped; {done} of {len(plan.sizes)} "
        "working sets are committed (the size it was measuring is measured again, its "
        f"files kept): continue with `kvgate sweep --resume {plan.run_id} --out "
        f"{escape(str(out))}`", highlight=False)
    return INTERRUPTED


def _room(session: GateSession, plan: SweepPlan) -> str:
    """Why the target cannot hold the largest size in both arms' directories ("" if it can)."""
    target = session.site.target
    need = space_needed(plan.sizes) + target.min_free
    try:
        free = psutil.disk_usage(str(target.directory)).free
    except OSError as exc:
        return f"cannot read the free space of the target {target.directory}: {exc}"
    if free >= need:
        return ""
    return (f"the target {target.directory} has {format_size(free)} free; the largest working "
            f"set needs {format_size(space_needed(plan.sizes))} in the baseline's and the "
            f"candidate's KV directories plus [target] min_free {format_size(target.min_free)}: "
            "drop the largest sizes from [sweep] sizes, or free space")


def sweep_command(args: argparse.Namespace, console: Console,
                  say_embedded: Callable[[RunConfig, Console], None]) -> int:
    """Plan (or read back) the sweep, measure every size without a point, write its page."""
    options, plan, problem = _resumed(args)
    if problem:
        return _error(problem)
    config = RunConfig.load(options)
    say_embedded(config, console)
    try:
        session = GateSession.open(options, config)
    except (TargetError, ValueError) as exc:
        return _error(str(exc))
    try:
        sweeps = SweepStore(session.store)
        try:
            per_context = context_bytes(session)
        except (ValueError, OSError) as exc:
            raise ConfigError(config.site_file.path, [
                f"key 'sizing.model': cannot size the workload's KV: {exc}"]) from None
        if plan is None:
            try:
                plan = plan_of(session, per_context)
            except ValueError as exc:  # a size the concurrency cannot reach, or two alike
                raise ConfigError(config.site_file.path, [f"key 'sweep.sizes': {exc}"]) \
                    from None
            sweeps.save_plan(plan)
        if problem := resume_problem(session, plan, per_context) or _room(session, plan):
            return _error(problem)
        console.print(f"sweep {plan.run_id}: {len(plan.sizes)} working sets "
                      f"({', '.join(format_size(s.working_set) for s in plan.sizes)}), "
                      f"{plan.pairs} ABBA pairs each at concurrency {plan.concurrency}, "
                      f"engine {chosen(session).engine}", highlight=False, markup=False)
        try:
            points = run_sweep(session, plan, sweeps,
                               lambda line: console.print(line, highlight=False, markup=False))
        except KeyboardInterrupt:  # Ctrl-C: every committed point is kept, as G3's and G4's
            return _interrupted(plan, sweeps, options.out)
        record = sweep_record(session, plan, points)
        files = write_sweep(options.out, record)
    finally:
        session.finish()
        session.store.close()
    for line in summary_lines(record, files):
        console.print(line, highlight=False, markup=False)
    return 1 if any(p.error for p in record.points) else 0


def sweep_record(session: GateSession, plan: SweepPlan,
                 points: dict[int, SweepPoint]) -> SweepRecord:
    """The record of the sweep as measured: its points in size order, tiers and findings."""
    run = chosen(session)
    site = engine_site(session.site, run)
    workload = point_site(site, plan.sizes[0].contexts).workload
    ordered = [points[i] for i in sorted(points)]
    candidate = site.arms.get("candidate")
    found = tiers(psutil.virtual_memory().total, candidate.cpu_tier if candidate else None,
                  candidate.gpu_cache if candidate else None)
    model, why_not = forecast(session, run, [s.working_set for s in plan.sizes], found)
    return SweepRecord(
        run_id=plan.run_id, created=utc_now(), site=session.site.site.name,
        engine=run.engine + "".join(sorted({f"; the server said: {p.server}" for p in ordered
                                            if p.server})),
        # The servers' own word where they answered, the configuration where none did.
        simulated=any(p.simulated for p in ordered) or (
            not any(p.server for p in ordered)
            and any(site.arms[n].engine == "kvgate-sim" for n in ("baseline", "candidate"))),
        workload_hash=workload_hash(workload_plan(workload), eviction=workload.eviction),
        thresholds_revision=session.thresholds.meta.revision,
        thresholds_sha256=session.thresholds_file.sha256, concurrency=plan.concurrency,
        pairs=plan.pairs, context_bytes=plan.context_bytes, points=ordered,
        tiers=found, forecast=model, notes=[why_not] if why_not else [],
        break_even=(b.working_set if (b := break_even(ordered)) else None),
        proof_from=(p.working_set if (p := proof_from(ordered)) else None),
        sizes_planned=len(plan.sizes), decision=session.thresholds.decision,
        evidence=session.store.manifest(plan.run_id))


def summary_lines(r: SweepRecord, files: dict[str, Path]) -> list[str]:
    """What the sweep found, and where its page is."""
    out = ["both gains clear G3's limits at every size (each measured) from " + (
        f"{format_size(r.break_even)} up" if r.break_even is not None else "no size up")]
    out.append("the evidence chain proves storage reads at every size (each measured) from " + (
        f"{format_size(r.proof_from)} up" if r.proof_from is not None else "no size up"))
    out += [f"{kind:>6}: {path}" for kind, path in files.items()]
    return out
