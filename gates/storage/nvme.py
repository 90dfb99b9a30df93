"""nvme-cli JSON: list, smart-log, id-ctrl and list-subsys, across the formats of 1.x to 2.11.

Pure: parsers take the tool's text and return typed models; ParseError names the command.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, Field

from .blockdev import ParseError, as_int, json_document, json_object, text_field

KELVIN = 273.15


def _list(value: Any, command: str, what: str) -> list:
    if not isinstance(value, list):
        raise ParseError(command, f"{what} is not a JSON list")
    return value


# ---- nvme list -o json -------------------------------------------------------------------

class Namespace(BaseModel):
    """One namespace from ``nvme list``: its block device and the controller's identity."""

    device: str
    nsid: int | None = None
    model: str = ""
    serial: str = ""
    firmware: str = ""
    size: int | None = None  # bytes (PhysicalSize)
    used: int | None = None  # bytes
    sector_size: int | None = None

    @property
    def controller(self) -> str:
        """The controller's character device: /dev/nvme0n1 -> /dev/nvme0."""
        match = re.fullmatch(r"(.*nvme\d+)(?:c\d+)?n\d+(?:p\d+)?", self.device)
        return match.group(1) if match else self.device


def parse_nvme_list(text: str, command: str = "nvme list -o json") -> list[Namespace]:
    """Namespaces in ``nvme list -o json`` (1.x with Index/ProductName; 2.x with GenericPath)."""
    doc = json_object(json_document(text, command), command, "the output")
    if "Devices" not in doc:
        raise ParseError(command, "no 'Devices' list")
    found = []
    for entry in _list(doc["Devices"], command, "'Devices'"):
        entry = json_object(entry, command, "a device entry")
        if "DevicePath" not in entry:
            # nvme-cli 2.x -v nests Subsystems/Controllers/Namespaces: not the simple list.
            raise ParseError(command, "a device entry has no 'DevicePath' (was -v given?)")
        found.append(Namespace(
            device=text_field(entry["DevicePath"]),
            nsid=as_int(entry.get("NameSpace"), command, "NameSpace"),
            model=text_field(entry.get("ModelNumber")),
            serial=text_field(entry.get("SerialNumber")),
            firmware=text_field(entry.get("Firmware")),
            size=as_int(entry.get("PhysicalSize"), command, "PhysicalSize"),
            used=as_int(entry.get("UsedBytes"), command, "UsedBytes"),
            sector_size=as_int(entry.get("SectorSize"), command, "SectorSize")))
    return found


# ---- nvme smart-log -o json --------------------------------------------------------------

WARNING_BITS = {
    "available_spare": "available spare below threshold",
    "temp_threshold": "temperature above or below a threshold",
    "reliability_degraded": "NVM subsystem reliability degraded",
    "ro": "media placed in read-only mode",
    "vmbu_failed": "volatile memory backup device failed",
    "pmr_ro": "persistent memory region read-only",
}


class SmartLog(BaseModel):
    """The SMART / Health log fields G1 judges; temperature in Kelvin as the drive reports it."""

    critical_warning: int
    temperature_k: int
    percent_used: int
    media_errors: int
    available_spare: int | None = None
    spare_threshold: int | None = None
    warning_temp_time: int | None = None  # minutes spent above the warning threshold

    @property
    def temperature_c(self) -> float:
        """Composite temperature in degrees Celsius."""
        return self.temperature_k - KELVIN

    def warnings(self) -> list[str]:
        """The critical-warning bits that are set, in words."""
        return [text for bit, text in enumerate(WARNING_BITS.values())
                if self.critical_warning >> bit & 1]


def _critical_warning(value: Any, command: str) -> int:
    # nvme-cli prints an int; with -v (verbose) 2.x prints {"value": n, "available_spare": 0…}.
    if isinstance(value, dict):
        if "value" in value:
            return as_int(value["value"], command, "critical_warning.value") or 0
        bits = [as_int(value.get(k, 0), command, f"critical_warning.{k}") or 0
                for k in WARNING_BITS]
        return sum(1 << i for i, b in enumerate(bits) if b)
    number = as_int(value, command, "critical_warning")
    if number is None:
        raise ParseError(command, "critical_warning is empty")
    return number


def parse_smart_log(text: str, command: str = "nvme smart-log -o json") -> SmartLog:
    """The health log in ``nvme smart-log -o json``, whichever form critical_warning takes."""
    doc = json_object(json_document(text, command), command, "the output")
    missing = [k for k in ("critical_warning", "temperature", "percent_used", "media_errors")
               if k not in doc and not (k == "percent_used" and "percentage_used" in doc)]
    if missing:
        raise ParseError(command, f"no {', '.join(missing)} field")

    def number(key: str, *aliases: str) -> int | None:
        for name in (key, *aliases):
            if name in doc:
                return as_int(doc[name], command, name)
        return None

    temperature = doc["temperature"]
    if isinstance(temperature, str) and temperature.strip().endswith("C"):
        # A human-readable form ("36 C"): turn it back into Kelvin, the JSON default.
        match = re.match(r"\s*(-?\d+)", temperature)
        if not match:
            raise ParseError(command, f"temperature {temperature!r} is not a number")
        kelvin = int(match.group(1)) + 273
    else:
        kelvin = as_int(temperature, command, "temperature")
    return SmartLog(critical_warning=_critical_warning(doc["critical_warning"], command),
                    temperature_k=kelvin or 0,
                    percent_used=number("percent_used", "percentage_used") or 0,
                    media_errors=number("media_errors") or 0,
                    available_spare=number("avail_spare"),
                    spare_threshold=number("spare_thresh"),
                    warning_temp_time=number("warning_temp_time"))


# ---- nvme id-ctrl -o json ----------------------------------------------------------------

class Controller(BaseModel):
    """Identity and thermal thresholds of a controller (Kelvin; 0 = not reported)."""

    model: str = ""
    serial: str = ""
    firmware: str = ""
    warning_temp_k: int = 0
    critical_temp_k: int = 0
    namespaces: int | None = None  # nn: the most namespaces the controller supports


def parse_id_ctrl(text: str, command: str = "nvme id-ctrl -o json") -> Controller:
    """Model, serial, firmware and WCTEMP/CCTEMP from ``nvme id-ctrl -o json``."""
    doc = json_object(json_document(text, command), command, "the output")
    if "sn" not in doc and "mn" not in doc:
        raise ParseError(command, "no 'sn' or 'mn' field")
    return Controller(model=text_field(doc.get("mn")), serial=text_field(doc.get("sn")),
                      firmware=text_field(doc.get("fr")),
                      warning_temp_k=as_int(doc.get("wctemp"), command, "wctemp") or 0,
                      critical_temp_k=as_int(doc.get("cctemp"), command, "cctemp") or 0,
                      namespaces=as_int(doc.get("nn"), command, "nn"))


# ---- nvme list-subsys -o json ------------------------------------------------------------

class SubsystemPath(BaseModel):
    """One controller path to a subsystem: transport (pcie, tcp, rdma, fc, loop) and state."""

    name: str
    transport: str
    address: str = ""
    state: str = ""
    ana_state: str = ""


class Subsystem(BaseModel):
    """An NVMe subsystem and every path the host has to it."""

    name: str
    nqn: str = ""
    model: str = ""
    serial: str = ""
    paths: list[SubsystemPath] = Field(default_factory=list)


def _paths(value: Any, command: str) -> list[SubsystemPath]:
    paths = []
    for entry in _list(value, command, "'Paths'"):
        entry = json_object(entry, command, "a path entry")
        if "Transport" not in entry:
            raise ParseError(command, "a path entry has no 'Transport'")
        paths.append(SubsystemPath(name=text_field(entry.get("Name")),
                                   transport=text_field(entry["Transport"]).lower(),
                                   address=text_field(entry.get("Address")),
                                   state=text_field(entry.get("State")).lower(),
                                   ana_state=text_field(entry.get("ANAState"))))
    return paths


def _subsystems(entries: Any, command: str) -> list[Subsystem]:
    found: list[Subsystem] = []
    for entry in _list(entries, command, "'Subsystems'"):
        entry = json_object(entry, command, "a subsystem entry")
        if "Name" in entry:
            found.append(Subsystem(name=text_field(entry["Name"]), nqn=text_field(entry.get("NQN")),
                                   model=text_field(entry.get("Model")),
                                   serial=text_field(entry.get("Serial")),
                                   paths=_paths(entry.get("Paths", []), command)))
        elif "Paths" in entry and found:
            # nvme-cli 1.x: a subsystem's paths follow it as a separate {"Paths": […]} object.
            found[-1].paths.extend(_paths(entry["Paths"], command))
        else:
            raise ParseError(command, "a subsystem entry has neither 'Name' nor 'Paths'")
    return found


def parse_list_subsys(text: str, command: str = "nvme list-subsys -o json") -> list[Subsystem]:
    """Subsystems and paths: 2.x's list of hosts, or 1.x's single {"Subsystems": …} object."""
    doc = json_document(text, command)
    hosts = doc if isinstance(doc, list) else [doc]
    found = []
    for host in hosts:
        host = json_object(host, command, "a host entry")
        if "Subsystems" not in host:
            raise ParseError(command, "no 'Subsystems' list")
        found.extend(_subsystems(host["Subsystems"], command))
    return found
