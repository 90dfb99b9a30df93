"""Small vLLM-style expositions written the way prometheus_client writes them, in the text format,
OpenMetrics, or OpenMetrics with its default escaping (':' as '_' on sample lines:
prometheus/client_python#1177), for the proof's tests. Names and label values are vLLM 0.32.0's
(tests/data/metrics/README.md)."""

from __future__ import annotations

import math

# (family, label name of the split, its values) as vllm/v1/metrics/loggers.py exports them.
BY_SOURCE = ("vllm:prompt_tokens_by_source", ("local_compute", "local_cache_hit",
                                              "external_kv_transfer"))
CACHED_BY_SOURCE = ("vllm:prompt_tokens_cached_by_source", ("device", "host", "p2p", "disk",
                                                            "external_unspecified"))


def engine_counts(prompt: float = 0, compute: float = 0, gpu: float = 0, disk: float = 0,
                  host: float = 0, unspecified: float = 0) -> dict[str, dict[str, float]]:
    """One DP engine's cumulative counters: family -> {source or "": value}."""
    external = disk + host + unspecified
    return {"vllm:prompt_tokens": {"": prompt},
            BY_SOURCE[0]: {"local_compute": compute, "local_cache_hit": gpu,
                           "external_kv_transfer": external},
            CACHED_BY_SOURCE[0]: {"device": gpu, "host": host, "p2p": 0.0, "disk": disk,
                                  "external_unspecified": unspecified}}


def _value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def render(engines: list[dict[str, dict[str, float]]], fmt: str = "text",
           extra: dict[str, str] | None = None, start_time: float | None = None,
           rank_label: str = "engine") -> str:
    """The exposition of these engines: fmt "text", "om" or "om_" (colons escaped)."""
    lines = []
    if start_time is not None:
        lines += ["# HELP process_start_time_seconds Start time of the process since unix epoch.",
                  "# TYPE process_start_time_seconds gauge",
                  f"process_start_time_seconds {start_time!r}"]
    for family in engines[0] if engines else []:
        declared = family if fmt != "text" else family + "_total"
        lines += [f"# HELP {declared} {family} (vLLM).", f"# TYPE {declared} counter"]
        for e, counts in enumerate(engines):
            for source, value in counts[family].items():
                labels = {rank_label: str(e), "model_name": "m"} | (
                    {"source": source} if source else {}) | (extra or {})
                inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
                name = family.replace(":", "_") if fmt == "om_" else family
                lines.append(f"{name}_total{{{inner}}} {_value(value)}")
    if fmt != "text":
        lines.append("# EOF")
    return "\n".join(lines) + "\n"
