"""gates.inference.machine: the CPU reference around repetitions, and how far the machine moved."""

import pytest

from gates.inference import MachineReadings
from gates.inference.machine import (
    CpuReference,
    DeviceReference,
    cpu_reference,
    device_variation,
    speed_variation,
)


def ref(seconds):
    return CpuReference(seconds={0: seconds, 1: seconds})


def test_speed_variation_is_slowest_over_fastest():
    assert speed_variation([ref(0.010), ref(0.011), ref(0.0105)]) == pytest.approx(10.0)
    assert speed_variation([ref(0.010)]) is None
    assert speed_variation([]) is None


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
