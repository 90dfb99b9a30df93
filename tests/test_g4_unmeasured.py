"""Issue #25 items 13 and 15: a G4 that could not measure is ERROR; its engine is what answered.

`kvgate run g4` for real in a child process: a launched simulator on a passing G3 record, a
site that names an NVMe device, and a PATH without nvme-cli (only fio and dmesg on it). Before
the fix SMART became NOT APPLICABLE ("nvme-cli is not installed"), which the verdict ignores;
now G4 is ERROR naming nvme-cli. The candidate's site entry says `engine = "vllm"`: the label
"simulated engine" and the arms table's Engine column come from what the server said.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _edits import edited
from _soak import g3_for_soak, soak_site

from gates.core.verdicts import Cause, Deviation


def site_text(target: Path) -> str:
    return soak_site(target, sections='[topology]\ndevices = ["/dev/nvme0n1"]\n',
                     soak_extra="warmup_windows = 0  # five windows, the fewest G4 takes: all "
                                "judged\n", engine="vllm")


def passing_g3(out: Path) -> None:
    """A G3 that passed, with the repetitions G4 takes its operating point from."""
    assert g3_for_soak(out, reduction=60).verdict.value == "PASS"


def bare_path(folder: Path) -> str:
    """A PATH holding fio and dmesg and nothing else: no nvme-cli, whatever the host has."""
    folder.mkdir()
    for tool in ("fio", "dmesg"):
        found = shutil.which(tool)
        if found is None:
            pytest.skip(f"{tool} is not installed")
        (folder / tool).symlink_to(found)
    return str(folder)


@pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")
def test_g4_without_nvme_cli_with_devices_named_is_error_naming_nvme_cli(tmp_path, repo):
    (tmp_path / "site.toml").write_text(site_text(tmp_path / "target"))
    (tmp_path / "target").mkdir()
    # A few seconds of soak cannot hold a drift limit meant for hours: relaxed, so that only
    # what could not be measured decides (a FAIL would outrank the ERROR under test).
    thresholds = (repo / "thresholds.toml").read_text()
    (tmp_path / "thresholds.toml").write_text(edited(
        thresholds, 'ttft_drift_max = "10 %"', 'ttft_drift_max = "1000 %"',
        where="thresholds.toml"))
    passing_g3(tmp_path / "out")
    env = os.environ | {"PATH": bare_path(tmp_path / "bin")}
    done = subprocess.run(
        [sys.executable, "-m", "gates.cli", "run", "g4", "--site", "site.toml", "--thresholds",
         "thresholds.toml", "--out", "out", "--soak-duration", "10s", "--soak-window", "2s"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    [path] = (tmp_path / "out").glob("*/g4.json")
    g4 = json.loads(path.read_text())
    assert done.returncode == 2 and g4["verdict"] == "ERROR", done.stdout + done.stderr
    by_id = {x["id"]: x for x in g4["measurements"] if x.get("id")}
    for id in ("g4.media_errors", "g4.critical_warnings"):
        assert by_id[id]["outcome"] == "ERROR"
        assert "nvme-cli is not installed" in by_id[id]["note"]
        assert "apt-get install nvme-cli" in by_id[id]["note"]
    assert by_id["g4.paths_live"]["outcome"] == "NOT APPLICABLE"  # transport "local": a fact
    assert by_id["g4.request_errors"]["outcome"] == "PASS"  # the soak itself ran
    assert not [x for x in g4["measurements"] if x["outcome"] == "FAIL"]
    # Two windows are too few for the SNIA rules (ERROR, saying so); nothing else is unmeasured.
    assert {i for i, x in by_id.items() if x["outcome"] == "ERROR"} <= {
        "g4.media_errors", "g4.critical_warnings", "g4.window_spread", "g4.window_slope",
        "g4.kernel_errors"}  # the kernel log, where this machine refuses dmesg to non-root
    if by_id["g4.kernel_errors"]["outcome"] == "ERROR":
        assert "kernel.dmesg_restrict" in by_id["g4.kernel_errors"]["note"]
    # The server said it is kvgate's simulator, whatever the site file's engine = "vllm" says.
    assert any(d.cause is Cause.SIMULATED_ENGINE and d.text.startswith(
        "simulated engine: the arms candidate run kvgate's reference")
        for d in map(Deviation.model_validate, g4["deviations"])), g4["deviations"]
    html = path.with_suffix(".html").read_text()
    # #43: each G4 health rule shows its coverage: five windows (10 s of 2 s), every verify
    # pass read; SMART read in none, and its ERROR says which and why.
    assert by_id["g4.verify_errors"]["evidence"][0] == "windows read 5 of 5"
    assert by_id["g4.media_errors"]["evidence"][0].startswith(
        "windows read 0 of 5 (0%); not read: #0 nvme-cli is not installed")
    assert "windows read 5 of 5" in html
    assert "kvgate-sim (X-KVGate-Simulator header)" in html
    assert "vllm (site file" not in html
