"""`make demo` measures the embedded default's own arms whatever is installed; a real engine is
one explicit word away (`--engine llamacpp`, `make demo ENGINE=llamacpp`), and the run's first
line says which engine G2/G3 measure and why (#47)."""

import os
import shutil
import subprocess
import sys

import pytest
from _edits import edited
from _llamacpp_fakes import fake_install

from gates.cli import main
from gates.core.configuration import ConfigError
from gates.engines import run_engine
from gates.options import RunConfig, RunOptions


def _config(repo, engine=""):
    return RunConfig.load(RunOptions(site=repo / "site.toml", thresholds=repo / "thresholds.toml",
                                     engine=engine))


def test_the_embedded_default_measures_its_simulator_with_llamacpp_installed(tmp_path, repo):
    fake_install(tmp_path)
    run = run_engine(_config(repo), root=tmp_path)
    assert not run.real and {a.engine for a in run.arms.values()} == {"kvgate-sim"}
    assert run.why == f'{repo / "site.toml"} [engine] prefer = ""'


def test_engine_llamacpp_is_the_one_word_to_a_real_engine(tmp_path, repo):
    found = fake_install(tmp_path)
    config = _config(repo, "llamacpp")
    assert config.site.engine.prefer == "llamacpp"  # the word replaces the site's prefer, once
    run = run_engine(config, root=tmp_path)
    assert run.real and run.install == found and run.why == "--engine llamacpp"


def test_engine_arms_measures_the_site_arms_whatever_the_site_prefers(tmp_path, repo):
    fake_install(tmp_path)
    site = tmp_path / "site.toml"
    site.write_text(edited((repo / "site.toml").read_text(), 'prefer = ""', 'prefer = "llamacpp"',
                           where="site.toml"))
    config = RunConfig.load(RunOptions(site=site, thresholds=repo / "thresholds.toml",
                                       engine="arms"))
    run = run_engine(config, root=tmp_path)
    assert not run.real and run.why == "--engine arms"


@pytest.mark.parametrize("word, install", [("llamacpp", "kvgate engine install llamacpp"),
                                            ("vllm", "kvgate engine install vllm")])
def test_an_engine_asked_by_name_and_not_installed_stops_the_run(tmp_path, repo, word, install):
    # Falling back on the simulator would measure something other than was asked for.
    with pytest.raises(ConfigError) as refused:
        run_engine(_config(repo, word), root=tmp_path)
    said = str(refused.value)
    assert said.startswith(f"--engine {word}:") and install in said and "not installed" in said


def test_an_unknown_engine_word_is_refused_naming_the_words(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "all", "--engine", "sglang"])
    err = capsys.readouterr().err
    assert done.value.code == 2
    assert "--engine" in err and "'sglang'" in err and "arms, llamacpp or vllm" in err


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("assign, command", [
    ([], "kvgate run all\n"), (["ENGINE=llamacpp"], "kvgate run all --engine llamacpp\n")])
def test_make_demo_passes_the_engine_word_only_when_given(repo, assign, command):
    done = subprocess.run(["make", "-n", "-C", str(repo), "demo", *assign], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert any(line.endswith(command) for line in done.stdout.splitlines(keepends=True))


def test_the_run_says_its_engine_first_and_prints_paths_whole_at_80_columns(tmp_path, repo):
    # `kvgate run g2` on a fresh store: G2 is BLOCKED (no G1 record), a record and its report
    # are still written. At 80 columns, without a terminal (a log file), nothing is cut.
    fake_install(tmp_path / "cache")  # llama.cpp installed: the demo still measures its arms
    deep = tmp_path / "a-folder-name-long-enough" / "to-push-every-report-path" / "past-80-columns"
    site = tmp_path / "site.toml"
    site.write_text(edited((repo / "site.toml").read_text(), 'directory = ".kvgate-target"',
                           f'directory = "{tmp_path / "target"}"', where="site.toml"))
    env = {k: v for k, v in os.environ.items() if k not in ("KVGATE_SIGNING_KEY",)}
    env |= {"COLUMNS": "80", "KVGATE_CACHE": str(tmp_path / "cache"),
            "KVGATE_KEY_DIR": str(tmp_path / "keys"), "TERM": "dumb"}
    done = subprocess.run([sys.executable, "-m", "gates.cli", "run", "g2", "--site", str(site),
                           "--thresholds", str(repo / "thresholds.toml"), "--out", str(deep)],
                          capture_output=True, text=True, timeout=300, env=env,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("G2/G3 measure: kvgate simulator"), lines[:3]
    assert f'(chosen by {site} [engine] prefer = "")' in done.stdout
    assert "--engine llamacpp" in done.stdout  # the one word to a real engine
    [run_dir] = [p for p in deep.iterdir() if p.is_dir() and p.name != "pytest-html"]
    for path in (run_dir / "g2.html", run_dir / "summary.html"):
        assert any(line.rstrip().endswith(str(path)) for line in lines), (path, done.stdout)
    assert "…" not in done.stdout and "…" not in done.stderr
