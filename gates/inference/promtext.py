"""Prometheus text exposition format (version 0.0.4) as typed samples, and deltas. Pure: no I/O.

What an engine's ``/metrics`` serves: ``# HELP`` and ``# TYPE`` lines, other comments, blank
lines, and samples ``name{label="value",...} value [timestamp_ms]``. Values may be NaN, +Inf
or -Inf; label values escape backslash, double quote and newline.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_NAME = re.compile(NAME)
_LABEL_NAME = re.compile(r"[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*\"")
# Python's float() also takes "1_000", "infinity" and hex; the format does not.
# ASCII only: Python's \d and float() also take other scripts' digits.
_VALUE = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[Nn][Aa][Nn]|[Ii][Nn][Ff])",
                    re.ASCII)
_TIMESTAMP = re.compile(r"-?\d{1,19}", re.ASCII)
_BLANKS = re.compile(r"[ \t]+")
_BRACE = re.compile(r"[ \t]*\{")
_CLOSE = re.compile(r"[ \t]*\}")
_SEP = re.compile(r"[ \t]*(,|\})")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}
TYPES = {"counter", "gauge", "histogram", "summary", "untyped",
         "unknown", "info", "stateset", "gaugehistogram"}  # the last four: OpenMetrics
# Sample-name suffixes that belong to a family declared without them (histogram, summary).
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info")
Labels = Mapping[str, "str | re.Pattern[str]"]


class MetricsParseError(ValueError):
    """Text that is not the Prometheus exposition format; names the line."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line


class Sample(BaseModel):
    """One sample line: a series (name plus labels) and its value."""

    model_config = ConfigDict(frozen=True)

    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    value: float
    timestamp_ms: int | None = None

    @property
    def key(self) -> str:
        """The series in PromQL notation, labels sorted: ``name{a="x",b="y"}``."""
        if not self.labels:
            return self.name
        inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{inner}}}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def add_up(values: list[float]) -> float:
    """Exact float sum; NaN where +Inf meets -Inf (math.fsum would raise)."""
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):
        return sum(values, 0.0)


def _matches(sample: Sample, labels: Labels | None) -> bool:
    # A label the sample lacks matches as "", as in PromQL.
    for name, want in (labels or {}).items():
        have = sample.labels.get(name, "")
        if isinstance(want, re.Pattern) and not want.fullmatch(have):
            return False
        if isinstance(want, str) and have != want:
            return False
    return True


class MetricSet(BaseModel):
    """Every sample of one scrape (or the deltas between two), with HELP and TYPE."""

    samples: list[Sample] = Field(default_factory=list)
    types: dict[str, str] = Field(default_factory=dict)
    help: dict[str, str] = Field(default_factory=dict)
    resets: list[str] = Field(default_factory=list)  # delta only: series whose counter fell

    def names(self) -> list[str]:
        """Distinct sample names in order of first appearance."""
        return list(dict.fromkeys(s.name for s in self.samples))

    def type_of(self, name: str) -> str:
        """The declared TYPE of a sample name's family; "untyped" when none was declared."""
        if name in self.types:
            return self.types[name]
        for suffix in _SUFFIXES:
            if name.endswith(suffix) and name[:-len(suffix)] in self.types:
                return self.types[name[:-len(suffix)]]
        return "untyped"

    def select(self, name: str | re.Pattern[str], labels: Labels | None = None) -> list[Sample]:
        """Samples whose name fully matches the regex and whose labels match the filters."""
        pattern = re.compile(name) if isinstance(name, str) else name
        return [s for s in self.samples if pattern.fullmatch(s.name) and _matches(s, labels)]

    def sum(self, name: str | re.Pattern[str], labels: Labels | None = None) -> float | None:
        """The sum of the selected samples; None when nothing matches (not 0)."""
        chosen = self.select(name, labels)
        return add_up([s.value for s in chosen]) if chosen else None

    def delta(self, before: MetricSet) -> MetricSet:
        """Per series: self minus before; new series count from 0, reset counters from 0."""
        # A counter that fell was restarted: its delta is its new value, as PromQL's increase()
        # takes it, and the series is listed in ``resets`` so a report can say so.
        old = {s.key: s.value for s in before.samples}
        out, resets = [], []
        for s in self.samples:
            prev = old.get(s.key, 0.0)
            value = s.value - prev
            if value < 0 and self._is_counter(s.name):
                value = s.value
                resets.append(s.key)
            out.append(Sample(name=s.name, labels=s.labels, value=value))
        return MetricSet(samples=out, types=dict(self.types), help=dict(self.help),
                         resets=resets)

    def _is_counter(self, name: str) -> bool:
        kind = self.type_of(name)
        if kind == "counter":
            return True
        if kind in ("histogram", "summary", "gaugehistogram"):
            return name.endswith(("_bucket", "_count", "_sum"))
        return kind in ("untyped", "unknown") and name.endswith("_total")


def _labels(line: str, pos: int, n: int) -> tuple[dict[str, str], int]:
    """Parse ``{a="x",...}`` starting just after the brace; return labels and the end index."""
    labels: dict[str, str] = {}
    while True:
        close = _CLOSE.match(line, pos)
        if close:
            return labels, close.end()
        m = _LABEL_NAME.match(line, pos)
        if not m:
            raise MetricsParseError(n, f"expected a label name or '}}' at column {pos + 1}")
        name, pos = m.group(1), m.end()
        chars = []
        while True:
            if pos >= len(line):
                raise MetricsParseError(n, f"label {name}: value has no closing quote")
            c = line[pos]
            if c == '"':
                pos += 1
                break
            if c == "\\":
                nxt = line[pos + 1:pos + 2]
                if nxt not in _ESCAPES:
                    raise MetricsParseError(n, f"label {name}: invalid escape '\\{nxt}'")
                chars.append(_ESCAPES[nxt])
                pos += 2
                continue
            chars.append(c)
            pos += 1
        if name in labels:
            raise MetricsParseError(n, f"label {name} given twice")
        labels[name] = "".join(chars)
        sep = _SEP.match(line, pos)
        if not sep:
            raise MetricsParseError(n, f"label {name}: expected ',' or '}}' after the value")
        pos = sep.end()
        if sep.group(1) == "}":
            return labels, pos


def _sample(line: str, n: int) -> Sample:
    m = _NAME.match(line)
    if not m:
        raise MetricsParseError(n, f"not a metric name: {line[:60]!r}")
    name, pos = m.group(), m.end()
    labels: dict[str, str] = {}
    brace = _BRACE.match(line, pos)
    if brace:
        labels, pos = _labels(line, brace.end(), n)
    rest = line[pos:]
    if rest[:1] not in (" ", "\t"):
        raise MetricsParseError(n, f"{name}: expected a space and a value after the series")
    fields = _BLANKS.split(rest.strip(" \t"))
    if not 1 <= len(fields) <= 2:
        raise MetricsParseError(n, f"{name}: expected a value and an optional timestamp, "
                                   f"got {rest.strip()[:60]!r}")
    if not _VALUE.fullmatch(fields[0]):
        raise MetricsParseError(n, f"{name}: {fields[0][:40]!r} is not a number")
    timestamp = None
    if len(fields) == 2:
        if not _TIMESTAMP.fullmatch(fields[1]) or not -2**63 <= int(fields[1]) < 2**63:
            raise MetricsParseError(n, f"{name}: timestamp {fields[1][:40]!r} is not an "
                                       f"integer in ms")
        timestamp = int(fields[1])
    return Sample(name=name, labels=labels, value=float(fields[0]), timestamp_ms=timestamp)


def _comment(line: str, n: int, metrics: MetricSet) -> None:
    parts = line[1:].strip(" \t").split(None, 2)
    if len(parts) < 2 or parts[0] not in ("HELP", "TYPE"):
        return  # a free comment
    keyword, name = parts[0], parts[1]
    if not _NAME.fullmatch(name):
        raise MetricsParseError(n, f"# {keyword}: {name[:60]!r} is not a metric name")
    text = parts[2] if len(parts) == 3 else ""
    if keyword == "TYPE":
        if text.strip() not in TYPES:
            raise MetricsParseError(n, f"# TYPE {name}: unknown type {text.strip()[:40]!r}")
        if name in metrics.types:
            raise MetricsParseError(n, f"# TYPE {name} given a second time")
        metrics.types[name] = text.strip()
    else:
        metrics.help[name] = re.sub(r"\\(\\|n)", lambda m: "\n" if m.group(1) == "n" else "\\",
                                    text)


def parse_metrics(text: str) -> MetricSet:
    """Parse a ``/metrics`` body; a malformed line raises MetricsParseError naming it."""
    metrics = MetricSet()
    seen: set[str] = set()
    for n, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r").strip(" \t")
        if not line:
            continue
        if line.startswith("#"):
            _comment(line, n, metrics)
            continue
        sample = _sample(line, n)
        if sample.key in seen:
            raise MetricsParseError(n, f"series {sample.key} appears twice")
        seen.add(sample.key)
        metrics.samples.append(sample)
    return metrics
