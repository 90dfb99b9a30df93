"""What binds a gate to the one it stands on: the same limits, the same target, the same arms.

A gate's record carries the site keys that define what it measured (the target directory and
device, every arm's command, endpoints and KV directories, the eviction mode) and the
thresholds file's SHA-256. A later gate compares its own with its upstream record's: a changed
limits file or a changed key is a deviation naming the key and both values (or both hashes),
in the record and so in the summary, never a silent link: Cause.LIMITS_CHANGED, SITE_CHANGED,
or SOAK_OTHER_ENGINE when the arm G4 soaks is not the one G3 measured. Pure.
"""

from __future__ import annotations

import json

from .core.configuration import Arm, Site
from .core.verdicts import Cause, Deviation, GateRecord

BINDING_FACT = "site binding"  # the record fact holding the bound keys, as JSON
_ARM_KEYS = ("kind", "engine", "command", "urls", "metrics_urls", "kv_dir", "kv_root", "model")
_ENGINE_KEYS = {"kind", "engine", "command", "model"}  # what makes an arm another engine


def site_binding(site: Site, arms: dict[str, Arm]) -> dict[str, str]:
    """The keys that define what a gate measured, as text (arm env values are left out)."""
    out = {"target.directory": str(site.target.directory), "target.device": site.target.device,
           "workload.eviction": site.workload.eviction}
    for name, arm in sorted(arms.items()):
        for key in _ARM_KEYS:
            value = getattr(arm, key)
            out[f"arms.{name}.{key}"] = value if isinstance(value, str) else json.dumps(
                value if not hasattr(value, "__fspath__") else str(value))
    return out


def binding_deviations(upstream: GateRecord, thresholds_sha256: str,
                       binding: dict[str, str]) -> list[Deviation]:
    """What changed since the upstream record, one deviation each; [] when nothing did."""
    before = upstream.gate.upper()
    out = []
    if upstream.thresholds_sha256 and upstream.thresholds_sha256 != thresholds_sha256:
        out.append(Deviation(cause=Cause.LIMITS_CHANGED, text=(
            f"limits changed since {before} (run {upstream.run_id}): thresholds SHA-256 "
            f"{upstream.thresholds_sha256[:16]}… then, {thresholds_sha256[:16]}… now "
            f"(revision {upstream.thresholds_revision!r} then)")))
    try:
        theirs = json.loads(upstream.facts.get(BINDING_FACT, "{}"))
    except ValueError:
        theirs = {}
    changed: dict[str, dict[str, str]] = {}
    for key in sorted(set(theirs) & set(binding)):
        if theirs[key] != binding[key]:
            group, _, name = key.rpartition(".")
            changed.setdefault(group, {})[name] = (f"{name} was {_short(theirs[key])}, "
                                                   f"is {_short(binding[key])}")
    # One deviation per arm (or table): a G4 soaking another engine than G3 measured is one
    # finding per arm, not one per key.
    out += [Deviation(cause=_cause(upstream.gate, group, parts), text=(
        f"site changed since {before} (run {upstream.run_id}): {group}: "
        + "; ".join(parts.values()))) for group, parts in changed.items()]
    return out


def _cause(upstream_gate: str, group: str, names: dict[str, str]) -> Cause:
    """G4 stands on G3 and soaks its candidate arm: that arm's engine, command or model changed
    is another engine soaked than G3 measured; any other key is the site changed."""
    if upstream_gate == "g3" and group.startswith("arms.") and set(names) & _ENGINE_KEYS:
        return Cause.SOAK_OTHER_ENGINE
    return Cause.SITE_CHANGED


def _short(value: str, most: int = 90) -> str:
    text = repr(value)
    return text if len(text) <= most else text[:most - 1] + "…"
