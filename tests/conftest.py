"""Shared helpers for kvgate's own tests."""

import os
import shutil
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from _timing import ACCEPTED, PROPERTY, RUNNING, TimingFailure, mark_accepted
from hypothesis import settings

# Mutation testing (tests/mutation.py) runs each mutant's tests once: the same generated examples
# every time, so a mutant is killed or survives by what the tests check, not by which examples a
# seed drew. mutmut sets MUTANT_UNDER_TEST in every run it makes.
settings.register_profile("mutation", derandomize=True, database=None)
if os.environ.get("MUTANT_UNDER_TEST"):
    settings.load_profile("mutation")

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def fresh_caches():
    """Every memo of gates (functools caches) starts empty in each session.

    mutmut forks each mutant's run from the process that ran the unmutated tests: a cache those
    filled (the sign test's spending ranks, a rule's exact tables) answered the mutant's calls
    with the unmutated results, and 55 mutants of spending._walk alone survived untested."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("gates."):
            continue
        for value in list(vars(module).values()):
            for held in [value, *(vars(value).values() if isinstance(value, type) else ())]:
                clear = getattr(held, "cache_clear", None)
                if callable(clear):
                    clear()

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


class TimingRetry(UserWarning):
    """A `timing` test failed on a timing check and was run again; the text says why."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "timing: measures time on this machine; retried once when it fails with "
        "TimingFailure (tests/_timing.py), the reason (the CPU other processes took) printed")
    config.addinivalue_line(
        "markers", "real_engine: runs a real inference engine (llama.cpp, vLLM) end to end; "
        "`make test` runs these, `make check` leaves them out")
    config.addinivalue_line(
        "markers", "slow: in a file of LONGEST_FIRST (whole gates, faults under the target, a "
        "wheel build, loop-device filesystems, the browser); `make check` runs them, "
        "`pytest -m 'not slow'` does not")


# The files that take most of the run (the real engines' and the simulator's end-to-end runs, the
# wheel, the soak), longest first: `make test` and `make check` run the files on several workers
# (pytest-xdist, --dist loadfile --no-loadscope-reorder: xdist >= 3.5 otherwise hands out the
# files with the most tests first, and a long file of two tests started last ran alone at the end).
LONGEST_FIRST = ("test_vllm_e2e.py", "test_vllm_corrupt.py", "test_llamacpp_e2e.py",
                 "test_faults_g3.py", "test_faults_g4.py", "test_g3_e2e_tiers.py",
                 "test_g3_e2e_failures.py", "test_g3_e2e_proof_failures.py", "test_g2g3_e2e.py",
                 "test_sweep_e2e_resume.py", "test_fio_hosts_g1.py", "test_soak_runner.py",
                 "test_sweep_e2e.py", "test_faults_kill.py", "test_wheel.py",
                 "test_fio_hosts.py", "test_g3_e2e_baseline.py", "test_checklist_cli.py",
                 "test_cli.py", "test_g1.py", "test_soak_resume.py", "test_xfs_target.py",
                 "test_browser.py", "test_faults_g1.py")


def pytest_collection_modifyitems(items):
    """Whole files in LONGEST_FIRST order, then the rest as collected (a stable sort); the
    tests of those files are marked `slow` (`pytest -m "not slow"` leaves them out)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        if item.path.name in rank:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run a `timing` test; after a TimingFailure run it once more, saying why in a warning."""
    if pyfuncitem.get_closest_marker("timing") is None:
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    try:
        pyfuncitem.obj(**args)
    except TimingFailure as first:
        # Said three ways, so a pass on the retry is never silent: a warning, a property in the
        # JUnit file (<property name="timing_retry">) and a section of the terminal summary.
        why = f"failed on timing and ran again: {first}"
        warnings.warn(TimingRetry(f"{pyfuncitem.nodeid} {why}"), stacklevel=1)
        pyfuncitem.user_properties.append(("timing_retry", why))
        pyfuncitem.obj(**args)
    return True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item):
    """Keep the running test where _timing.accept_unfair can mark it."""
    RUNNING[:] = [item]
    yield
    RUNNING.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test handed a record whose timing verdict was accepted carries why (_timing)."""
    if call.when == "call":
        for value in getattr(item, "funcargs", {}).values():
            for why in value.get(ACCEPTED, []) if isinstance(value, dict) else []:
                mark_accepted(item, why)
    yield


def pytest_terminal_summary(terminalreporter):
    """Every test whose first run failed on timing, and every timing verdict accepted."""
    calls = [r for kind in ("passed", "failed") for r in terminalreporter.stats.get(kind, [])
             if r.when == "call"]
    retried = [(r.nodeid, r.outcome, dict(r.user_properties)["timing_retry"])
               for r in calls if "timing_retry" in dict(r.user_properties)]
    if retried:
        terminalreporter.section("timing tests run twice (the first run failed on timing)")
        for nodeid, outcome, why in retried:
            terminalreporter.line(f"{nodeid}: {outcome.upper()} on the retry; first run {why}")
    accepted = [(r.nodeid, r.outcome, why) for r in calls
                for name, why in r.user_properties if name == PROPERTY]
    if accepted:
        terminalreporter.section("timing verdicts accepted as INCONCLUSIVE (the machine gave "
                                 "them no fair chance)")
        for nodeid, outcome, why in accepted:
            terminalreporter.line(f"{nodeid} ({outcome.upper()}) accepted: {why}")


@pytest.fixture(autouse=True)
def no_performer_key(monkeypatch, tmp_path_factory):
    """No test signs with, or trusts, the key of whoever runs the tests (children inherit it)."""
    monkeypatch.setenv("KVGATE_KEY_DIR", str(tmp_path_factory.mktemp("no-key")))
    monkeypatch.delenv("KVGATE_SIGNING_KEY", raising=False)


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root (shipped site.toml, thresholds.toml, suites/)."""
    return REPO


@pytest.fixture
def tiny_site():
    """Make a site.toml text whose G1 job set runs in about 20 s."""
    return _tiny_site


def _tiny_site(directory: Path, name: str = "test site") -> str:
    """A site.toml whose G1 job set runs in about 20 s on a local directory."""
    return f"""
[site]
name = "{name}"
limits_profile = "demo"

[target]
directory = "{directory}"
create = true
min_free = "0"

[fio]
file_size = "16MiB"
runtime = "7s"
latency_runtime = "3s"
qd_sweep = [1, 4]
qd_sweep_runtime = "1s"
precondition_passes = 1
steady_state = {{ criterion = "bw:50%", window = "5s", ramp = "1s" }}

[topology]
mount_options = ["rw"]
"""


@pytest.fixture
def gate_dir(pytester, repo):
    """A pytester folder with the shipped thresholds and a tiny site file (site
    'plugin test'), for tests that run a gate suite of their own in it."""
    shutil.copy(repo / "thresholds.toml", pytester.path / "thresholds.toml")
    (pytester.path / "site.toml").write_text(textwrap.dedent("""
        [site]
        name = "plugin test"
        [target]
        directory = "target"
        [fio]
        file_size = "1MiB"
    """))
    return pytester


@pytest.fixture
def key(tmp_path, monkeypatch):
    """The performer's key under tmp_path, the one this machine trusts (waivers, signing)."""
    from gates.report import KEY_DIR_ENV, KEY_ENV, new_key
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.delenv(KEY_ENV, raising=False)
    new_key(tmp_path / "keys")
