"""`kvgate engine`: the cache directory, what counts as installed, failures that name the step."""

import argparse

import pytest
from _llamacpp_fakes import fake_install

import gates.engines.llamacpp.installer as ei
from gates.commands import add_engine_commands, engine_command


@pytest.fixture(autouse=True)
def never_build(monkeypatch):
    """A test that reaches the real build would spend ten minutes compiling: fail instead."""
    def refuse(*args, **kwargs):
        raise AssertionError("a unit test must never download or build llama.cpp")
    monkeypatch.setattr(ei, "fetch_source", refuse)
    monkeypatch.setattr(ei, "build_server", refuse)


def cli(*argv):
    parser = argparse.ArgumentParser()
    add_engine_commands(parser.add_subparsers(dest="command"))
    return engine_command(parser.parse_args(["engine", *argv]))


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path / "k"))
    assert ei.cache_root() == tmp_path / "k"
    monkeypatch.delenv("KVGATE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert ei.install_dir("1.2") == tmp_path / "x" / "kvgate" / "llamacpp" / "1.2"


def test_only_a_complete_install_is_found(tmp_path):
    assert ei.find_install(root=tmp_path) is None
    found = fake_install(tmp_path)
    assert ei.find_install(root=tmp_path) == found
    (found.directory / ei.MANIFEST).write_text("{not json")
    assert ei.find_install(root=tmp_path) is None


def test_an_install_built_by_another_recipe_is_rebuilt(tmp_path):
    found = fake_install(tmp_path)
    older = found.model_copy(update={"cmake_flags": ["-DCMAKE_BUILD_TYPE=Debug"]})
    (found.directory / ei.MANIFEST).write_text(older.model_dump_json())
    assert ei.find_install(root=tmp_path) is None


def test_install_reuses_what_is_there(tmp_path):
    found = fake_install(tmp_path)
    said = []
    assert ei.install(root=tmp_path, say=said.append) == found
    assert said[0].startswith("already installed")


def test_a_failing_step_names_the_command_and_the_log(tmp_path):
    log = tmp_path / "install.log"
    log.write_text("")
    with pytest.raises(ei.InstallError, match=r"cmake build failed \(exit 3\).*boom") as info:
        ei.run_step("cmake build", ["sh", "-c", "echo boom; exit 3"], log)
    assert str(log) in str(info.value)
    with pytest.raises(ei.InstallError, match="cannot run 'no-such-tool-kvgate'"):
        ei.run_step("cmake configure", ["no-such-tool-kvgate"], log)


def test_status_and_install_exit_codes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path))
    assert cli("status") == 1 and "kvgate engine install llamacpp" in capsys.readouterr().out
    fake_install(tmp_path)
    assert cli("status") == 0 and "16,384 KV bytes per token" in capsys.readouterr().out
    assert cli("install", "llamacpp") == 0 and "already installed" in capsys.readouterr().out
    assert cli("install", "llamacpp", "--jobs", "0") == 2


def test_server_version_of_something_that_will_not_say(tmp_path):
    assert ei.server_version(tmp_path / "missing") == ""


def test_install_says_what_is_missing_before_building(tmp_path, monkeypatch):
    monkeypatch.setattr(ei, "preflight", lambda home: ["cmake (apt-get install cmake)"])
    with pytest.raises(ei.InstallError, match="missing cmake"):
        ei.install(root=tmp_path, say=lambda _: None)
    assert not ei.install_dir(root=tmp_path).exists()


def test_a_full_disk_is_refused_before_the_build(tmp_path):
    """#27: a build on a full filesystem is refused at once, naming the space it needs."""
    from _loopdev import need_root, tmpfs

    need_root()
    with tmpfs(tmp_path / "small", "size=64M") as small:
        with pytest.raises(ei.InstallError, match=r"2 GiB free in .*small.* \(it has 0\.1 GiB"):
            ei.install(root=small, say=lambda _: None)
        assert not ei.install_dir(root=small).exists()


def test_preflight_names_a_missing_tool(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert any(m.startswith("cmake") for m in ei.preflight())
    assert any("C++ compiler" in m for m in ei.preflight())
