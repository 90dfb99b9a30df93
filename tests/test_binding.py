"""gates.binding: a gate is bound to the limits, target and arms of the gate it stands on."""

from __future__ import annotations

import json

from gates.binding import BINDING_FACT, binding_deviations, site_binding
from gates.core.configuration import Site
from gates.core.verdicts import Cause, GateRecord

SITE = {"site": {"name": "s"}, "target": {"directory": "/mnt/array/kvgate"},
        "fio": {"file_size": "1MiB"},
        "arms": {"candidate": {"kind": "launch", "engine": "vllm", "model": "m",
                               "command": ["vllm", "serve", "--port", "{port}"],
                               "kv_dir": "/mnt/array/kvgate/kv"}}}


def upstream(site: Site, sha: str = "a" * 64, gate: str = "g2") -> GateRecord:
    return GateRecord(gate=gate, run_id="r2", site="s", started="t", thresholds_sha256=sha,
                      thresholds_revision="1",
                      facts={BINDING_FACT: json.dumps(site_binding(site, site.arms))})


def test_nothing_changed_is_no_deviation():
    site = Site.model_validate(SITE)
    assert binding_deviations(upstream(site), "a" * 64, site_binding(site, site.arms)) == []


def test_changed_limits_under_the_same_revision_are_named_with_both_hashes():
    site = Site.model_validate(SITE)
    [found] = binding_deviations(upstream(site), "b" * 64, site_binding(site, site.arms))
    text = found.text
    assert found.cause is Cause.LIMITS_CHANGED
    assert text.startswith("limits changed since G2 (run r2)") and "aaaaaaaa" in text
    assert "bbbbbbbb" in text and "revision '1'" in text


def test_a_changed_target_arm_command_or_eviction_is_named_by_key():
    site = Site.model_validate(SITE)
    moved = Site.model_validate(SITE | {"target": {"directory": "/elsewhere"},
                                        "workload": {"eviction": "none"}})
    moved.arms["candidate"].command = ["vllm", "serve", "--kv-dir", "/tmp", "--port", "{port}"]
    found = binding_deviations(upstream(site), "a" * 64, site_binding(moved, moved.arms))
    assert {d.cause for d in found} == {Cause.SITE_CHANGED}
    texts = [d.text for d in found]
    assert [t.split(": ")[1] for t in texts] == ["arms.candidate", "target", "workload"]
    assert any("directory was '/mnt/array/kvgate', is '/elsewhere'" in t for t in texts)
    assert any(t.endswith("eviction was 'reset', is 'none'") for t in texts)


def test_env_values_are_never_bound_they_may_hold_secrets():
    site = Site.model_validate(SITE)
    site.arms["candidate"].env = {"HF_TOKEN": "secret"}
    assert "secret" not in json.dumps(site_binding(site, site.arms))


def test_g4_soaking_another_engine_than_g3_measured_is_its_own_cause():
    site = Site.model_validate(SITE)
    other = Site.model_validate(SITE)
    other.arms["candidate"].engine = "sglang"
    other.arms["candidate"].kv_dir = "/mnt/array/kvgate/kv2"
    moved = Site.model_validate(SITE | {"target": {"directory": "/elsewhere"}})
    [soaked] = binding_deviations(upstream(site, gate="g3"), "a" * 64,
                                  site_binding(other, other.arms))
    assert soaked.cause is Cause.SOAK_OTHER_ENGINE and "engine was 'vllm'" in soaked.text
    # Only a G4 on G3 soaks the candidate: G3 on G2 with another engine is the site changed,
    # as is a G4 whose arm kept its engine and moved its KV directory or target.
    [g3] = binding_deviations(upstream(site), "a" * 64, site_binding(other, other.arms))
    assert g3.cause is Cause.SITE_CHANGED
    other.arms["candidate"].engine = "vllm"
    [kv, target] = binding_deviations(upstream(site, gate="g3"), "a" * 64,
                                      site_binding(other, other.arms)) + binding_deviations(
        upstream(site, gate="g3"), "a" * 64, site_binding(moved, moved.arms))
    assert (kv.cause, target.cause) == (Cause.SITE_CHANGED, Cause.SITE_CHANGED)
