"""G1 checks of the storage network: NIC link speed and MTU, RDMA ports, RoCE v2 GIDs.

Pure: RDMA and RoCE are CheckSpecs run by `_g1check.judge`; link speed and MTU are NicSpecs,
judged once per NIC named in site.toml [topology] interfaces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.configuration import Site
from ...core.verdicts import Limit, Measurement
from ..inventory import Inventory
from ..net import NicState
from .spec import Case, CheckSpec, Reading, ReadResult, Unmeasured, measure, none_of, unavailable


@dataclass(frozen=True)
class NicSpec:
    """A check of each storage NIC against one site.toml [topology] minimum."""

    name: str
    key: str  # the [topology] key that sets the minimum
    limit: Callable[[Any], Limit]
    read: Callable[[NicState, Any, Limit], ReadResult]


def _nics(inv: Inventory, site: Site, name: str, limit: Limit | None) -> Measurement | None:
    topo = site.topology
    if inv.nics.skipped and topo.transport in ("tcp", "rdma") and (
            topo.link_speed or topo.mtu):
        return Measurement.error(name, f"the site reaches the array over {topo.transport} but "
                                 "site.toml [topology] interfaces is empty: name the NICs",
                                 limit)
    return unavailable(name, inv.nics, limit)


def judge_nics(spec: NicSpec, inv: Inventory, site: Site) -> list[Measurement]:
    """The spec judged on every storage NIC, or why it cannot be."""
    want = getattr(site.topology, spec.key)
    limit = spec.limit(want) if want else None
    if gone := _nics(inv, site, spec.name, limit):
        return [gone]
    if limit is None:
        return [Measurement.not_applicable(spec.name, f"site.toml [topology] sets no {spec.key}")]
    return [measure(f"{spec.name} ({nic.name})", spec.read(nic, want, limit), limit,
                    inv.nics.evidence) for nic in inv.nics.value]


def _speed(nic: NicState, want: float, limit: Limit) -> ReadResult:
    if nic.operstate not in ("up", "unknown") or nic.speed_gbps is None:
        if nic.operstate == "up":
            return Unmeasured(f"{nic.name} is up but its driver reports no speed (sysfs "
                              "speed -1)")
        return Reading(0.0, f"{nic.name} link is {nic.operstate}")
    return Reading(nic.speed_gbps, f"{nic.name} negotiated {nic.speed_gbps:g} Gb/s" + (
        f"; ordered {limit.lo:g} Gb/s — check the cable, optics and switch port"
        if nic.speed_gbps < limit.lo else ""))


def _mtu(nic: NicState, want: int, limit: Limit) -> Reading:
    return Reading(nic.mtu or 0, f"{nic.name} MTU {nic.mtu}" + (
        "" if (nic.mtu or 0) >= want else f"; raise it to {want} on the NIC and on every "
        "switch port in the path"))


LINK_SPEED = NicSpec("Link speed", "link_speed",
                     lambda want: Limit.at_least(want * 8 / 1e9, "Gb/s",
                                                 key="site.topology.link_speed"), _speed)
MTU = NicSpec("MTU", "mtu", lambda want: Limit.at_least(want, "B", key="site.topology.mtu"),
              _mtu)


def _ports_active(c: Case) -> Reading:
    links = c.got
    if not links:
        return Reading(1, "no RDMA port found for the site's interfaces (site.toml [topology] "
                       "interfaces / rdma_device)")
    down = [link for link in links if link.state != "ACTIVE"]
    return Reading(len(down), ", ".join(f"{link.name} {link.state}/{link.physical_state} on "
                                        f"{link.netdev}" for link in links))


def _roce_v2(c: Case) -> Reading:
    v2 = [g for g in c.got if g.type == "RoCE v2"]
    kinds = sorted({g.type for g in c.got})
    return Reading(len(v2), f"{len(v2)} RoCE v2 GID(s) of {len(c.got)} populated" + (
        f" (types seen: {', '.join(kinds)})" if kinds else ""))


RDMA_PORTS = CheckSpec("RDMA ports active", "rdma", _ports_active,
                       none_of("ports", "site.topology.rdma_device"))
ROCE_V2 = CheckSpec("RoCE v2 GIDs", "gids", _roce_v2,
                    lambda *_: Limit.at_least(1, "GIDs", key="site.topology.transport"))
