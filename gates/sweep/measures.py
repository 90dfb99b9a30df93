"""What a sweep measures, fixed when it begins: a resume on anything else is refused.

A sweep's points are one curve only if every size measured the same thing: the same site and
target, the same arms (their commands, tiers, KV directories), the same limits and the same
workload. The plan keeps each as it was (SweepPlan.measures, flat "key: value" pairs, the
values as JSON); a resume compares the session's with it and names every key that differs
with both values. The attempt tag names a size's evidence files anew when an attempt stopped
mid-size left its files behind: a name is never written (or hashed into the manifest) twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ..core.configuration import Site

# Keys of an arm that change how long kvgate waits, not what the arm measures.
NOT_MEASURED = ("startup_timeout", "stop_timeout", "api_key_env")
SHOWN = 3  # the differences named; the rest are counted


def _flat(prefix: str, value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(f"{prefix}.{key}",
                                                                       item).items()}
    return {prefix: json.dumps(value, sort_keys=True)}


def measured(site: Site, thresholds_sha256: str) -> dict[str, str]:
    """The site (as the sweep's engine runs it) and limits, as the plan keeps them."""
    arms = {name: {k: v for k, v in arm.model_dump(mode="json").items() if k not in NOT_MEASURED}
            for name, arm in site.arms.items() if name in ("baseline", "candidate")}
    workload = site.workload.model_dump(mode="json", exclude={"contexts"})  # set per size
    sweep = site.sweep.model_dump(mode="json", include={"eviction", "gpu_cache", "cpu_tier"})
    return {"site.name": json.dumps(site.site.name),
            "target.directory": json.dumps(str(site.target.directory)),
            "thresholds (SHA-256)": json.dumps(thresholds_sha256),
            **_flat("arms", arms), **_flat("workload", workload), **_flat("sweep", sweep)}


def changed(run_id: str, began: dict[str, str], now: dict[str, str]) -> str:
    """Why a resume would measure something else ("" when it would not, or the plan is older
    than SweepPlan.measures and keeps nothing to compare)."""
    if not began:
        return ""
    # In the plan's order (site, target, limits, arms, workload, sweep), new keys last.
    keys = [k for k in [*began, *(k for k in now if k not in began)]
            if began.get(k) != now.get(k)]
    if not keys:
        return ""
    said = "; ".join(f"{k} = {began.get(k, 'unset')} then, {now.get(k, 'unset')} now"
                     for k in keys[:SHOWN])
    more = f" (and {len(keys) - SHOWN} more)" if len(keys) > SHOWN else ""
    return (f"sweep {run_id} would not measure what it began measuring: {said}{more}: its "
            "points would not be one curve; resume with the site and thresholds files it "
            "began with, or start a new sweep")


def attempt_tag(contexts: int, names: Iterable[str]) -> str:
    """One size's evidence tag: -5ctx, then -5ctx-try2, -5ctx-try3 … while an earlier attempt's
    files (names: the evidence listed or on disk) carry it."""
    names, n = list(names), 1
    while True:
        tag = f"-{contexts}ctx" + (f"-try{n}" if n > 1 else "")
        if not any(re.search(re.escape(tag) + r"(?!-try)(?![0-9])", name) for name in names):
            return tag
        n += 1
