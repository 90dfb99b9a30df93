"""Parse memory and speed: how `kvgate proof` reads a large exposition (issue #25 item 8: a 50 MiB
exposition took 164 s and 1.26 GB on 010cc10, and nothing limited its size).

Each exposition is the recorded vLLM scrape (tests/data/metrics/vllm.after.prom) behind N MiB
of families no vLLM rule reads, shaped like vLLM's own histograms (five labels a line). Every
figure is measured in a fresh child process, so its peak RSS (ru_maxrss) is that read's alone:

* streamed: the path `kvgate proof` takes (commands/proof.py read_exposition): the file read
  line by line by `parse_metrics(stream, keep=families("vllm"))`, every line checked, only
  the engine's families kept;
* worst case: the same size made of series of one family the rules read (all kept), up to
  promtext.MAX_SERIES, the most one scrape may keep;
* whole text: `parse_metrics(text)` with no filter, as G3 reads an engine's live /metrics body
  (capped at promtext.MAX_EXPOSITION), for the smaller sizes only (it is the slow path).

Peak is the child's peak RSS (VmHWM) minus that of a child that imported the same and read
nothing.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine, print_table

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "tests" / "data" / "metrics" / "vllm.after.prom"
CHILD = r"""
import json, sys, time
from pathlib import Path
mode, path = sys.argv[1], Path(sys.argv[2])
from gates.inference import families, parse_metrics
t = time.perf_counter()
if mode == "streamed":
    with path.open(encoding="utf-8", newline="") as f:
        kept = len(parse_metrics(f, keep=families("vllm"), openmetrics=False).samples)
elif mode == "whole":
    kept = len(parse_metrics(path.read_text()).samples)
else:
    kept = 0
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec() from the parent's image.
hwm = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))
print(json.dumps({"seconds": time.perf_counter() - t, "kept": kept, "rss": hwm * 1024}))
"""


def noise(mib: float, kept: bool) -> str:
    """About mib MiB of histogram-shaped lines: of an unread family, or of one the rules read."""
    lines, size, i = [], 0, 0
    name = "vllm:prompt_tokens_total" if kept else "vllm:request_queue_time_seconds_bucket"
    while size < mib * 2**20:
        labels = (f'engine="{i}",model_name="Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"' if kept
                  else f'engine="{i % 64}",model_name="Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",'
                  f'le="{i % 997}.5",finished_reason="stop",pod="node-{i % 512:03d}"')
        line = f"{name}{{{labels}}} {i}.0\n"
        lines.append(line)
        size += len(line)
        i += 1
    head = f"# TYPE {name.removesuffix('_bucket')} {'counter' if kept else 'histogram'}\n"
    return head + "".join(lines)


def child(mode: str, path: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True,
                          text=True, timeout=900, cwd=ROOT)
    if done.returncode:  # e.g. refused: more series than one scrape may keep
        return {"error": done.stderr.strip().splitlines()[-1].split("Error: ", 1)[-1][:90]}
    return json.loads(done.stdout)


def main() -> int:
    """Print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1,10,50", help="MiB of unread families (default 1,10,50)")
    p.add_argument("--whole-max", type=float, default=10.0,
                   help="largest size read whole, without the filter (default 10 MiB)")
    p.add_argument("--plain", action="store_true", help="plain text instead of a rich table")
    args = p.parse_args()
    sizes = [float(x) for x in args.sizes.split(",")]
    recording = RECORDING.read_text()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = child("none", RECORDING)["rss"]
        for mib in sizes:
            for kind, kept in (("streamed", False), ("worst case", True)):
                path = Path(tmp) / f"{mib:g}-{kept}.prom"
                path.write_text(noise(mib, kept) if kept else noise(mib, kept) + recording)
                mode = "streamed"
                for run, m in ((kind, mode),) + ((("whole text", "whole"),)
                                                 if not kept and mib <= args.whole_max else ()):
                    t = time.perf_counter()
                    got = child(m, path)
                    wall = time.perf_counter() - t
                    size = path.stat().st_size / 2**20
                    if "error" in got:
                        rows.append([run, f"{size:.1f}", "—", "—", "—", got["error"]])
                        continue
                    rows.append([run, f"{size:.1f}", f"{got['kept']:,}", f"{got['seconds']:.2f}",
                                 f"{(got['rss'] - base) / 2**20:.1f}",
                                 f"{size / got['seconds']:.1f} MiB/s; child {wall:.1f} s"])
    print(f"# {machine()}")
    print_table("kvgate proof reading one exposition (peak RSS above an idle child)",
                ["read", "MiB", "series kept", "seconds", "peak MiB", "note"], rows, args.plain)
    return 0


if __name__ == "__main__":
    sys.exit(main())
