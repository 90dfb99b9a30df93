"""The wheel runs the gates: built from this checkout, installed in a clean venv, G1 from it.

The venv gets kvgate's dependencies from pip's own cache or index (the registries this
machine reaches), never from the checkout: the test asserts that `gates` is imported from
the new venv's site-packages, and it runs from a folder outside the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
INSTALL_TIMEOUT = 900  # a cold pip cache downloads matplotlib, aiohttp, pydantic …


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A clean venv with the wheel of this checkout installed; returns its bin folder."""
    root = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root),
                  str(REPO)], root, 300)
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = root.glob("kvgate-*.whl")
    # The venv gets no pip of its own (ensurepip: 5 s of CPU); this pip installs into it
    # (--python), resolving the wheel's dependencies as it would. --no-compile: byte-compiling
    # every installed module (matplotlib, scipy …) took a third of the install; the modules a
    # test imports are compiled as they are imported.
    venv.create(root / "venv", with_pip=False)
    bin_dir = root / "venv" / "bin"
    pip = _run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install",
                "-q", "--no-compile", str(wheel)], root, INSTALL_TIMEOUT)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return bin_dir


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    found = _run([str(installed / "python"), "-c",
                  "import gates, gates.core.configuration as c; print(gates.__file__); "
                  "print(c.shipped('suites')); print(c.in_checkout())"],
                 tmp_path, 60)
    assert found.returncode == 0, found.stderr
    module, suites, checkout = found.stdout.split()
    assert "site-packages" in module and not Path(module).is_relative_to(REPO)
    assert Path(suites).is_relative_to(Path(module).parent) and checkout == "False"
    assert sorted(p.name for p in Path(suites).glob("test_*.py")) == sorted(
        p.name for p in (REPO / "suites").glob("test_*.py"))


def test_config_check_from_the_wheel_uses_the_embedded_default_in_the_current_folder(
        installed, tmp_path):
    checked = _run([str(installed / "kvgate"), "config", "check"], tmp_path, 120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "embedded default" in checked.stdout
    body = json.loads(checked.stdout[checked.stdout.index("{"):])
    # The target is made in the folder the user runs from, never inside site-packages.
    assert body["site"]["target"]["directory"] == str(tmp_path / ".kvgate-target")


def test_kvgate_run_g1_from_the_wheel(installed, tmp_path, tiny_site):
    (tmp_path / "site.toml").write_text(tiny_site(tmp_path / "target"))
    (tmp_path / "target").mkdir()
    ran = _run([str(installed / "kvgate"), "run", "g1", "--thresholds",
                str(REPO / "thresholds.toml")], tmp_path, 600)
    out = ran.stdout + ran.stderr
    assert "no suite" not in out, out[-3000:]
    [record] = (tmp_path / "reports").glob("*/g1.json")
    body = json.loads(record.read_text())
    assert body["verdict"] in ("PASS", "FAIL"), out[-3000:]  # measured, not an ERROR
    assert ran.returncode == (0 if body["verdict"] == "PASS" else 1), out[-3000:]
    assert any(m["name"].startswith("Sequential read") for m in body["measurements"])
    assert (record.parent / "g1.html").is_file() and (record.parent / "summary.html").is_file()
    assert not list(installed.parent.rglob(".pytest_cache")), "pytest wrote into the venv"
