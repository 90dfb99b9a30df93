"""`kvgate run g1` against two test hosts that are real hosts to fio (tests/_netns.py), as a
site runs it against a rack: every job on both hosts, then the 1 -> 2 scaling curve and the
first host's KV restore while the second writes a declared load (issue #48). One run, ~60 s."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _netns import test_hosts

pytestmark = pytest.mark.skipif(shutil.which("fio") is None,
                                reason="fio is not installed (apt-get install fio)")
REPO = Path(__file__).resolve().parent.parent
SHARED = ("fio servers on the [fio] hosts", "KV-restore aggregate bandwidth, every host at once",
          "KV-restore p99 latency, every host's I/Os merged",
          "KV-restore straggler spread across hosts", "KV-restore scaling, 1 to N hosts",
          "KV restore while a neighbour writes, % of alone")


def test_g1_on_two_test_hosts_draws_the_scaling_curve_and_the_neighbour(tmp_path, tiny_site):
    target = tmp_path / "target"
    with test_hosts(2, logs=tmp_path) as hosts:
        site = tiny_site(target).replace("[fio]\n", "[fio]\nhosts = [" + ", ".join(
            f'"{a}"' for a in hosts.addresses) + ']\nneighbour_write_rate = "4 MB/s"\n')
        (tmp_path / "site.toml").write_text(site)
        done = subprocess.run([sys.executable, "-m", "gates.cli", "run", "g1", "--site",
                               str(tmp_path / "site.toml"), "--thresholds",
                               str(REPO / "thresholds.toml"), "--out", str(tmp_path / "out")],
                              capture_output=True, text=True, timeout=400)
    [path] = (tmp_path / "out").glob("*/g1.json")
    record = json.loads(path.read_text())
    measured = {m["name"]: m for m in record["measurements"]}
    first, second = hosts.addresses
    for name in SHARED:
        assert measured[name]["outcome"] in ("PASS", "MARGINAL", "FAIL", "REPORTED"), (
                measured[name], done.stdout[-3000:])
    for host in (first, second):
        assert measured[f"KV-restore read on {host}"]["value"] > 0
    assert "alone" in measured[SHARED[-1]]["note"] and "declared" in measured[SHARED[-1]]["note"]
    servers = measured[SHARED[0]]["note"]
    assert f"{first} " in servers and f"{second} " in servers, servers
    html = next(path.parent.glob("g1*.html")).read_text()
    assert "KV restore from 1 to N client hosts" in html
    assert "KV restore without and with a neighbour" in html
    evidence = {p.name for p in path.parent.rglob("*")}
    assert {f"fio-kvrestore-host-{first}.json", f"fio-kvrestore-host-{second}.json",
            "fio-kvrestore-merged-clat.json", f"fio-probe-{second}.log",
            "fio-kvneighbour-neighbour.fio"} <= evidence, sorted(evidence)
