"""Arms: config models, the KV-directory safety rule, and real child processes on loopback."""

from __future__ import annotations

import json
import os
import socket
import time
import tomllib
import urllib.request
from pathlib import Path

import psutil
import pytest
from pydantic import BaseModel, ConfigDict

from gates.core.configuration import Arm, ArmError, ConfigError, render, validate, validate_arms
from gates.core.configuration.arms import Arms
from gates.inference import ArmProcess, prepare_kv_dir
from gates.inference.kv_dir import MARKER
from gates.inference.ports import free_port, http_status, port_taken

SIM = ["{python}", "-m", "gates.sim", "--profile", "tiny", "--kv-dir", "{kv_dir}", "--port",
       "{port}"]
# A plain HTTP server: GET / answers 200 (a directory listing), ready in a fraction of a second.
HTTP = ["{python}", "-m", "http.server", "{port}", "--bind", "127.0.0.1"]

# The embedded default's arms, as the lead puts them into site.toml (kept in step by hand).
DEFAULT_ARMS = """
[arms.baseline]
kind = "launch"
command = ["{python}", "-m", "gates.sim", "--profile", "tiny",
           "--kv-dir", "{kv_dir}", "--port", "{port}"]
kv_dir = ".kvgate-target/kv-baseline"
engine = "kvgate-sim"
model = "kvgate-sim-tiny"
startup_timeout = "60s"
stop_timeout = "10s"

[arms.candidate]
kind = "launch"
command = ["{python}", "-m", "gates.sim", "--profile", "tiny",
           "--kv-dir", "{kv_dir}", "--port", "{port}"]
kv_dir = ".kvgate-target/kv-candidate"
engine = "kvgate-sim"
model = "kvgate-sim-tiny"
startup_timeout = "60s"
stop_timeout = "10s"

[arms.recompute]
kind = "launch"
command = ["{python}", "-m", "gates.sim", "--profile", "tiny", "--port", "{port}"]
engine = "kvgate-sim"
model = "kvgate-sim-tiny"
startup_timeout = "60s"
stop_timeout = "10s"
"""


class _Site(BaseModel):
    """The part of Site that holds the arms, to see the errors as site.toml users do."""

    model_config = ConfigDict(extra="forbid")
    arms: Arms = {}


def launch(command: list[str], **extra) -> Arm:
    return Arm(kind="launch", command=command, **extra)


def gone(pid: int) -> bool:
    """The process no longer exists (a zombie would still answer os.kill)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return not psutil.pid_exists(pid)
    return False


def config_error(arms: dict) -> str:
    with pytest.raises(ConfigError) as caught:
        validate(_Site, {"arms": arms}, Path("site.toml"))
    return str(caught.value)


# ---- real processes --------------------------------------------------------------------

def test_simulator_arm_starts_serves_and_stops(tmp_path):
    arm = launch(SIM, kv_dir=tmp_path / "kv", model="kvgate-sim-tiny", engine="kvgate-sim")
    proc = ArmProcess("candidate", arm, tmp_path / "candidate.log", run_id="r1")
    with proc:
        pid = proc.pid
        assert proc.alive() and proc.port > 0
        [endpoint] = proc.endpoints()
        assert endpoint.url == f"http://127.0.0.1:{proc.port}"
        assert endpoint.model == "kvgate-sim-tiny"
        with urllib.request.urlopen(endpoint.url + "/v1/models", timeout=5) as answer:
            assert json.load(answer)["data"][0]["id"] == "kvgate-sim-tiny"
        assert http_status(proc.metrics_urls()[0], 5) == 200
    assert gone(pid) and not proc.alive()
    assert proc.exit_code == 0  # SIGTERM: the simulator shut down cleanly
    assert not port_taken(proc.port)
    assert "Running on" in (tmp_path / "candidate.log").read_text()
    assert proc.stop() == 0  # idempotent


def test_restart_gives_a_healthy_server_on_the_same_port(tmp_path):
    arm = launch(SIM, kv_dir=tmp_path / "kv", model="kvgate-sim-tiny")
    with ArmProcess("candidate", arm, tmp_path / "c.log") as proc:
        port, first = proc.port, proc.pid
        proc.restart()
        assert proc.port == port and proc.pid != first and gone(first)
        assert http_status(f"http://127.0.0.1:{port}/health", 5) == 200
    # The log keeps both starts: evidence of the eviction by restart.
    assert (tmp_path / "c.log").read_text().count("=== kvgate: arm candidate starting") == 2


def test_early_exit_is_an_error_with_exit_code_and_log_tail(tmp_path):
    arm = launch(["{python}", "-c", "import sys; print('boom'); sys.exit(3)"], port=free_port())
    proc = ArmProcess("baseline", arm, tmp_path / "b.log")
    with pytest.raises(ArmError) as caught:
        proc.start()
    err = caught.value
    assert (err.arm, err.phase, err.exit_code) == ("baseline", "start", 3)
    assert "boom" in err.log_tail and "boom" in str(err) and "exited with code 3" in str(err)
    assert proc.pid is None


def test_never_healthy_is_an_error_after_the_startup_timeout_and_the_child_is_killed(tmp_path):
    arm = launch(["{python}", "-c", "import time; time.sleep(60)"], port=free_port(),
                 startup_timeout="2s")
    pids: list[int] = []

    def probe(url: str, timeout: float) -> int:
        pids.append(proc.pid)
        return http_status(url, timeout)

    proc = ArmProcess("candidate", arm, tmp_path / "c.log", probe=probe)
    began = time.monotonic()
    with pytest.raises(ArmError) as caught:
        proc.start()
    assert 1.9 <= time.monotonic() - began < 6
    assert "did not answer 200 within 2s" in str(caught.value)
    assert caught.value.exit_code is None and caught.value.phase == "start"
    assert pids and gone(pids[0])


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_context_manager_stops_the_child_when_the_body_raises(tmp_path, exc):
    arm = launch(HTTP, health_path="/")
    with pytest.raises(exc), ArmProcess("control", arm, tmp_path / "x.log") as proc:
        pid = proc.pid
        raise exc()
    assert gone(pid)


def test_ctrl_c_while_waiting_for_health_kills_the_child(tmp_path):
    pids: list[int] = []

    def probe(url: str, timeout: float) -> int:
        pids.append(proc.pid)
        raise KeyboardInterrupt

    proc = ArmProcess("candidate", launch(HTTP, health_path="/"), tmp_path / "c.log",
                      probe=probe)
    with pytest.raises(KeyboardInterrupt):
        proc.start()
    assert pids and gone(pids[0])


def test_stop_kills_a_child_that_ignores_sigterm(tmp_path):
    code = ("import signal, http.server as h; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "h.HTTPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler).serve_forever()")
    arm = launch(["{python}", "-c", code], health_path="/", stop_timeout="0.5s")
    proc = ArmProcess("candidate", arm, tmp_path / "c.log").start()
    pid, began = proc.pid, time.monotonic()
    assert proc.stop() == -9
    assert 0.4 < time.monotonic() - began < 5 and gone(pid)


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        arm = launch(HTTP, port=busy.getsockname()[1], health_path="/")
        with pytest.raises(ArmError, match="already in use"):
            ArmProcess("candidate", arm, tmp_path / "c.log").start()
    assert not (tmp_path / "c.log").exists()


def test_a_child_that_dies_mid_run_is_reported_with_the_phase(tmp_path):
    with ArmProcess("candidate", launch(HTTP, health_path="/"), tmp_path / "c.log") as proc:
        os.kill(proc.pid, 9)
        time.sleep(0.2)
        with pytest.raises(ArmError) as caught:
            proc.check("probe")
    assert caught.value.phase == "probe" and caught.value.exit_code == -9
    assert "killed by SIGKILL" in str(caught.value)


def test_endpoint_arm_checks_health_and_never_stops_the_server(tmp_path, monkeypatch):
    with ArmProcess("control", launch(HTTP, health_path="/"), tmp_path / "s.log") as server:
        url = f"http://127.0.0.1:{server.port}"
        monkeypatch.setenv("KVGATE_TEST_KEY", "s3cret")
        arm = Arm(kind="endpoint", urls=[url + "/"], health_path="/", model="m", api="chat",
                  api_key_env="KVGATE_TEST_KEY")
        with ArmProcess("baseline", arm) as proc:
            [endpoint] = proc.endpoints()
            assert endpoint.url == url and endpoint.api == "chat"
            assert endpoint.api_key.get_secret_value() == "s3cret"
            assert proc.metrics_urls() == [url + "/metrics"] and proc.alive()
            with pytest.raises(ArmError, match="cannot restart"):
                proc.restart()
        assert server.alive()
    monkeypatch.delenv("KVGATE_TEST_KEY")
    with pytest.raises(ArmError, match="KVGATE_TEST_KEY"):
        ArmProcess("baseline", arm).start()


def test_endpoint_arm_that_is_down_names_the_host():
    port = free_port()
    arm = Arm(kind="endpoint", urls=[f"http://127.0.0.1:{port}"], startup_timeout="1s")
    with pytest.raises(ArmError) as caught:
        ArmProcess("baseline", arm).start()
    assert f"endpoint 127.0.0.1:{port} is not healthy" in str(caught.value)


# ---- configuration ---------------------------------------------------------------------

def test_unknown_key_names_the_dotted_path():
    message = config_error({"candidate": {"kind": "launch", "comand": ["x"]}})
    assert "unknown key 'arms.candidate.comand'" in message


def test_unknown_placeholder_names_the_arm_and_the_placeholder():
    message = config_error({"candidate": {"kind": "launch", "command": [*SIM[:-1], "{prot}"],
                                          "kv_dir": "/kv"}})
    assert "key 'arms.candidate': command[8]: unknown placeholder {prot}" in message
    message = config_error({"baseline": {"kind": "launch", "command": HTTP,
                                         "env": {"X": "{kv_dir"}}})
    assert "key 'arms.baseline': env.X:" in message and "brace" in message


@pytest.mark.parametrize(("arm", "expected"), [
    ({"kind": "launch", "command": SIM}, "uses {kv_dir} but the arm sets no kv_dir"),
    ({"kind": "launch", "command": ["vllm", "serve", "{model}", "--port", "{port}"]},
     "uses {model} but the arm sets no model"),
    ({"kind": "launch", "command": ["vllm", "serve"]}, "never passes {port}"),
    ({"kind": "launch", "command": [*HTTP, "--gpu-cache", "{gpu_cache}"]},
     "uses {gpu_cache} but the arm sets no gpu_cache"),
    ({"kind": "launch", "command": HTTP, "gpu_cache": "0B"}, "arms.candidate.gpu_cache"),
    ({"kind": "launch", "command": ["x", "{port:05d}"]}, "takes no format spec"),
    ({"kind": "launch", "command": HTTP, "urls": ["http://h:1"]}, 'urls belong(s) to kind = '),
    ({"kind": "endpoint", "urls": ["http://h:1"], "port": 8000}, 'port belong(s) to kind = '),
    ({"kind": "endpoint"}, "an endpoint arm needs urls"),
    ({"kind": "launch"}, "a launch arm needs command"),
    ({"kind": "endpoint", "urls": ["10.0.0.5:8000"]}, "is not an http(s) URL"),
    ({"kind": "endpoint", "urls": ["http://h:1"], "engine": "vlm"}, "unknown engine 'vlm'"),
    ({"kind": "endpoint", "urls": ["http://h:1"], "health_path": "health"}, "must start with"),
    ({"kind": "docker"}, "key 'arms.candidate.kind'"),
    # write_quiet: polls a third of it apart; 0.1 s is a guess at the engine, 2 minutes is
    # longer than the settle's own timeout, and a bare number could be seconds or ms.
    ({"kind": "launch", "command": HTTP, "write_quiet": "0.1s"},
     "key 'arms.candidate.write_quiet'"),
    ({"kind": "launch", "command": HTTP, "write_quiet": "2m"},
     'out of range: write a value at most "1m"'),
    ({"kind": "launch", "command": HTTP, "write_quiet": 1}, "arms.candidate.write_quiet"),
])
def test_bad_arms_are_config_errors(arm, expected):
    assert expected in config_error({"candidate": arm})


def test_unknown_arm_name_suggests_the_right_one():
    message = config_error({"candiate": {"kind": "endpoint", "urls": ["http://h:1"]}})
    assert "unknown arm 'candiate' — did you mean 'candidate'?" in message


def test_embedded_default_arms_validate_and_resolve(tmp_path):
    site = validate(_Site, tomllib.loads(DEFAULT_ARMS), Path("site.toml"))
    assert validate_arms(site.arms, ("baseline", "candidate", "recompute")) == []
    for arm in site.arms.values():
        arm.resolve_paths(tmp_path)
    assert site.arms["candidate"].kv_dir == tmp_path / ".kvgate-target/kv-candidate"
    assert site.arms["recompute"].kv_dir is None
    argv, _ = ArmProcess("recompute", site.arms["recompute"], tmp_path / "r.log").command()
    assert "--kv-dir" not in argv


def test_shipped_site_arms_validate(repo):
    shipped = tomllib.loads((repo / "site.toml").read_text()).get("arms", {})
    site = validate(_Site, {"arms": shipped}, repo / "site.toml")
    assert set(site.arms) <= {"baseline", "candidate", "recompute", "control"}


def test_validate_arms_names_what_is_missing_or_shared():
    endpoint = {"kind": "endpoint", "urls": ["http://h:1"]}
    assert validate_arms({}) == ["site defines no candidate arm: add [arms.candidate]"]
    arms = {"baseline": Arm(**endpoint, kv_dir="/kv"), "candidate": Arm(**endpoint, kv_dir="/kv"),
            "recompute": Arm(**endpoint, kv_dir="/r")}
    problems = validate_arms(arms, ("baseline", "candidate", "control"))
    assert "site defines no control arm: add [arms.control]" in problems
    assert any("baseline and candidate share kv_dir /kv" in p for p in problems)
    assert any("recompute arm runs without a KV tier" in p for p in problems)


def test_render_fills_placeholders_and_keeps_literal_braces(tmp_path):
    assert render("{{x}} {port}/{run_id}", {"port": "80", "run_id": "r"}) == "{x} 80/r"
    arm = launch(["{python}", "--dir={kv_dir}", "{{json}}"], kv_dir=tmp_path, port=9000,
                 env={"RUN": "{run_id}-{port}"})
    argv, env = ArmProcess("candidate", arm, tmp_path / "l", run_id="r7").command()
    assert argv[1:] == [f"--dir={tmp_path}", "{json}"] and env == {"RUN": "r7-9000"}
    assert os.path.samefile(argv[0], os.sys.executable)


def test_the_tiers_reach_the_engine_in_bytes_and_an_unset_cpu_tier_is_none(tmp_path):
    template = ["x", "--port", "{port}", "--gpu-cache", "{gpu_cache}", "--cpu-tier", "{cpu_tier}"]
    argv, _ = ArmProcess("candidate", launch(template, gpu_cache="12MiB", cpu_tier="24MiB"),
                         tmp_path / "l").command()
    assert argv[-4:] == ["--gpu-cache", str(12 * 1024**2), "--cpu-tier", str(24 * 1024**2)]
    argv, _ = ArmProcess("candidate", launch(template, gpu_cache="1MiB"),
                         tmp_path / "l").command()
    assert argv[-1] == "0"


# ---- the KV directory ------------------------------------------------------------------

def kv_arm(path: Path | str, **extra) -> Arm:
    return Arm(kind="endpoint", urls=["http://h:1"], kv_dir=path, **extra)


def test_prepare_empties_a_kvgate_directory_and_keeps_it(tmp_path):
    kv = tmp_path / "kv"
    first = prepare_kv_dir("candidate", kv_arm(kv), tmp_path)
    assert first.created and (kv / MARKER).is_file()
    (kv / "m" / "ab").mkdir(parents=True)
    (kv / "m" / "ab" / "c.kv").write_bytes(b"x" * 1000)
    (kv / "top.kv").write_bytes(b"y" * 10)
    (kv / "link").symlink_to(tmp_path)  # removed as a link; what it points at is untouched
    done = prepare_kv_dir("candidate", kv_arm(kv), tmp_path)
    assert sorted(os.listdir(kv)) == [MARKER] and not done.created
    assert (done.removed_files, done.removed_bytes) == (3, 1010 + len(str(tmp_path)))
    assert tmp_path.is_dir() and done.free_bytes > 0


def test_prepare_refuses_a_full_directory_kvgate_did_not_create(tmp_path):
    kv = tmp_path / "data"
    kv.mkdir()
    (kv / "precious.txt").write_text("keep")
    with pytest.raises(ArmError, match=f"holds 1 entry and no {MARKER}"):
        prepare_kv_dir("baseline", kv_arm(kv), tmp_path)
    assert (kv / "precious.txt").read_text() == "keep"


@pytest.mark.parametrize(("kv_dir", "roots", "expected"), [
    ("/", [Path("/")], "it is the root directory"),
    (str(Path.home()), [Path("/")], "home directory"),
    ("/proc", ["TMP"], "it is a mount point"),
    ("TMP/elsewhere/kv", ["TMP/root"], "only subdirectories of the allowed roots"),
    ("TMP/root", ["TMP/root"], "only subdirectories of the allowed roots"),
    ("TMP/root/kv", None, "(none given)"),
    ("TMP/root/a/b", ["TMP/root"], "parent"),
    ("relative/kv", ["TMP"], "not an absolute path"),
])
def test_prepare_refusals_name_the_arm_and_the_path(tmp_path, kv_dir, roots, expected):
    (tmp_path / "root").mkdir()
    (tmp_path / "elsewhere").mkdir()
    fix = lambda p: Path(str(p).replace("TMP", str(tmp_path)))  # noqa: E731
    arm = kv_arm(fix(kv_dir))
    with pytest.raises(ArmError) as caught:
        prepare_kv_dir("candidate", arm, [fix(r) for r in roots] if roots else None)
    assert expected in str(caught.value)
    assert caught.value.arm == "candidate" and caught.value.phase == "prepare"
    assert str(fix(kv_dir)) in str(caught.value) and "[arms.candidate] kv_dir" in str(caught.value)


def test_prepare_judges_where_a_symbolic_link_leads(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "root" / "kv").symlink_to(tmp_path / "outside")
    with pytest.raises(ArmError, match="only subdirectories"):
        prepare_kv_dir("candidate", kv_arm(tmp_path / "root" / "kv"), tmp_path / "root")


def test_prepare_refuses_mount_points_from_the_mount_table(tmp_path):
    kv = tmp_path / "kv"
    prepare_kv_dir("candidate", kv_arm(kv), tmp_path)
    (kv / "sub").mkdir()
    table = tmp_path / "mountinfo"
    line = "36 35 98:0 / {} rw,noatime master:1 - ext3 /dev/root rw\n"
    table.write_text(line.format(str(kv / "sub").replace(" ", "\\040")))
    with pytest.raises(ArmError, match="a filesystem is mounted inside it"):
        prepare_kv_dir("candidate", kv_arm(kv), tmp_path, mountinfo=table)
    table.write_text(line.format(kv))
    with pytest.raises(ArmError, match="it is a mount point"):
        prepare_kv_dir("candidate", kv_arm(kv), tmp_path, mountinfo=table)
    assert (kv / "sub").is_dir()


def test_kv_root_of_the_arm_is_an_allowed_root(tmp_path):
    arm = kv_arm("kv/baseline", kv_root="kv")
    arm.resolve_paths(tmp_path)
    (tmp_path / "kv").mkdir()
    assert prepare_kv_dir("baseline", arm, None).path == tmp_path / "kv" / "baseline"
    assert prepare_kv_dir("recompute", Arm(kind="endpoint", urls=["http://h:1"]), None) is None


def test_a_dotdot_or_a_link_in_kv_dir_is_resolved_before_the_shared_directory_check(tmp_path):
    """#25 item 10: ".kvgate-target/x/../kv-baseline" (no x) is the baseline's directory."""
    from gates.core.configuration import load_site

    (tmp_path / ".kvgate-target" / "kv-baseline").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / ".kvgate-target" / "kv-baseline")
    endpoint = 'kind = "endpoint"\nurls = ["http://h:1"]'
    for written in (".kvgate-target/x/../kv-baseline", "link"):
        (tmp_path / "site.toml").write_text(
            f'[site]\nname = "s"\n[fio]\nfile_size = "16MiB"\n[target]\n'
            f'directory = ".kvgate-target"\n[arms.baseline]\n{endpoint}\n'
            f'kv_dir = ".kvgate-target/kv-baseline"\n[arms.candidate]\n{endpoint}\n'
            f'kv_dir = "{written}"\n')
        site, _ = load_site(tmp_path / "site.toml")
        assert site.arms["candidate"].kv_dir == tmp_path / ".kvgate-target" / "kv-baseline"
        problems = validate_arms(site.arms, ("baseline", "candidate"))
        assert any("arms baseline and candidate share kv_dir" in p for p in problems), problems


def test_arms_built_in_code_are_compared_where_their_kv_dirs_really_lead(tmp_path):
    endpoint = {"kind": "endpoint", "urls": ["http://h:1"]}
    arms = {"baseline": Arm(**endpoint, kv_dir=tmp_path / "kv"),
            "candidate": Arm(**endpoint, kv_dir=tmp_path / "x" / ".." / "kv")}
    [problem] = validate_arms(arms)
    assert f"share kv_dir {tmp_path / 'kv'} (written {tmp_path / 'x' / '..' / 'kv'})" in problem
