"""gates.inference.machine: the CPU reference around repetitions, and how far the machine moved."""

import pytest

from gates.core.configuration import CvPlan, G2Limits
from gates.inference import MachineReadings
from gates.inference.machine import (
    CpuReference,
    DeviceReference,
    cpu_reference,
    cpu_speeds,
    device_speeds,
    device_variation,
    distinct,
    speed_variation,
)


def ref(seconds):
    return CpuReference(seconds={0: seconds, 1: seconds})


def test_speed_variation_is_slowest_over_fastest():
    assert speed_variation([ref(0.010), ref(0.011), ref(0.0105)]) == pytest.approx(10.0)
    assert speed_variation([ref(0.010)]) is None
    assert speed_variation([]) is None


def test_a_reading_shared_by_two_repetitions_counts_once():
    a, b, c = ref(0.010), ref(0.012), ref(0.011)
    assert distinct([[a, b], [b, c], [c, a]]) == [a, b, c, a]
    assert distinct([[a], [a, b]]) == [a, b]  # no start: the first bracket has its after only
    assert distinct([]) == []


def test_speeds_are_the_readings_inverse_time_and_skip_what_has_none():
    assert cpu_speeds([ref(0.010), ref(0.020), CpuReference(seconds={})]) == [100.0, 50.0]
    assert device_speeds([DeviceReference(bytes_per_s=5.0),
                          DeviceReference(error="fio exited 1")]) == [5.0]


def test_the_machine_control_does_not_grow_with_the_number_of_readings():
    # Stationary noise (the machine at one speed, each reading 3 % off at random), seeded:
    # the range of 40 readings is about twice that of 4 (what G2 held against its limit
    # before); the CV G2 now uses stays where it was, and its interval narrows.
    import random
    import statistics
    rng = random.Random(7)
    plan = CvPlan(G2Limits())

    def readings(n):
        return [ref(0.010 * rng.gauss(1, 0.03)) for _ in range(n)]

    def typical(n, figure):
        return statistics.median(figure(readings(n)) for _ in range(400))

    cv = lambda rs: plan.control(cpu_speeds(rs)).point  # noqa: E731
    width = lambda rs: plan.control(cpu_speeds(rs)).hi  # noqa: E731
    assert typical(40, speed_variation) > 1.8 * typical(4, speed_variation)
    assert typical(40, cv) == pytest.approx(typical(4, cv), rel=0.15)
    assert typical(40, cv) == pytest.approx(3.0, rel=0.1)
    assert typical(40, width) < typical(4, width)


def test_the_mean_is_over_the_cpus():
    assert CpuReference(seconds={0: 0.01, 1: 0.03}).mean == pytest.approx(0.02)


def test_one_reading_between_two_repetitions_serves_both():
    readings = iter([ref(1.0), ref(2.0), ref(3.0)])
    machine = MachineReadings(read=lambda: next(readings))
    machine.start()
    assert [r.mean for r in machine.bracket()["machine"]] == [1.0, 2.0]
    assert [r.mean for r in machine.bracket()["machine"]] == [2.0, 3.0]


def test_without_a_start_the_first_bracket_has_only_its_after():
    machine = MachineReadings(read=lambda: ref(1.0))
    assert [r.mean for r in machine.bracket()["machine"]] == [1.0]


def test_without_a_device_reader_a_bracket_has_no_device_readings():
    machine = MachineReadings(read=lambda: ref(1.0))
    machine.start()
    assert machine.bracket()["device"] == []


def test_the_device_is_read_with_the_cpu_once_between_two_repetitions():
    speeds = iter([100.0, 80.0, 120.0])
    machine = MachineReadings(read=lambda: ref(1.0),
                              device=lambda: DeviceReference(bytes_per_s=next(speeds)))
    machine.start()
    assert [d.bytes_per_s for d in machine.bracket()["device"]] == [100.0, 80.0]
    assert [d.bytes_per_s for d in machine.bracket()["device"]] == [80.0, 120.0]


def test_device_variation_is_fastest_over_slowest_and_skips_failed_readings():
    assert device_variation([DeviceReference(bytes_per_s=100.0),
                             DeviceReference(bytes_per_s=50.0)]) == pytest.approx(100.0)
    assert device_variation([DeviceReference(bytes_per_s=100.0),
                             DeviceReference(error="could not read")]) is None
    assert device_variation([]) is None


def test_the_real_reference_times_every_allowed_cpu_and_restores_affinity():
    import os
    before = os.sched_getaffinity(0)
    r = cpu_reference()
    assert set(r.seconds) == before and all(s > 0 for s in r.seconds.values())
    assert os.sched_getaffinity(0) == before
