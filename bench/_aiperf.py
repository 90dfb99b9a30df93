"""aiperf 0.13.0 for bench/vs_aiperf.py: where it lives, its command line, its export. Pure.

Every flag and field used here was read from aiperf 0.13.0's installed package (paths below
are inside site-packages/aiperf/); nothing is guessed. No aiperf import: the parsing runs in
kvgate's venv and in the tests without aiperf installed.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

VERSION = "0.13.0"
WORDS = 4096  # prompt vocabulary w0..w4095; the server's output token is "tok"
EXPORT = "profile_export.jsonl"  # config/artifacts.py: PROFILE_EXPORT_JSONL_FILE
AGGREGATE = "profile_export_aiperf.json"  # config/artifacts.py, the summary export
# Time units of exported metrics: common/enums/metric_enums.py, MetricTimeUnit tags.
_PER_SECOND = {"ns": 1e9, "us": 1e6, "ms": 1e3, "sec": 1.0}

# Run with aiperf's venv python, argv[1] = output folder: a WordLevel tokenizer over the prompt
# words (tokenizers is an aiperf dependency), saved as tokenizer.json + tokenizer_config.json
# so transformers' AutoTokenizer loads it from the folder; nothing is downloaded.
TOKENIZER_SCRIPT = f"""
import json, sys
from pathlib import Path
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
out = Path(sys.argv[1])
vocab = {{"[UNK]": 0, "tok": 1}} | {{f"w{{i}}": i + 2 for i in range({WORDS})}}
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")  # decodes ids back to space-separated words
out.mkdir(parents=True, exist_ok=True)
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({{
    "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]",
    "model_max_length": 1 << 20}}))
"""


def venv_dir(cache: Path) -> Path:
    """aiperf's own venv under kvgate's cache root (gates.engines.cache_root)."""
    return cache / "aiperf" / f"venv-{VERSION}"


def text_prompts(tag: str, count: int, words: int) -> list[str]:
    """``count`` distinct prompts of ``words`` vocabulary words each, deterministic per tag."""
    out = []
    for i in range(count):
        rng = random.Random(f"vs-aiperf:{tag}:{i}")
        out.append(" ".join(f"w{rng.randrange(WORDS)}" for _ in range(words)))
    return out


def input_file(prompts: list[str], max_tokens: int) -> str:
    """aiperf's single_turn JSONL: dataset/loader/models.py SingleTurn (text, output_length)."""
    return "".join(json.dumps({"text": p, "output_length": max_tokens}) + "\n" for p in prompts)


def profile_argv(aiperf: Path, *, url: str, model: str, tokenizer: Path, inputs: Path,
                 requests: int, concurrency: int, warmup: int, artifacts: Path,
                 timeout: float, rate: float | None = None) -> list[str]:
    """``aiperf profile`` for one run (flags: config/flags/cli_config.py): closed loop at
    ``concurrency``, or open loop at a constant ``rate`` (requests/s) when one is given."""
    load = (["--concurrency", str(concurrency)] if rate is None else
            ["--request-rate", f"{rate:g}", "--arrival-pattern", "constant"])
    return [
        str(aiperf), "profile", "--model", model, "--url", url,
        # /v1/completions with a text prompt and max_tokens (endpoints/openai_completions.py),
        # streamed: TTFT and ITL exist only for streaming records (metrics/types/*).
        "--endpoint-type", "completions", "--streaming",
        # A folder path loads locally (common/tokenizer.py resolve_alias: a path is local).
        "--tokenizer", str(tokenizer),
        # The prompts both clients send, in file order; one sampler serves warm-up then
        # profiling (timing/phase_orchestrator.py), so no prompt is sent twice.
        "--input-file", str(inputs), "--custom-dataset-type", "single-turn",
        "--dataset-sampling-strategy", "sequential",
        "--request-count", str(requests), *load, "--warmup-request-count", str(warmup),
        # kvgate sends ignore_eos (gates.loadgen.payload): the same body field here.
        "--extra-inputs", "ignore_eos:true",
        # Token counts from the server's usage, as kvgate counts them: the same work each.
        "--use-server-token-count",
        # No /metrics scrape, no DCGM probe, no TUI: only the load generator runs.
        "--no-server-metrics", "--no-gpu-telemetry", "--ui-type", "none",
        "--request-timeout-seconds", str(timeout),
        # records: the per-request profile_export.jsonl (--export-level help, cli_config.py).
        "--artifact-dir", str(artifacts), "--export-level", "records",
    ]


@dataclass(frozen=True)
class Record:
    """One request as a client saw it, in the form both clients' records are compared in."""

    key: str  # the server's stamp key: X-Request-ID (aiperf) or the prompt hash (kvgate)
    ok: bool
    ttft: float | None  # seconds
    itl: float | None  # seconds: (last content - first content) / (tokens - 1)
    start: float | None = None  # wall-clock seconds (time.time()), for the CPU window
    end: float | None = None


def metric_seconds(metric: dict | None) -> float | None:
    """A time metric {"value", "unit"} of the export (common/models/record_models.py
    MetricValue) in seconds; None when absent or not a time."""
    if not metric or metric.get("unit") not in _PER_SECOND or metric.get("value") is None:
        return None
    return float(metric["value"]) / _PER_SECOND[metric["unit"]]


def parse_export(text: str, phase: str = "profiling") -> list[Record]:
    """profile_export.jsonl lines (common/models/record_models.py MetricRecordInfo: metadata,
    metrics, error) of one benchmark phase as Records; warm-up lines are skipped."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            meta, metrics = row["metadata"], row.get("metrics") or {}
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{EXPORT} line {n} is not an aiperf record: {exc}") from None
        # MetricRecordMetadata: benchmark_phase is "warmup" or "profiling" (CreditPhase).
        if meta.get("benchmark_phase") != phase:
            continue
        ok = row.get("error") is None and not meta.get("was_cancelled")
        out.append(Record(
            key=meta["x_request_id"],  # the X-Request-ID header (transports/base_transports.py)
            ok=ok,
            ttft=metric_seconds(metrics.get("time_to_first_token")),  # ttft_metric.py
            itl=metric_seconds(metrics.get("inter_token_latency")),  # inter_token_latency_metric
            # request_start_ns / request_end_ns: wall clock, time.time_ns().
            start=meta["request_start_ns"] / 1e9, end=meta["request_end_ns"] / 1e9))
    return out


def parse_aggregate(obj: dict) -> dict[str, float | None]:
    """aiperf's own summary (profile_export_aiperf.json, common/models/export_models.py
    JsonMetricResult: unit + avg/p50/...): TTFT and ITL p50 in s, output tokens/s."""
    def p50(tag: str) -> float | None:
        m = obj.get(tag) or {}
        return metric_seconds({"value": m.get("p50"), "unit": m.get("unit")})

    throughput = (obj.get("output_token_throughput") or {}).get("avg")
    return {"ttft_p50": p50("time_to_first_token"), "itl_p50": p50("inter_token_latency"),
            "output_throughput": None if throughput is None else float(throughput)}


def kvgate_records(out: dict, key_of) -> list[Record]:
    """The measured (non-warm-up) records _kvclient.py wrote, keyed by ``key_of(prompt)``."""
    wall0 = out["wall0"]
    return [Record(key=key_of(r["prompt"]), ok=r["ok"], ttft=r["ttft"], itl=r["itl"],
                   start=wall0 + r["t0"],
                   end=None if r["e2e"] is None else wall0 + r["t0"] + r["e2e"])
            for r in out["records"] if not r["warmup"]]


def read_run(artifacts: Path) -> tuple[list[Record], dict[str, float | None]]:
    """One aiperf run's profiling records and its own summary, from its artifact folder."""
    records = parse_export((artifacts / EXPORT).read_text())
    aggregate = artifacts / AGGREGATE
    summary = parse_aggregate(json.loads(aggregate.read_text())) if aggregate.exists() else {}
    return records, summary
