"""`kvgate proof`: judge a probe's storage-read evidence offline, from recorded expositions.

A site that scraped its engines with its own tools (two /metrics scrapes around a cold probe,
the storage side's byte counters) gets the same evidence table and verdict G3 gives.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..core import ADAPTER_NAMES, UnitError, parse_rate, parse_size
from ..inference import (
    AttributionError,
    MetricsParseError,
    ProbeEvidence,
    ProofContext,
    StorageReads,
    attribute,
    engine_evidence,
    judge_chain,
    parse_metrics,
    probe_chain,
)

EXAMPLES = """examples:
  kvgate proof --engine lmcache --before b.prom --after a.prom --expected-tokens 8192 \\
      --ranks 8 --device-bytes 1.2e9 --kv-bytes-per-token 126976
  kvgate proof --engine dynamo-kvbm --before kvbm.before.prom --after kvbm.after.prom \\
      --expected-tokens 8192 --block-tokens 16 --nic-bytes 1.1e9 --kv-bytes-per-token 131072

The byte counts are what the storage side received during the probe: the KV block devices'
read bytes (md array or its members, not both), the storage NICs' rx_bytes, the RDMA ports'
port_rcv_data x 4, or the engine process's /proc/PID/io read_bytes.

exit codes: 0 the proof passes, 1 a signal disagrees (named), 2 inconclusive or bad input"""


def add_proof_commands(commands: argparse._SubParsersAction) -> None:
    """Register `proof` and its options."""
    p = commands.add_parser("proof", help="judge a probe's storage-read evidence from recorded "
                            "/metrics scrapes", epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", required=True, choices=ADAPTER_NAMES, help="the metrics adapter")
    p.add_argument("--before", type=Path, required=True, help="/metrics scraped before the probe")
    p.add_argument("--after", type=Path, required=True, help="/metrics scraped after the probe")
    p.add_argument("--expected-tokens", type=int, required=True,
                   help="context tokens the probe should have read from storage")
    p.add_argument("--ranks", type=int, default=None, help="ranks that must each show reads")
    p.add_argument("--block-tokens", type=int, default=None,
                   help="tokens per KV block (Dynamo KVBM counts blocks)")
    p.add_argument("--kv-bytes-per-token", type=int, default=None,
                   help="KV bytes a token occupies on the tier (kvgate model kv)")
    for flag, what in (("device", "the KV block devices' read bytes"),
                       ("nic", "the storage NICs' receive bytes"),
                       ("rdma", "the RDMA ports' receive bytes (port_rcv_data x 4)"),
                       ("process", "the engine process's read_bytes")):
        p.add_argument(f"--{flag}-bytes", type=float, default=None, help=what)
    p.add_argument("--probe-seconds", type=float, default=0.0, help="the probe's duration")
    p.add_argument("--restore-bw", default="", help="G1's KV-restore bandwidth, e.g. 5GB/s")
    p.add_argument("--link-bw", default="", help="the storage link's ceiling, e.g. 12.5GB/s")
    p.add_argument("--memory", default="", help="the host's memory, e.g. 1TiB (page cache)")
    p.add_argument("--cpu-tier", default="", help="the engine's CPU KV tier, e.g. 64GiB")
    p.add_argument("--page-cache-dropped", action="store_true",
                   help="the KV files' page cache was dropped before the probe")
    p.add_argument("--read-fraction-min", type=float, default=90.0,
                   help="%% of the expected tokens the engine must have read (default 90)")
    p.add_argument("--json", action="store_true", help="print the table as JSON")


def _read(path: Path):
    try:
        return parse_metrics(path.read_text())
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    except MetricsParseError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _bytes(text: str, what: str, parse) -> int | None:
    try:
        return int(parse(text)) if text else None
    except UnitError as exc:
        raise ValueError(f"--{what}: {exc}") from None


def evidence_from(args: argparse.Namespace) -> tuple[ProbeEvidence, ProofContext]:
    """The probe evidence and proof context the command's options describe."""
    a = attribute(args.engine, _read(args.before), _read(args.after), args.block_tokens)
    storage = StorageReads(
        device_bytes=None if args.device_bytes is None else int(args.device_bytes),
        nic_bytes=None if args.nic_bytes is None else int(args.nic_bytes),
        rdma_bytes=None if args.rdma_bytes is None else int(args.rdma_bytes))
    evidence = ProbeEvidence(
        engine=args.engine, expected_tokens=args.expected_tokens,
        kv_bytes_per_token=args.kv_bytes_per_token, **engine_evidence(a), storage=storage,
        process_read_bytes=None if args.process_bytes is None else int(args.process_bytes),
        probe_seconds=args.probe_seconds, page_cache_dropped=args.page_cache_dropped,
        repetitions=1)
    context = ProofContext(
        read_fraction_min=args.read_fraction_min, expected_ranks=args.ranks,
        restore_bw=_bytes(args.restore_bw, "restore-bw", parse_rate),
        link_bw=_bytes(args.link_bw, "link-bw", parse_rate),
        memory_bytes=_bytes(args.memory, "memory", parse_size),
        cpu_tier_bytes=_bytes(args.cpu_tier, "cpu-tier", parse_size))
    return evidence, context


def proof_command(args: argparse.Namespace) -> int:
    """Print the evidence table and the verdict; exit 0 pass, 1 fail, 2 inconclusive."""
    try:
        signals = probe_chain(*evidence_from(args))
    except (ValueError, AttributionError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    verdict = judge_chain(signals)
    if args.json:
        print(json.dumps({"verdict": "INCONCLUSIVE" if verdict.inconclusive
                          else verdict.outcome.value, "reason": verdict.reason,
                          "signals": [s.model_dump(mode="json") for s in signals]}, indent=2))
    else:
        for s in signals:
            print(f"[{s.kind}] {s.line()}")
        word = "INCONCLUSIVE" if verdict.inconclusive else verdict.outcome.value
        print(f"{word}: {verdict.reason}")
    return {"PASS": 0, "FAIL": 1}.get(verdict.outcome.value, 2)
