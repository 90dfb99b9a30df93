"""Which engine G2/G3 run: the installed llama.cpp, or the site's arms, and the report's line."""

from _llamacpp_fakes import fake_install

from gates.core.configuration import EngineChoice, Site, validate_arms
from gates.engines.choice import CANDIDATE_DIR, choose_engine, server_command

SIM = {"baseline": {"kind": "launch", "engine": "kvgate-sim", "command": ["sim", "{port}"]}}


def site_arms():
    return Site.model_validate({"site": {"name": "s"}, "target": {"directory": "/t"},
                                "fio": {"file_size": "1MiB"}, "arms": SIM}).arms


def test_the_site_arms_run_when_no_engine_is_preferred(tmp_path):
    fake_install(tmp_path)
    run = choose_engine(EngineChoice(), site_arms(), tmp_path, root=tmp_path)
    assert not run.real and run.arms["baseline"].engine == "kvgate-sim"
    assert run.engine.startswith("kvgate simulator")


def test_the_simulator_runs_and_says_how_to_install_when_llamacpp_is_missing(tmp_path):
    run = choose_engine(EngineChoice(prefer="llamacpp"), site_arms(), tmp_path, root=tmp_path)
    assert not run.real and run.workload == {}
    assert "not installed (run `kvgate engine install llamacpp`" in run.engine


def test_the_installed_engine_replaces_every_arm(tmp_path):
    found = fake_install(tmp_path)
    choice = EngineChoice(prefer="llamacpp", slots=4, slot_tokens=1024,
                          workload={"contexts": 4})
    run = choose_engine(choice, site_arms(), tmp_path / "target", root=tmp_path)
    assert run.real and run.workload == {"contexts": 4} and run.install == found
    assert run.kv_bytes_per_token == 16384
    # its memory KV cache, declared for the sweep's chart: --ctx-size tokens over the slots
    assert {a.gpu_cache for a in run.arms.values()} == {4 * 1024 * 16384}
    assert run.arms["candidate"].kv_dir == tmp_path / "target" / CANDIDATE_DIR
    assert run.arms["baseline"].kv_dir is None and run.arms["recompute"].kv_dir is None
    assert {a.engine for a in run.arms.values()} == {"llamacpp"}
    assert validate_arms(run.arms, ("baseline", "candidate", "recompute")) == []
    assert "version: 1 (abc)" in run.engine and CANDIDATE_DIR in run.engine


def test_a_half_built_install_is_not_used(tmp_path):
    found = fake_install(tmp_path)
    found.model.unlink()
    assert not choose_engine(EngineChoice(prefer="llamacpp"), site_arms(), tmp_path,
                             root=tmp_path).real


def test_server_command_serves_slots_from_the_kv_dir_only_with_a_tier(tmp_path):
    found = fake_install(tmp_path)
    choice = EngineChoice(prefer="llamacpp", slots=3, slot_tokens=1000, threads=2)
    tier = server_command(found, choice, tier=True)
    plain = server_command(found, choice, tier=False)
    assert tier[-2:] == ["--slot-save-path", "{kv_dir}"] and "--slot-save-path" not in plain
    joined = " ".join(tier)
    for flag in ("--parallel 3", "--ctx-size 3000", "--metrics", "--cache-ram 0",
                 "--threads 2", "--host 127.0.0.1", "--port {port}"):
        assert flag in joined


def test_the_session_chooses_the_engine_once_and_names_each_gates_arms(tmp_path, monkeypatch,
                                                                          repo):
    from gates.options import RunOptions
    from gates.session import GateSession

    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path))
    fake_install(tmp_path)
    (tmp_path / "site.toml").write_text(f"""
[site]
name = "s"
[target]
directory = "{tmp_path}"
[fio]
file_size = "1MiB"
[engine]
prefer = "llamacpp"
[arms.baseline]
kind = "launch"
engine = "kvgate-sim"
command = ["sim", "{{port}}"]
""")
    session = GateSession.open(RunOptions(site=tmp_path / "site.toml",
                                          thresholds=repo / "thresholds.toml",
                                          out=tmp_path / "reports"))
    try:
        assert session.arms("g3")["candidate"].engine == "llamacpp"
        assert session.engine() is session.engine()  # chosen once, not per report
        assert session.arms("g4") == session.site.arms and session.arms("g1") == {}
    finally:
        session.store.close()
