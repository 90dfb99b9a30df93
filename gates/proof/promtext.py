"""Prometheus ``/metrics`` bodies as typed samples. Pure: no I/O (a stream of lines is read).

prometheus_client's parsers read the text format 0.0.4 and OpenMetrics 1.0 (ends with ``# EOF``);
ours are the model (Sample, MetricSet), errors naming the line, checks for what they misread, a
size limit, and a filter: families a reader does not want are checked line by line and dropped
before prometheus_client sees them, so a large exposition streams in bounded memory (bench/
parse_memory.py measures it)."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from traceback import walk_tb

from prometheus_client.openmetrics.parser import text_fd_to_metric_families as _openmetrics
from prometheus_client.parser import text_fd_to_metric_families as _text
from prometheus_client.parser import text_string_to_metric_families as _text_string
from pydantic import BaseModel, ConfigDict, Field

TYPES = {"counter", "gauge", "histogram", "summary", "untyped",
         "unknown", "info", "stateset", "gaugehistogram"}  # the last four: OpenMetrics
# Sample-name suffixes that belong to a family declared without them (histogram, summary).
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created", "_info", "_gcount", "_gsum")
Labels = Mapping[str, "str | re.Pattern[str]"]
# A name (empty when quoted inside the braces) and its {labels}, quotes respected.
_SERIES = re.compile(r'(?P<name>[^{ \t]*)(?:[ \t]*(?P<labels>\{(?:[^"}]|"(?:[^"\\]|\\.)*+")*+\}))?')
# From a quote through valid characters to an escape the formats do not have.
_BAD_ESCAPE = re.compile(r'"(?:[^"\\]|\\[\\"n])*(\\[^\\"n])')
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})
# ASCII only: prometheus_client takes int()/float() of a token, which read other scripts' digits.
_FLOAT = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_VALUE = re.compile(rf"{_FLOAT}|[+-]?(?:[Nn][Aa][Nn]|[Ii][Nn][Ff])", re.ASCII)
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# The most text one exposition may hold (characters, ~ bytes): engines serve well under 1 MiB
# (a DP-8 vLLM with every histogram: a few MiB); above this it is refused, naming the limit.
MAX_EXPOSITION = 64 * 2**20
# The most series one scrape may keep (those of the families a reader keeps, or all): an engine
# serves a few thousand; memory grows with the series kept (bench/parse_memory.py measures it).
MAX_SERIES = 100_000


class MetricsParseError(ValueError):
    """Text that is not a Prometheus exposition; names the line and, where known, the family."""

    def __init__(self, line: int, message: str, family: str | None = None):
        super().__init__(f"line {line}: " + (f"{family}: " if family else "") + message)
        self.line, self.family = line, family


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
        inner = ",".join(f'{k}="{v.translate(_ESCAPES)}"' for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{inner}}}" if inner else self.name


def add_up(values: list[float]) -> float:
    """Exact float sum; NaN where +Inf meets -Inf (math.fsum would raise)."""
    try:
        return math.fsum(values)
    except (ValueError, OverflowError):
        return sum(values, 0.0)


def _matches(sample: Sample, labels: Labels | None) -> bool:
    for name, want in (labels or {}).items():
        have = sample.labels.get(name, "")  # a label the sample lacks is "", as in PromQL
        if not (want.fullmatch(have) if isinstance(want, re.Pattern) else have == want):
            return False
    return True


class MetricSet(BaseModel):
    """Every sample of one scrape (or the families of it a filter kept), with HELP and TYPE."""

    samples: list[Sample] = Field(default_factory=list)
    types: dict[str, str] = Field(default_factory=dict)  # as declared, by the declared name
    help: dict[str, str] = Field(default_factory=dict)
    # OpenMetrics ``*_created`` samples (of counters, histograms, summaries, untyped): start times
    # (s since the epoch), not counts; apart from ``samples`` so no select, sum or delta sees them.
    created: list[Sample] = Field(default_factory=list)

    def names(self) -> list[str]:
        """Distinct sample names in order of first appearance."""
        return list(dict.fromkeys(s.name for s in self.samples))

    def type_of(self, name: str) -> str:
        """The declared TYPE of a sample name's family; "untyped" when none was declared."""
        for family in (name, *(name[:-len(x)] for x in _SUFFIXES if name.endswith(x))):
            if family in self.types:
                return self.types[family]
        return "untyped"

    def select(self, name: str | re.Pattern[str], labels: Labels | None = None) -> list[Sample]:
        """Samples whose name fully matches the regex and whose labels match the filters."""
        pattern = re.compile(name) if isinstance(name, str) else name
        return [s for s in self.samples if pattern.fullmatch(s.name) and _matches(s, labels)]

    def sum(self, name: str | re.Pattern[str], labels: Labels | None = None) -> float | None:
        """The sum of the selected samples; None when nothing matches (not 0)."""
        chosen = self.select(name, labels)
        return add_up([s.value for s in chosen]) if chosen else None


class _Lines:
    """The text as prometheus_client reads it, line by line: counted, checked, and filtered.

    Its parsers misread garbled text (measured, 0.26): "x 1 2 3" is 1 at time 3, "x \u0663" is 3,
    "\\t" stays in a label value, a second TYPE wins, an unknown type fails lines later. Lines
    of families ``keep`` refuses are checked here and never reach it (nor memory)."""

    def __init__(self, lines: Iterable[str], openmetrics: bool,
                 keep: Callable[[str], bool] | None, limit: int):
        self.lines, self.om, self.n, self.line, self.family = lines, openmetrics, 0, "", None
        self.keep, self.limit, self.size = keep or (lambda name: True), limit, 0
        self.types, self.samples = {}, []  # TYPE by name; (number, text) of each kept sample

    def __iter__(self) -> Iterator[str]:
        for n, raw in enumerate(self.lines, start=1):
            self.n, self.size = n, self.size + len(raw)
            if self.size > self.limit:
                raise self.error(f"the exposition is larger than {self.limit // 2**20} MiB, "
                                 "the most kvgate reads")
            self.line = raw.rstrip("\n") if self.om else raw.rstrip("\r\n").strip(" \t")
            parts, self.family = self.line.split(None, 3), None
            if parts[:1] == ["#"] and len(parts) > 2 and parts[1] in ("HELP", "TYPE", "UNIT"):
                name, kind = parts[2], parts[3].strip() if len(parts) > 3 else ""
                self.family = name if _NAME.fullmatch(name) else None
                if not (self.family or name.startswith('"')):  # quoted: a UTF-8 name, theirs
                    raise self.error(f"{name[:60]!r} is not a metric name")
                if self.family and not self.keep(name):
                    continue
                if parts[1] == "TYPE" and self.family:
                    if kind not in TYPES or name in self.types:
                        raise self.error("TYPE given a second time" if kind in TYPES
                                         else f"unknown type {kind[:40]!r}")
                    self.types[name] = kind
            elif self.line and not self.line.startswith("#"):
                self._sample(self.line)
                if self.family and not self.keep(self.family):
                    continue
                self.samples.append((n, self.line))
                if len(self.samples) > MAX_SERIES:
                    raise self.error(f"more than {MAX_SERIES:,} series in the families kept, "
                                     "the most kvgate reads from one scrape")
            yield raw

    def error(self, message: str) -> MetricsParseError:
        return MetricsParseError(max(self.n, 1), message, self.family)  # "" has a line 1 too

    def _sample(self, line: str) -> None:
        series = _SERIES.match(line)
        name, rest = series.group("name"), line[series.end():]
        self.family = name if _NAME.fullmatch(name) else None
        if not (self.family or name == "" and series.group("labels")):  # "": quoted in {}
            raise self.error(f"{name[:60]!r} is not a metric name")
        if bad := _BAD_ESCAPE.search(series.group()):
            raise self.error(f"invalid escape {bad.group(1)!r} in a label value")
        fields = re.split(r"[ \t]+", rest.split(" # ", 1)[0] if self.om else rest)  # exemplar
        # "{" for a value: labels left open, or a native histogram (experimental; no form here).
        if rest[:1] not in (" ", "\t") or fields[1:2] == [""] or rest.lstrip(" \t")[:1] == "{":
            raise self.error("labels not closed: a quote or '}' is missing" if "{" in rest[:2]
                             else "expected a space and a value after the series")
        if len(fields := [f for f in fields if f]) > 2:
            raise self.error(f"expected a value and an optional timestamp, got {rest[:60]!r}")
        if not _VALUE.fullmatch(fields[0]):
            raise self.error(f"{fields[0][:40]!r} is not a number")
        stamp = fields[1] if len(fields) == 2 else "0"  # 0.0.4: integer ms; OpenMetrics: s
        good = re.fullmatch(_FLOAT if self.om else r"-?\d{1,19}", stamp, re.ASCII)
        if not good or not -2**63 <= (float(stamp) * 1000 if self.om else int(stamp)) < 2**63:
            unit = "seconds" if self.om else "integer milliseconds"
            raise self.error(f"timestamp {stamp[:40]!r} is not {unit} (in the int64 range)")

    def duplicate(self) -> MetricsParseError:
        """Where a series is given twice: prometheus_client keeps both, or (OpenMetrics) one."""
        seen: set[str] = set()
        for n, text in self.samples:
            try:
                (s,) = next(iter(_text_string(text))).samples
            except Exception:  # a line it cannot read alone names no series
                continue
            if (key := Sample(name=s.name, labels=s.labels, value=0).key) in seen:
                return MetricsParseError(n, f"series {key} appears twice")
            seen.add(key)
        return MetricsParseError(self.samples[-1][0], "a series appears twice")


def _number(value: float) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits; float("1" * 400) is inf too
        return math.inf if value > 0 else -math.inf


def is_openmetrics(tail: str, content_type: str | None = None) -> bool:
    """OpenMetrics if the content type says so, or (none given) the text ends with ``# EOF``."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind == "application/openmetrics-text" or kind != "text/plain" and \
        tail.rstrip("\n").rsplit("\n", 1)[-1] == "# EOF"


def parse_metrics(text: str | Iterable[str], content_type: str | None = None, *,
                  keep: Callable[[str], bool] | None = None, openmetrics: bool | None = None,
                  limit: int = MAX_EXPOSITION) -> MetricSet:
    """Parse a ``/metrics`` body (a string, or its lines as a stream) into a MetricSet.

    The format: ``openmetrics``, else content_type, else a final ``# EOF`` (a string only).
    ``keep(name)``: the families to keep (by sample or family name); the others are checked
    line by line and dropped. Text past ``limit`` characters is refused."""
    if isinstance(text, str):
        if len(text) > limit:
            raise MetricsParseError(1, f"the exposition is larger than {limit // 2**20} MiB, "
                                    "the most kvgate reads")
        om = is_openmetrics(text, content_type) if openmetrics is None else openmetrics
        text = io.StringIO(text)
    else:
        om = bool(openmetrics) if openmetrics is not None else is_openmetrics("", content_type)
    lines, out, parsed, start = _Lines(text, om, keep, limit), MetricSet(), 0, 1
    try:
        for f in (_openmetrics if om else _text)(lines):
            parsed += len(f.samples)
            _add(out, f, om, lines.types)  # as each family closes: no second copy is held
            start = lines.n  # the line that closed this family opened the next
    except (MetricsParseError, UnicodeDecodeError):  # ours, or the stream's: not a text file
        raise
    except Exception as exc:  # anything from inside prometheus_client: callers get ours only
        detail = (f"{exc} ({exc.__context__})" if exc.__context__ else str(exc))[:200]
        # Whole-family checks (buckets, clashing names) fail as it closes: say where it began.
        frames = [f for f, _ in walk_tb(exc.__traceback__) if f.f_code.co_name == "build_metric"]
        if frames:
            raise MetricsParseError(start, detail, frames[0].f_locals.get("name")) from None
        raise lines.error(detail or f"cannot parse {lines.line[:60]!r}") from None
    out.types = dict(lines.types)
    keys = [s.key for s in out.samples + out.created]
    if len(set(keys)) < len(keys) or parsed < len(lines.samples):
        raise lines.duplicate()
    return out


def _add(out: MetricSet, f, om: bool, types: dict[str, str]) -> None:
    # 0.0.4: prometheus_client names counter families without _total, samples with; undo.
    renamed = not om and f.type == "counter" and f.name in types
    declared = f.name + "_total" if f.type == "counter" and not (om or renamed) else f.name
    out.help.update({declared: f.documentation} if f.documentation else {})
    for s in f.samples:
        ms = None if s.timestamp is None else round(float(s.timestamp) * 1000)
        name = s.name[:-6] if renamed else s.name
        # Start times of counters, histograms, summaries, or orphaned (client_python#1177).
        created = om and name.endswith("_created") and f.type not in ("gauge", "stateset")
        (out.created if created else out.samples).append(Sample(
            name=name, labels=dict(s.labels), value=_number(s.value), timestamp_ms=ms))


def merge_targets(scrapes: list[tuple[str, MetricSet]], label: str) -> MetricSet:
    """Several scrape targets as one set, every series labelled with its target (label)."""
    if len(scrapes) == 1:
        return scrapes[0][1]
    # Two targets may serve one name and labels (two replicas): the target tells them apart,
    # so a delta never mixes one target's counter with another's.
    return MetricSet(
        samples=[x.model_copy(update={"labels": x.labels | {label: t}})
                 for t, m in scrapes for x in m.samples],
        created=[x.model_copy(update={"labels": x.labels | {label: t}})
                 for t, m in scrapes for x in m.created],
        types={k: v for _, m in scrapes for k, v in m.types.items()},
        help={k: v for _, m in scrapes for k, v in m.help.items()})
