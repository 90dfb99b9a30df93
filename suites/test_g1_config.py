"""G1 arrival acceptance: is the delivered array configured as ordered?

RAID, XFS alignment, mounts, capacity, NVMe and NVMe-oF, NIC and RoCE, GPUDirect Storage, and the
engine's own KV I/O on the target. One test per check; each
records Measurements through `check`. A check that does not apply to the site (site.toml
[topology]) is NOT APPLICABLE with the reason; a fact that could not be collected is ERROR.
"""

import pytest

from gates.storage import g1config as g1c

pytestmark = [pytest.mark.gate, pytest.mark.g1]


@pytest.fixture
def limits(kvgate):
    return kvgate.thresholds.g1


def test_raid_level(g1_inventory, kvgate, check):
    check(g1c.raid_level(g1_inventory, kvgate.site))


def test_raid_members(g1_inventory, kvgate, check):
    check(g1c.raid_members(g1_inventory, kvgate.site))


def test_raid_state(g1_inventory, kvgate, check):
    check(g1c.raid_state(g1_inventory, kvgate.site))


def test_raid_failed_members(g1_inventory, kvgate, check):
    check(g1c.raid_failed_members(g1_inventory, kvgate.site))


def test_raid_chunk(g1_inventory, kvgate, check):
    check(g1c.raid_chunk(g1_inventory, kvgate.site))


def test_xfs_stripe_unit(g1_inventory, kvgate, check):
    check(g1c.xfs_stripe_unit(g1_inventory, kvgate.site))


def test_xfs_stripe_width(g1_inventory, kvgate, check):
    check(g1c.xfs_stripe_width(g1_inventory, kvgate.site))


def test_filesystem_type(g1_inventory, kvgate, check):
    check(g1c.filesystem_type(g1_inventory, kvgate.site))


def test_mount_options(g1_inventory, kvgate, check):
    check(g1c.mount_options(g1_inventory, kvgate.site))


def test_capacity(g1_inventory, kvgate, limits, check):
    check(g1c.capacity(g1_inventory, kvgate.site, limits))


def test_namespace_count(g1_inventory, kvgate, check):
    check(g1c.namespace_count(g1_inventory, kvgate.site))


def test_sector_size(g1_inventory, kvgate, check):
    check(g1c.sector_size(g1_inventory, kvgate.site))


def test_nvmeof_transport(g1_inventory, kvgate, check):
    check(g1c.fabric_transport(g1_inventory, kvgate.site))


def test_nvmeof_paths_live(g1_inventory, kvgate, check):
    check(g1c.fabric_paths_live(g1_inventory, kvgate.site))


def test_smart_critical_warning(g1_inventory, limits, check):
    check(*g1c.smart_critical_warning(g1_inventory, limits))


def test_smart_media_errors(g1_inventory, limits, check):
    check(*g1c.smart_media_errors(g1_inventory, limits))


def test_smart_percent_used(g1_inventory, limits, check):
    check(*g1c.smart_percent_used(g1_inventory, limits))


def test_nvme_temperature(g1_inventory, limits, check):
    check(*g1c.smart_temperature(g1_inventory, limits))


def test_link_speed(g1_inventory, kvgate, check):
    check(*g1c.link_speed(g1_inventory, kvgate.site))


def test_mtu(g1_inventory, kvgate, check):
    check(*g1c.mtu(g1_inventory, kvgate.site))


def test_rdma_ports_active(g1_inventory, kvgate, check):
    check(g1c.rdma_ports_active(g1_inventory, kvgate.site))


def test_roce_v2(g1_inventory, kvgate, check):
    check(g1c.roce_v2(g1_inventory, kvgate.site))


def test_gds_platform(g1_inventory, kvgate, check):
    check(g1c.gds_platform(g1_inventory, kvgate.site))


def test_gds_configuration(g1_inventory, kvgate, check):
    # cuFile's silent POSIX fallbacks move the KV, only not GPU-direct: deviations to acknowledge
    # (each a Deviation of Cause.GDS_FALLBACK, typed where gates.storage found it).
    for found in g1c.gds_deviations(g1_inventory, kvgate.site):
        kvgate.deviate("g1", found)
    check(g1c.gds_configuration(g1_inventory, kvgate.site))


def test_gds_path(g1_inventory, kvgate, check):
    check(g1c.gds_path(g1_inventory, kvgate.site))


def test_gds_limits(g1_inventory, kvgate, check):
    check(g1c.gds_limits(g1_inventory, kvgate.site))


def test_engine_kv_io(g1_inventory, check):
    check(g1c.engine_kv_io(g1_inventory))
