"""gates.binding: a gate is bound to the limits, target and arms of the gate it stands on."""

from __future__ import annotations

import json

from gates.binding import BINDING_FACT, binding_deviations, site_binding
from gates.core.configuration import Site
from gates.core.verdicts import GateRecord

SITE = {"site": {"name": "s"}, "target": {"directory": "/mnt/array/kvgate"},
        "fio": {"file_size": "1MiB"},
        "arms": {"candidate": {"kind": "launch", "engine": "vllm", "model": "m",
                               "command": ["vllm", "serve", "--port", "{port}"],
                               "kv_dir": "/mnt/array/kvgate/kv"}}}


def upstream(site: Site, sha: str = "a" * 64) -> GateRecord:
    return GateRecord(gate="g2", run_id="r2", site="s", started="t", thresholds_sha256=sha,
                      thresholds_revision="1",
                      facts={BINDING_FACT: json.dumps(site_binding(site, site.arms))})


def test_nothing_changed_is_no_deviation():
    site = Site.model_validate(SITE)
    assert binding_deviations(upstream(site), "a" * 64, site_binding(site, site.arms)) == []


def test_changed_limits_under_the_same_revision_are_named_with_both_hashes():
    site = Site.model_validate(SITE)
    [text] = binding_deviations(upstream(site), "b" * 64, site_binding(site, site.arms))
    assert text.startswith("limits changed since G2 (run r2)") and "aaaaaaaa" in text
    assert "bbbbbbbb" in text and "revision '1'" in text


def test_a_changed_target_arm_command_or_eviction_is_named_by_key():
    site = Site.model_validate(SITE)
    moved = Site.model_validate(SITE | {"target": {"directory": "/elsewhere"},
                                        "workload": {"eviction": "none"}})
    moved.arms["candidate"].command = ["vllm", "serve", "--kv-dir", "/tmp", "--port", "{port}"]
    texts = binding_deviations(upstream(site), "a" * 64, site_binding(moved, moved.arms))
    assert [t.split(": ")[1] for t in texts] == ["arms.candidate", "target", "workload"]
    assert any("directory was '/mnt/array/kvgate', is '/elsewhere'" in t for t in texts)
    assert any(t.endswith("eviction was 'reset', is 'none'") for t in texts)


def test_env_values_are_never_bound_they_may_hold_secrets():
    site = Site.model_validate(SITE)
    site.arms["candidate"].env = {"HF_TOKEN": "secret"}
    assert "secret" not in json.dumps(site_binding(site, site.arms))
