"""Test hosts that are real hosts to fio: a network namespace each, joined to this one by a veth
pair, with `fio --server` listening on the namespace's own address (issue #48).

Every address is link-local (169.254.0.0/16), put on a veth end this helper made, and checked to
route over that veth before anything connects to it: traffic never leaves the machine. The
namespaces share this machine's filesystems, so every host's fio reads and writes the same
target directory, as the GPU servers of a shared array do. Root only; a test that cannot make
namespaces is skipped, saying what it needs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PORT = 8765  # fio's default server port; each host has its own address
HOW = ("needs root with CAP_NET_ADMIN and iproute2 ('ip', apt-get install iproute2) to make "
       "network namespaces; `make test` runs as root")


def _ip(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *argv], capture_output=True, text=True, timeout=30)


@dataclass
class TestHost:
    """One namespace: its name, its address, and the fio server running in it (if any)."""

    netns: str
    veth: str  # this namespace's end of the pair is named so; the namespace's end is <veth>n
    address: str
    port: int = PORT
    server: subprocess.Popen | None = None
    log: Path | None = None

    def start(self, fio: str = "fio", cwd: Path | None = None, wait: float = 10.0) -> None:
        """Start `fio --server` in the namespace and wait until it accepts connections."""
        self.stop()
        log = open(self.log, "a") if self.log else subprocess.DEVNULL  # noqa: SIM115
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, fio, f"--server=ip:{self.address},{self.port}"],
            cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"fio --server in {self.netns} exited {self.server.returncode}"
                                   + (f": {self.log.read_text()[-500:]}" if self.log else ""))
            with contextlib.suppress(OSError), socket.create_connection(
                    (self.address, self.port), timeout=0.2):
                return
            time.sleep(0.05)
        raise RuntimeError(f"fio --server in {self.netns} did not listen on "
                           f"{self.address}:{self.port} within {wait:g} s")

    def kill(self) -> None:
        """SIGKILL every process in the namespace: the server and the workers it forked, as a
        host that loses power (fio's client sees its connection drop)."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.server is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.server.wait(timeout=5)
            self.server = None

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL) and anything it left in the namespace."""
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.server.wait(timeout=5)
        self.kill()

    def pids(self) -> list[int]:
        done = _ip("netns", "pids", self.netns)
        return [int(p) for p in done.stdout.split() if p.isdigit()]


@dataclass
class TestHosts:
    """The namespaces of one test, torn down whole however the test ends."""

    hosts: list[TestHost] = field(default_factory=list)

    @property
    def addresses(self) -> list[str]:
        return [h.address for h in self.hosts]

    def teardown(self) -> None:
        for host in self.hosts:
            host.stop()
            _ip("link", "del", host.veth)  # deletes both ends of the pair
            _ip("netns", "del", host.netns)


def _free_subnet() -> int:
    """A third octet of 169.254.X.0/24 that no interface on this machine uses."""
    used = _ip("-o", "-4", "addr", "show").stdout
    start = 100 + os.getpid() % 100
    for third in [*range(start, 200), *range(100, start)]:
        if f" 169.254.{third}." not in used:
            return third
    pytest.skip("every 169.254.100-199.0/24 subnet is in use on this machine")


def _must(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{what}: {done.stderr.strip() or done.returncode}")


def _add(hosts: TestHosts, index: int, third: int) -> TestHost:
    tag = f"kv{os.getpid() % 100000}h{index}"
    host = TestHost(netns=tag, veth=tag, address=f"169.254.{third}.{4 * index + 2}")
    hosts.hosts.append(host)  # torn down even if it is only half made
    _must(_ip("netns", "add", host.netns), f"ip netns add {host.netns}")
    _must(_ip("link", "add", host.veth, "type", "veth", "peer", "name", f"{tag}n", "netns",
              host.netns), f"ip link add {host.veth}")
    _must(_ip("addr", "add", f"169.254.{third}.{4 * index + 1}/30", "dev", host.veth),
          f"ip addr add on {host.veth}")
    _must(_ip("link", "set", host.veth, "up"), f"ip link set {host.veth} up")
    for argv in (("addr", "add", f"{host.address}/30", "dev", f"{tag}n"),
                 ("link", "set", f"{tag}n", "up"), ("link", "set", "lo", "up")):
        _must(_ip("-n", host.netns, *argv), f"ip -n {host.netns} {' '.join(argv)}")
    # The guard: the address must route over our own veth, never out of the machine.
    route = _ip("route", "get", host.address).stdout
    if f"dev {host.veth} " not in route + " ":
        raise RuntimeError(f"{host.address} does not route over {host.veth}: {route.strip()}")
    return host


def need_netns() -> None:
    """Skip the calling test, saying how to run it, where namespaces cannot be made here."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip(HOW)
    probe = f"kvprobe{os.getpid() % 100000}"
    if _ip("netns", "add", probe).returncode != 0:
        pytest.skip(HOW)
    _ip("netns", "del", probe)


@contextlib.contextmanager
def test_hosts(count: int, logs: Path | None = None, fio: str = "fio",
               start: bool = True) -> Iterator[TestHosts]:
    """``count`` namespaces with a fio server each (unless start is False), torn down after."""
    need_netns()
    hosts = TestHosts()
    try:
        third = _free_subnet()
        for index in range(count):
            host = _add(hosts, index, third)
            host.log = logs / f"fio-server-{host.netns}.log" if logs else None
            if start:
                host.start(fio)
        yield hosts
    finally:
        hosts.teardown()


test_hosts.__test__ = False  # not a test, whatever its name
TestHost.__test__ = False
TestHosts.__test__ = False


def fio_with_version(version: str, folder: Path, fio: str = "fio") -> Path:
    """A copy of this machine's fio whose version string says ``version`` (same length): a real
    fio server, same protocol, that answers the client's probe with another version."""
    binary = Path(shutil.which(fio) or fio)
    own = subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                         timeout=30).stdout.strip()
    data = binary.read_bytes()
    old, new = own.encode() + b"\0", version.encode() + b"\0"
    if len(old) != len(new) or data.count(old) != 1:
        pytest.skip(f"cannot make a {version} from {own}: its version string is not unique "
                    "or not the same length")
    copy = folder / version
    copy.write_bytes(data.replace(old, new))
    copy.chmod(0o755)
    return copy
