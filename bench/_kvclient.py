"""kvgate's side of bench/vs_aiperf.py: gates.loadgen.run_phase in a process of its own.

``python bench/_kvclient.py SPEC OUT``: SPEC is JSON {url, model, concurrency, rate (None:
closed loop), max_tokens, warm: [prompt...], prompts: [prompt...]}; one ``run_phase`` sends the
warm-up prompts first (phase "warmup": run_phase's records mark them, summaries skip them) and then
the measured ones, exactly as kvgate's own phases run; OUT gets one line per record plus
``summarize``'s numbers. Text prompts, so both clients send the same bodies' prompts.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gates.loadgen import Endpoint, LoadSettings, run_phase, summarize
from gates.loadgen.metrics import tpot


@dataclass(frozen=True)
class TextRequest:
    """A planned request with a text prompt (gates.loadgen.PlannedLike)."""

    request_id: str
    prompt: str
    max_tokens: int
    phase: str


def main(spec_path: str, out_path: str) -> int:
    """Run the phase the spec describes and write its records."""
    spec = json.loads(Path(spec_path).read_text())
    endpoint = Endpoint(url=spec["url"], model=spec["model"])
    timeouts = dict(stall_timeout=30, request_timeout=spec.get("request_timeout", 120))
    settings = (LoadSettings(mode="concurrency", concurrency=spec["concurrency"], **timeouts)
                if spec.get("rate") is None else  # open loop, the same schedule as aiperf's
                LoadSettings(mode="rate", rate=spec["rate"], arrival="constant", **timeouts))
    requests = [TextRequest(f"warm-{i:06d}", p, spec["max_tokens"], "warmup")
                for i, p in enumerate(spec["warm"])]
    requests += [TextRequest(f"req-{i:06d}", p, spec["max_tokens"], "probe")
                 for i, p in enumerate(spec["prompts"])]
    # run_phase keeps its time origin to itself: this brackets it to well under a millisecond,
    # plenty for placing the measured window on the CPU samples (time.time(), as aiperf's).
    wall0 = time.time()
    result = asyncio.run(run_phase(requests, [endpoint], settings))
    summary = summarize(result.records, result.wall)
    prompt_of = {r.request_id: r.prompt for r in requests}
    rows = [{"request_id": r.request_id, "prompt": prompt_of[r.request_id], "ok": r.ok,
             "warmup": r.warmup, "t0": r.t0, "ttft": r.ttft, "e2e": r.e2e, "itl": tpot(r),
             "output_tokens": r.output_tokens, "error": r.error} for r in result.records]
    Path(out_path).write_text(json.dumps({
        "wall0": wall0, "wall": result.wall, "records": rows,
        "self_check": result.self_check.line(),
        "summary": {"ttft_p50": summary.ttft.p50, "itl_p50": summary.itl.p50,
                    "output_throughput": summary.output_throughput_span,
                    "request_throughput": summary.request_throughput_span}}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python bench/_kvclient.py SPEC.json OUT.json")
    sys.exit(main(sys.argv[1], sys.argv[2]))
