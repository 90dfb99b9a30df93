"""`kvgate proof`: judge a probe's storage-read evidence offline, from recorded expositions.

A site that scraped its engines with its own tools (two /metrics scrapes around a cold probe,
the storage side's byte counters) gets the same evidence table and verdict G3 gives: the same
attribution, the same chain, the same input models (their ranges name the option here).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from ..core.configuration import ADAPTER_NAMES
from ..core.quantities import UnitError, parse_rate, parse_size
from ..inference import TARGET_LABEL
from ..options import Range, input_file
from ..proof import (
    MAX_EXPOSITION,
    AttributionError,
    CacheDrop,
    MetricSet,
    MetricsParseError,
    ProbeEvidence,
    ProofContext,
    StorageReads,
    attribute,
    engine_evidence,
    families,
    is_openmetrics,
    judge_chain,
    merge_targets,
    parse_metrics,
    probe_chain,
)

EXAMPLES = """examples:
  kvgate proof --engine lmcache --before b.prom --after a.prom --expected-tokens 8192 \\
      --ranks 8 --device-bytes 1.07e9 --kv-bytes-per-token 131072
  kvgate proof --engine dynamo-kvbm --before kvbm.b.prom --before worker.b.prom \\
      --after kvbm.a.prom --after worker.a.prom --expected-tokens 8192 --block-tokens 16 \\
      --device-bytes 1.07e9 --kv-bytes-per-token 131072

Each --before/--after is one scrape target (give them in the same order): an arm's targets
are merged as G3 merges them. The byte counts are what the storage side received during the
probe: the KV block devices' read bytes (md array or its members, not both), the storage NICs'
rx_bytes, the RDMA ports' port_rcv_data x 4, or the engine process's /proc/PID/io read_bytes;
only the block devices can show that the bytes came off the storage under test.

exit codes: 0 the proof passes, 1 a signal disagrees (named), 2 error, inconclusive or bad input"""
# Model field -> the option that sets it, so a refused value names what the user typed.
OPTIONS = {"expected_tokens": "--expected-tokens", "kv_bytes_per_token": "--kv-bytes-per-token",
           "probe_prompt_tokens": "--prompt-tokens", "process_read_bytes": "--process-bytes",
           "probe_seconds": "--probe-seconds", "device_bytes": "--device-bytes",
           "nic_bytes": "--nic-bytes", "rdma_bytes": "--rdma-bytes",
           "read_fraction_min": "--read-fraction-min", "expected_ranks": "--ranks",
           "restore_bw": "--restore-bw", "link_bw": "--link-bw", "memory_bytes": "--memory",
           "cpu_tier_bytes": "--cpu-tier"}


def add_proof_commands(commands: argparse._SubParsersAction) -> None:
    """Register `proof` and its options."""
    p = commands.add_parser("proof", help="judge a probe's storage-read evidence from recorded "
                            "/metrics scrapes", epilog=EXAMPLES,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", required=True, choices=ADAPTER_NAMES, help="the metrics adapter")
    p.add_argument("--before", type=input_file, required=True, action="append",
                   help="/metrics scraped before the probe (once per scrape target)")
    p.add_argument("--after", type=input_file, required=True, action="append",
                   help="/metrics scraped after the probe (once per target, same order)")
    p.add_argument("--expected-tokens", required=True,
                   help="context tokens the probe should have read from storage")
    p.add_argument("--prompt-tokens", default=None, help="prompt tokens the probe sent "
                   "(the ceiling of the engine's figures; default: the expected tokens)")
    p.add_argument("--ranks", default=None, help="ranks the engine's counters name (LMCache: "
                   "TP x PP workers; SGLang: TP x PP x DP; vLLM: DP engines)")
    p.add_argument("--block-tokens", default=None,
                   help="tokens per KV block (Dynamo KVBM counts blocks)")
    p.add_argument("--kv-bytes-per-token", default=None,
                   help="KV bytes a token occupies on the tier (kvgate model kv)")
    for flag, what in (("device", "the KV block devices' read bytes"),
                       ("nic", "the storage NICs' receive bytes"),
                       ("rdma", "the RDMA ports' receive bytes (port_rcv_data x 4)"),
                       ("process", "the engine process's read_bytes")):
        p.add_argument(f"--{flag}-bytes", default=None, help=what)
    p.add_argument("--probe-seconds", default=None, help="the probe's duration")
    p.add_argument("--restore-bw", default="", help="G1's KV-restore bandwidth, e.g. 5GB/s")
    p.add_argument("--link-bw", default="", help="the storage link's ceiling, e.g. 12.5GB/s")
    p.add_argument("--memory", default="", help="the host's memory, e.g. 1TiB (page cache)")
    p.add_argument("--cpu-tier", default="", help="the engine's CPU KV tier, e.g. 64GiB")
    p.add_argument("--page-cache-dropped", action="store_true",
                   help="the KV files' page cache was dropped before the probe (said, not "
                   "measured: it rules nothing out without --page-cache-resident)")
    p.add_argument("--page-cache-bytes", default=None,
                   help="the KV files' bytes the drop covered (with --page-cache-resident)")
    p.add_argument("--page-cache-resident", default=None,
                   help="of them, bytes still in the page cache after the drop, measured "
                   "(fincore --bytes, or mincore): only a drop measured at ~0 rules memory out")
    p.add_argument("--restarted", action="store_true", help="the engine was restarted between "
                   "the scrapes on purpose (its start time must show it)")
    p.add_argument("--read-fraction-min", default="90",
                   help="%% of the expected tokens the engine must have read (default 90; "
                   "90, or 90%%: a number from 0 to 1 without %% is refused as a fraction)")
    p.add_argument("--json", action="store_true", help="print the table as JSON")


def read_exposition(path: Path, engine: str) -> MetricSet:
    """One recorded scrape, streamed: the engine's families kept, the rest checked, dropped."""
    try:
        with path.open("rb") as f:
            size = path.stat().st_size
            head = f.read(2)
            if head == b"\x1f\x8b":
                raise ValueError(f"{path}: gzip-compressed: decompress it first (gunzip)")
            if size > MAX_EXPOSITION:
                raise ValueError(f"{path}: {size:,} bytes, more than the "
                                 f"{MAX_EXPOSITION // 2**20} MiB kvgate reads")
            f.seek(max(0, size - 256))
            tail = f.read().decode("utf-8", "replace")
            f.seek(0)
            text = io.TextIOWrapper(f, encoding="utf-8", errors="strict", newline="")
            return parse_metrics(text, keep=families(engine), openmetrics=is_openmetrics(tail))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a text exposition (byte {exc.object[exc.start]:#04x} "
                         "is not UTF-8): a binary or compressed file?") from None
    except MetricsParseError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _scrape(paths: list[Path], engine: str) -> MetricSet:
    return merge_targets([(str(i), read_exposition(p, engine))
                          for i, p in enumerate(paths, start=1)], TARGET_LABEL)


# What a byte counter can hold: an int64, as /proc and sysfs give them.
BYTES = Range(0, 2**63 - 1, whole=True, unit="bytes")


def _percent(text: str, option: str) -> float | None:
    """A percentage, "90" or "90%"; a bare number from 0 to 1 ("0.9") is a fraction someone
    meant as 90 %, which would be read as 0.9 %: refused, naming what to write."""
    words = text.strip()
    value = _number(words.removesuffix("%").strip(), option)
    if value is not None and not words.endswith("%") and 0 < value <= 1:
        raise ValueError(f"{option}: {text!r} would be read as {value:g} %, not "
                         f"{100 * value:g} %: write {100 * value:g} for {100 * value:g} %, or "
                         f"{value:g}% if you mean {value:g} %")
    return value


def _number(text: str | None, option: str, within: Range | None = None) -> float | None:
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{option}: {text!r} is not a number") from None
    if within and (refused := within.refusal(option, value)):
        raise ValueError(refused)
    return value


def _bytes(text: str, what: str, parse) -> int | float | None:
    try:
        return parse(text) if text else None
    except (UnitError, ValueError, OverflowError) as exc:
        raise ValueError(f"--{what}: {exc}") from None


def _refused(exc: ValidationError, args: argparse.Namespace) -> ValueError:
    problems = []
    for e in exc.errors():
        field = next((str(x) for x in reversed(e["loc"]) if str(x) in OPTIONS), "")
        option = OPTIONS.get(field, ".".join(map(str, e["loc"])))
        given = getattr(args, option.lstrip("-").replace("-", "_"), None)
        problems.append(f"{option}: {e['msg'].lower()}" + (f" (got {given})" if given else ""))
    return ValueError("; ".join(problems))


def evidence_from(args: argparse.Namespace) -> tuple[ProbeEvidence, ProofContext]:
    """The probe evidence and proof context the command's options describe."""
    if len(args.before) != len(args.after):
        raise ValueError(f"{len(args.before)} --before but {len(args.after)} --after: give one "
                         "of each per scrape target")
    block = _number(args.block_tokens, "--block-tokens")
    if block is not None and not (block >= 1 and float(block).is_integer()):
        raise ValueError(f"--block-tokens: a whole number of tokens, at least 1 (got {block})")
    expected = _number(args.expected_tokens, "--expected-tokens")
    if not (expected is not None and expected >= 1):  # NaN too
        raise ValueError(f"--expected-tokens: at least 1 token (got {args.expected_tokens})")
    built, problems = [], []

    def counted(option: str) -> float | None:
        """A byte counter's option, its refusal kept with the others' (None meanwhile)."""
        try:
            return _number(getattr(args, option[2:].replace("-", "_")), option, BYTES)
        except ValueError as exc:
            problems.append(str(exc))
            return None

    probe = dict(expected_tokens=expected,
                 kv_bytes_per_token=_number(args.kv_bytes_per_token, "--kv-bytes-per-token"),
                 probe_prompt_tokens=_number(args.prompt_tokens, "--prompt-tokens"),
                 process_read_bytes=counted("--process-bytes"),
                 probe_seconds=_number(args.probe_seconds, "--probe-seconds") or 0.0)
    # Every option refused at once, each by its name (the models' own ranges, as in G3).
    for model, values in ((StorageReads, {f"{k}_bytes": counted(f"--{k}-bytes")
                                          for k in ("device", "nic", "rdma")}),
                          (ProofContext, dict(
                              read_fraction_min=_percent(args.read_fraction_min,
                                                         "--read-fraction-min"),
                              expected_ranks=_number(args.ranks, "--ranks"),
                              restore_bw=_bytes(args.restore_bw, "restore-bw", parse_rate),
                              link_bw=_bytes(args.link_bw, "link-bw", parse_rate),
                              memory_bytes=_bytes(args.memory, "memory", parse_size),
                              cpu_tier_bytes=_bytes(args.cpu_tier, "cpu-tier", parse_size))),
                          (ProbeEvidence, probe)):
        try:
            built.append(model(**values))
        except ValidationError as exc:
            problems.append(str(_refused(exc, args)))
    size, left = counted("--page-cache-bytes"), counted("--page-cache-resident")
    try:
        cache = _page_cache(args, size, left)
    except ValueError as exc:
        problems.append(str(exc))
    if problems:
        raise ValueError("; ".join(problems))
    storage, context, _ = built
    a = attribute(args.engine, _scrape(args.before, args.engine),
                  _scrape(args.after, args.engine), int(block) if block else None,
                  restart_expected=args.restarted)
    evidence = ProbeEvidence(**probe, engine=args.engine, **engine_evidence(a), storage=storage,
                             page_cache=cache, repetitions=1)
    return evidence, context


def _page_cache(args: argparse.Namespace, size: float | None,
                left: float | None) -> CacheDrop | None:
    """The drop as the site measured it; its bare word is kept, and not believed."""
    if size is None and left is None:
        return CacheDrop(how="said by --page-cache-dropped") if args.page_cache_dropped else None
    if size is None or left is None:
        raise ValueError("--page-cache-bytes and --page-cache-resident go together: the KV "
                         "files' bytes and how many of them stayed resident after the drop")
    return CacheDrop(how="measured by the site (--page-cache-resident)", bytes=int(size),
                     resident_after=int(left))


def proof_command(args: argparse.Namespace) -> int:
    """Print the evidence table and the verdict; exit 0 pass, 1 fail, 2 otherwise."""
    try:
        signals = probe_chain(*evidence_from(args))
    except (ValueError, AttributionError) as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    verdict = judge_chain(signals)
    if args.json:
        print(json.dumps({"verdict": verdict.word, "reason": verdict.reason,
                          "signals": [s.model_dump(mode="json") for s in signals]}, indent=2))
    else:
        for s in signals:
            print(f"[{s.kind}] {s.line()}")
        print(f"{verdict.word}: {verdict.reason.removeprefix(verdict.word + ': ')}")
    return {"PASS": 0, "FAIL": 1}.get(verdict.outcome.value, 2)
