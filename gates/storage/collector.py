"""The command-runner seam of the configuration checks: Found facts, the Collector, install hints.

Every command runs with a timeout and every raw output is kept as evidence; what could not be
collected carries the error (a missing tool names its package).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, Field

from .blockdev import ParseError
from .runner import CommandRunner, ToolMissing

T = TypeVar("T")
TIMEOUT = 30.0

GDS_TOOLS = ("gds-tools (NVIDIA's CUDA repository: apt-get install gds-tools-12-8, dnf install "
             "gds-tools-12-8, or nvidia-gds for the driver too)")
# The package that carries each tool, named when the tool is missing.
PACKAGES = {
    "mdadm": "mdadm", "nvme": "nvme-cli", "rdma": "iproute2 (Debian: apt-get install iproute2; "
    "RHEL: dnf install iproute)", "xfs_info": "xfsprogs", "findmnt": "util-linux",
    "lsblk": "util-linux", "dmesg": "util-linux", "ip": "iproute2",
    # gds-tools puts both in /usr/local/cuda/gds/tools (NVIDIA GDS Installation Guide).
    "gdscheck": GDS_TOOLS, "gdsio": GDS_TOOLS,
}


def install_hint(tool: str) -> str:
    """What to install to get a tool, for an ERROR a site engineer can act on."""
    package = PACKAGES.get(tool, tool)
    if "(" in package:
        return f"install {package}"
    return f"install {package} (Debian/Ubuntu: apt-get install {package}; RHEL: dnf install " \
           f"{package})"


class Found(BaseModel, Generic[T]):
    """One collected fact: its value, or why it is missing (error) or does not apply (skipped)."""

    value: T | None = None
    error: str = ""
    skipped: str = ""
    evidence: list[str] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether a value was collected."""
        return self.value is not None and not self.error and not self.skipped


def _slug(argv: Sequence[str]) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", " ".join(argv))[:80].strip("-")


class Collector:
    """Runs the configuration commands and reads sysfs, keeping every raw output as evidence."""

    def __init__(self, runner: CommandRunner, evidence_dir: Path | None = None,
                 root: Path = Path("/"), timeout: float = TIMEOUT):
        self.runner, self.evidence_dir, self.root, self.timeout = (runner, evidence_dir, root,
                                                                   timeout)
        self.evidence: list[Path] = []
        self.used: set[str] = set()

    def keep(self, name: str, text: str) -> list[str]:
        """Save one raw output as evidence; its file name, or none when no evidence is kept."""
        if self.evidence_dir is None:
            return []
        self.evidence_dir.mkdir(parents=True, exist_ok=True)
        path = self.evidence_dir / name
        path.write_text(text)
        self.evidence.append(path)
        return [path.name]

    def run(self, argv: Sequence[str], parse: Callable[[str, str], T]) -> Found[T]:
        """Run argv and parse its stdout; any failure becomes an error that names the command."""
        command = " ".join(argv)
        tool = Path(argv[0]).name
        try:
            done = self.runner.run(argv, timeout=self.timeout)
        except ToolMissing:
            return Found(error=f"`{command}`: '{tool}' is not installed: {install_hint(tool)}")
        except OSError as exc:
            return Found(error=f"`{command}` could not start: {exc.strerror or exc}")
        self.used.add(tool)
        slug = _slug(argv)
        evidence = self.keep(f"config-{slug}.out", done.stdout)
        if done.stderr.strip() or done.returncode:
            evidence += self.keep(f"config-{slug}.err",
                                   f"exit status {done.returncode}\n{done.stderr}")
        if done.timed_out:
            return Found(error=f"`{command}` did not finish within {self.timeout:g} s",
                         evidence=evidence)
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip()).splitlines()
            return Found(error=f"`{command}` failed (exit status {done.returncode})"
                         + (f": {said[-1][:200]}" if said else ""), evidence=evidence)
        try:
            return Found(value=parse(done.stdout, command), evidence=evidence)
        except ParseError as exc:
            return Found(error=str(exc), evidence=evidence)

    def read(self, path: str) -> str | None:
        """A sysfs or procfs file's text, or None when it is missing or unreadable (EINVAL)."""
        try:
            return (self.root / path.lstrip("/")).read_text(errors="replace")
        except OSError:
            return None

    def version(self, tool: str, argv: Sequence[str]) -> str:
        """The first line a tool prints about its version ("" when it cannot say)."""
        try:
            done = self.runner.run(argv, timeout=self.timeout)
        except (ToolMissing, OSError):
            return ""
        if done.returncode != 0 or done.timed_out:
            return ""
        text = (done.stdout.strip() or done.stderr.strip()).splitlines()
        return text[0][:120] if text else ""


VERSION_ARGV = {"mdadm": ["mdadm", "--version"], "nvme": ["nvme", "version"],
                "xfs_info": ["xfs_info", "-V"], "findmnt": ["findmnt", "--version"],
                "rdma": ["rdma", "-V"]}
