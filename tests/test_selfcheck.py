"""The load generator's self-check: when its own lag could distort what it measures."""

import asyncio

from gates.inference import LoopLagMonitor, judge_self_check


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
