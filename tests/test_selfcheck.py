"""The load generator's self-check: when its own lag could distort what it measures."""

import asyncio
import subprocess
import sys
import time
from dataclasses import dataclass

from aiohttp import web

from gates.loadgen import (
    CpuUse,
    Endpoint,
    LoadSettings,
    LoopLagMonitor,
    judge_self_check,
    run_phase,
)


@dataclass
class Req:
    request_id: str
    prompt: list
    max_tokens: int = 1
    phase: str = "probe"


def test_quiet_loop_is_fit():
    check = judge_self_check([0.0005] * 100, [0.001] * 50)
    assert check.fit and check.reasons == []


def test_loop_lag_over_the_floor_is_unfit_for_fast_responses():
    check = judge_self_check([0.007] * 100, [], ttft_p50=0.05)
    assert not check.fit and "event-loop lag p99 7.0 ms > 5 ms" in check.reasons[0]


def test_loop_lag_budget_grows_with_slow_responses():
    assert judge_self_check([0.007] * 100, [], ttft_p50=2.0).fit  # budget 40 ms
    assert not judge_self_check([0.05] * 100, [], ttft_p50=2.0).fit


def test_schedule_lag_makes_an_open_loop_phase_unfit():
    check = judge_self_check([0.0] * 10, [0.02] * 10)
    assert not check.fit and "schedule lag p99 20.0 ms" in check.reasons[0]


def test_monitor_sees_a_blocked_event_loop():
    async def main():
        monitor = LoopLagMonitor(interval=0.005)
        monitor.start()
        await asyncio.sleep(0.02)
        import time
        time.sleep(0.05)  # block the loop, as a slow synchronous call would
        await asyncio.sleep(0.02)
        monitor.stop()
        return monitor.lags

    assert max(asyncio.run(main())) >= 0.04


def busy_machine(other, own, cores=2):
    """CPU use over a phase as cpu_use reports it: shares of all ``cores``, in %."""
    return CpuUse(seconds=10.0, other_pct=other, engine_pct=0.0, own_pct=own), cores


def test_loop_lag_on_a_busy_machine_says_the_other_processes_did_it():
    cpu, cores = busy_machine(other=80.0, own=20.0)
    check = judge_self_check([0.007] * 100, [], ttft_p50=0.05, cpu=cpu, cores=cores)
    assert not check.fit  # the rule is the same: late timestamps are late whoever caused it
    assert check.reasons == [
        "event-loop lag p99 7.0 ms > 5 ms (the larger of 5 ms and 2% of TTFT p50): other "
        "processes used 80 % of the CPU during the phase (kvgate used 40 % of one core): the "
        "machine is busy, not the generator saturated"]
    assert check.other_cpu_pct == 80.0 and check.own_cpu_pct == 40.0


def test_loop_lag_with_kvgate_on_a_whole_core_says_the_generator_is_saturated():
    cpu, cores = busy_machine(other=5.0, own=49.0)
    [reason] = judge_self_check([0.007] * 100, [], cpu=cpu, cores=cores).reasons
    assert reason.endswith("the load generator is saturated (kvgate used 98 % of one core, "
                           "other processes 5 % of the CPU)")


def test_loop_lag_on_an_idle_generator_says_it_was_held_up():
    cpu, cores = busy_machine(other=5.0, own=5.0)
    [reason] = judge_self_check([0.007] * 100, [], cpu=cpu, cores=cores).reasons
    assert "held up, not busy (kvgate used 10 % of one core" in reason


def test_a_busy_machine_does_not_change_the_verdict():
    cpu, cores = busy_machine(other=95.0, own=1.0)
    for loop, schedule in [([0.0005] * 100, []), ([0.007] * 100, []), ([0.0] * 9, [0.02] * 9)]:
        assert judge_self_check(loop, schedule, cpu=cpu, cores=cores).fit == \
            judge_self_check(loop, schedule).fit
    assert judge_self_check([0.0005] * 100, [], cpu=cpu, cores=cores).reasons == []
    [late] = judge_self_check([0.0] * 9, [0.02] * 9, cpu=cpu, cores=cores).reasons
    assert late.endswith("planned (other processes used 95 % of the CPU: the machine is busy)")


def test_the_summary_line_carries_reasons_and_notes():
    check = judge_self_check([0.007] * 100, [])
    check.notes = ["2 reconnects: …"]
    assert check.line() == ("UNFIT: event-loop lag p99 7.0 ms > 5 ms (the larger of 5 ms and 2% "
                            "of TTFT p50): the load generator is saturated; 2 reconnects: …")
    assert judge_self_check([], []).line() == "fit for a gate"


def test_a_phase_beside_two_busy_loops_records_who_used_the_cpu():
    async def ok(request):
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices": [{"index": 0, "text": "a"}]}\n\ndata: [DONE]\n\n')
        return response

    async def main():
        app = web.Application()
        app.router.add_post("/v1/completions", ok)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            requests = [Req(f"r{i}", [i]) for i in range(40)]
            return await run_phase(requests, [Endpoint(url=url, model="m")],
                                   LoadSettings(concurrency=4))
        finally:
            await runner.cleanup()

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.2)  # let them get going
        result = asyncio.run(main())
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait(30)
    check = result.self_check
    # Whether the hogs made the phase unfit depends on the machine: only the figures are asserted.
    assert check.other_cpu_pct is not None and check.other_cpu_pct >= 0.0
    assert check.own_cpu_pct is not None and check.own_cpu_pct >= 0.0
    assert all(r.ok for r in result.records)
