"""Capacity: the highest open-loop request rate and SSE events/s the load generator sustains on
one core before its own self-check (gates.loadgen.selfcheck) says it is the bottleneck.

The generator (this process, ``gates.loadgen.run_phase`` in rate mode, constant arrivals) is
pinned to CPU 0; the simulator runs in its own process on CPU 1 with fast engine physics
(``_simproc.py --fast``: prefill 10M tokens/s, 1 ms per output token at any batch size) so the
simulated engine's speed is not what is being measured. The rate is stepped up, bounded in
steps and seconds, once with short outputs and once with long outputs (many events per
request); a series stops at its first step that is unfit or not sustained.

Per step: offered rate; achieved dispatch rate ((n - 1) / first-to-last t0); ok requests;
content events/s over the DESIGN §5 span (first t0 -> last content event); the self-check's
event-loop lag p99 and schedule lag p99 (limits: 5 ms and 10 ms); fit; CPU use of generator
and simulator (a simulator near 100 % means the simulator, not the generator, was the limit).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from _common import (
    Background,
    Sim,
    machine,
    ms,
    own_cpu_seconds,
    pin_generator,
    print_table,
    prompts,
)

from gates.loadgen import Endpoint, LoadSettings, run_phase, summarize
from gates.loadgen.selfcheck import LOOP_LAG_P99_MAX, SCHEDULE_LAG_P99_MAX

SHORT_RATES = [50, 100, 200, 300, 400, 500, 600, 800, 1000, 1300, 1600, 2000]
LONG_RATES = [5, 10, 20, 40, 60, 80, 100, 120, 160, 200]
SUSTAINED = 0.9  # achieved dispatch rate must reach this share of the offered rate


def step(sim: Sim, model: str, tag: str, rate: float, seconds: float, prompt_tokens: int,
         max_tokens: int) -> dict:
    """One open-loop phase at ``rate`` requests/s for about ``seconds``; its row."""
    n = max(20, round(rate * seconds))
    reqs = prompts(f"cap-{tag}-{rate:g}", n, prompt_tokens, max_tokens)
    settings = LoadSettings(mode="rate", rate=rate, arrival="constant", stall_timeout=10,
                            request_timeout=30)
    cpu0, sim0, t = own_cpu_seconds(), sim.cpu_seconds(), time.monotonic()
    result = asyncio.run(asyncio.wait_for(
        run_phase(reqs, [Endpoint(url=sim.url, model=model)], settings), seconds + 45))
    elapsed = time.monotonic() - t
    gen_cpu, sim_cpu = own_cpu_seconds() - cpu0, sim.cpu_seconds() - sim0
    s = summarize(result.records, result.wall)
    t0s = sorted(r.t0 for r in result.records)
    achieved = (len(t0s) - 1) / (t0s[-1] - t0s[0]) if len(t0s) > 1 and t0s[-1] > t0s[0] else 0
    events = sum(len(r.content_times) for r in result.records if r.ok)
    check = result.self_check
    ok = s.outcomes.get("ok", 0)
    sustained = achieved >= SUSTAINED * rate and ok == n
    return {"rate": rate, "n": n, "achieved": achieved, "ok": ok,
            "events_s": events / s.span if s.span else 0.0, "loop": check.loop_lag_p99,
            "sched": check.schedule_lag_p99, "fit": check.fit, "sustained": sustained,
            "gen_cpu": gen_cpu / elapsed, "sim_cpu": sim_cpu / elapsed,
            "reasons": check.reasons}


def series(sim: Sim, model: str, tag: str, rates: list[float], args, max_tokens: int,
           budget: float) -> list[dict]:
    """Step the rate up until a step is unfit or not sustained, or the time budget is spent."""
    rows, start = [], time.monotonic()
    for rate in rates:
        if time.monotonic() - start > budget:
            print(f"{tag}: time budget of {budget:g} s spent, stopping", file=sys.stderr)
            break
        row = step(sim, model, tag, rate, args.step_seconds, args.prompt_tokens, max_tokens)
        rows.append(row)
        print(f"{tag} {rate:g}/s: achieved {row['achieved']:.0f}/s, "
              f"{row['events_s']:.0f} events/s, fit={row['fit']} "
              f"({time.monotonic() - start:.0f} s)", file=sys.stderr)
        if not (row["fit"] and row["sustained"]):
            break
    return rows


def _fmt(row: dict) -> list[str]:
    return [f"{row['rate']:g}", f"{row['achieved']:.0f}", f"{row['ok']}/{row['n']}",
            f"{row['events_s']:,.0f}", ms(row["loop"], 2), ms(row["sched"], 2),
            "yes" if row["fit"] else "NO", "yes" if row["sustained"] else "no",
            f"{row['gen_cpu']:.0%}", f"{row['sim_cpu']:.0%}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Example: python bench/capacity.py")
    parser.add_argument("--step-seconds", type=float, default=3.0,
                        help="seconds of arrivals per step (default 3)")
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--short-tokens", type=int, default=4, help="short outputs")
    parser.add_argument("--long-tokens", type=int, default=256, help="long outputs")
    parser.add_argument("--short-rates", type=float, nargs="+", default=SHORT_RATES)
    parser.add_argument("--long-rates", type=float, nargs="+", default=LONG_RATES)
    parser.add_argument("--budget", type=float, default=50.0,
                        help="seconds per series before it stops stepping (default 50)")
    parser.add_argument("--plain", action="store_true", help="plain text table, not rich")
    args = parser.parse_args(argv)
    if not 0.5 <= args.step_seconds <= 30 or args.budget <= 0:
        parser.error("--step-seconds must be in [0.5, 30] and --budget positive")
    pinning = pin_generator()
    with Sim(fast=True) as sim:
        background = Background(sim)
        model = "kvgate-sim-tiny-fast"
        results = [(f"short outputs ({args.short_tokens} tokens)",
                    series(sim, model, "short", args.short_rates[:20], args, args.short_tokens,
                           args.budget)),
                   (f"long outputs ({args.long_tokens} tokens)",
                    series(sim, model, "long", args.long_rates[:20], args, args.long_tokens,
                           args.budget))]
        load = background.report()
    print(f"# capacity — {machine()}; {pinning}; simulator fast physics; "
          f"{args.prompt_tokens}-token prompts; constant arrivals, {args.step_seconds:g} s per "
          f"step; self-check limits: loop lag p99 {LOOP_LAG_P99_MAX * 1e3:g} ms, schedule lag "
          f"p99 {SCHEDULE_LAG_P99_MAX * 1e3:g} ms; {load}")
    cols = ["offered req/s", "achieved req/s", "ok/sent", "events/s", "loop-lag p99 ms",
            "sched-lag p99 ms", "fit", "sustained", "gen CPU", "sim CPU"]
    for title, rows in results:
        print_table(f"Capacity, {title}", cols, [_fmt(r) for r in rows], plain=args.plain)
        good = [r for r in rows if r["fit"] and r["sustained"]]
        last = good[-1] if good else None
        stop = rows[-1] if rows and rows[-1] is not last else None
        print(f"{title}: last fit step "
              + (f"{last['rate']:g} req/s offered, {last['achieved']:.0f} req/s achieved, "
                 f"{last['events_s']:,.0f} events/s" if last else "none")
              + ("" if stop is None else
                 f"; stopped at {stop['rate']:g} req/s: "
                 + ("; ".join(stop["reasons"]) or "not sustained (achieved or ok short)"))
              + ("" if stop is not None or not rows else "; never tripped within the steps"))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
