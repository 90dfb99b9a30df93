"""gates.proof.promtext: Prometheus text 0.0.4 and OpenMetrics 1.0 read through
prometheus_client's parsers, into kvgate's model: selection, sums, errors by line, the size limit
and the family filter. Deltas between two scrapes: test_pairing."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.openmetrics.exposition import ALLOWUTF8 as UTF8
from prometheus_client.openmetrics.exposition import UNDERSCORES
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from gates.proof import MetricSet, MetricsParseError, attribute, detect_engine, parse_metrics
from gates.proof.promtext import Sample, add_up

DATA = Path(__file__).parent / "data" / "metrics"

SPEC_EXAMPLE = r'''# HELP http_requests_total The total number of HTTP requests.
# TYPE http_requests_total counter
http_requests_total{method="post",code="200"} 1027 1395066363000
http_requests_total{method="post",code="400"}    3 1395066363000

# Escaping in label values:
MSDOS_LINE

# Minimalistic line:
metric_without_timestamp_and_labels 12.47

# A weird metric from before the epoch:
something_weird{problem="division by zero"} +Inf -3982045

# A histogram, which has a pretty complex representation in the text format:
# HELP http_request_duration_seconds A histogram of the request duration.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{le="0.05"} 24054
http_request_duration_seconds_bucket{le="+Inf"} 144320
http_request_duration_seconds_sum 53423
http_request_duration_seconds_count 144320
'''.replace("MSDOS_LINE", r'msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",'
                          r'error="Cannot find file:\n\"FILE.TXT\""} 1.458255915e9')


def test_the_format_documentation_example():
    m = parse_metrics(SPEC_EXAMPLE)
    assert len(m.samples) == 9
    first = m.samples[0]
    assert first == Sample(name="http_requests_total", labels={"method": "post", "code": "200"},
                           value=1027, timestamp_ms=1395066363000)
    assert m.types["http_requests_total"] == "counter"
    assert m.help["http_request_duration_seconds"] == "A histogram of the request duration."


def test_escaped_label_values_are_unescaped():
    (s,) = parse_metrics(SPEC_EXAMPLE).select("msdos_file_access_time_seconds")
    assert s.labels == {"path": "C:\\DIR\\FILE.TXT", "error": 'Cannot find file:\n"FILE.TXT"'}
    assert s.value == 1.458255915e9


def test_special_values_and_negative_timestamp():
    m = parse_metrics("a NaN\nb +Inf\nc -Inf\nd Inf\nsomething_weird +Inf -3982045\n")
    assert math.isnan(m.sum("a"))
    assert m.sum("b") == math.inf and m.sum("c") == -math.inf and m.sum("d") == math.inf
    assert m.select("something_weird")[0].timestamp_ms == -3982045
    assert parse_metrics("huge " + "9" * 400 + "\n").sum("huge") == math.inf  # as float() has it


def test_blank_lines_free_comments_crlf_and_trailing_comma():
    m = parse_metrics('\r\n# just a note\n#\nx{a="1",} 2\r\n   \n')
    assert m.samples == [Sample(name="x", labels={"a": "1"}, value=2)]


def test_help_unescapes_backslash_and_newline():
    m = parse_metrics("# HELP x line one\\nline \\\\two\nx 1\n")
    assert m.help["x"] == "line one\nline \\two"


def test_colons_in_names_as_vllm_uses_them():
    m = parse_metrics('vllm:prompt_tokens_total{engine="0",model_name="m"} 12.0\n')
    assert m.names() == ["vllm:prompt_tokens_total"]


@pytest.mark.parametrize("text, line, words", [
    ("ok 1\n9bad 1\n", 2, "not a metric name"),
    ('x{a="1" 2\n', 1, "labels not closed"),
    ('x{a="1} 2\n', 1, "labels not closed"),
    ('x{a="\\t"} 2\n', 1, "invalid escape"),
    ('x{a="1",a="2"} 2\n', 1, "duplicate label name"),
    ("x one\n", 1, "not a number"),
    ("x 1_000\n", 1, "not a number"),
    ("x 0x10\n", 1, "not a number"),
    ("x \u0663\n", 1, "not a number"),  # ARABIC-INDIC DIGIT THREE: float() takes it
    ("x 1\u30002\n", 1, "not a number"),  # an ideographic space is not a separator
    ("x 1 2 3\n", 1, "optional timestamp"),
    ("x 1 1.5\n", 1, "timestamp"),
    ("x\n", 1, "expected a space"),
    ("x 1\nx 2\n", 2, "appears twice"),
    ('x{b="1",a="2"} 1\nx{a="2", b="1"} 3\n', 2, "appears twice"),  # same series, other order
    ("\n\n# TYPE x countr\n", 3, "unknown type"),
    ("# TYPE x counter\n# TYPE x counter\n", 2, "second time"),
    ("# HELP 1x help\n", 1, "not a metric name"),
    ('x{1a="1"} 2\n', 1, "Invalid labels"),
    ("x 1 # {a=\"b\"} 2\n", 1, "optional timestamp"),  # exemplars are OpenMetrics only
    ("# TYPE x counter\nx 1\n<html><body>Bad Gateway</body></html>\n", 3, "not a metric name"),
    ('vllm:prompt_tokens_total{engine="0",model_na', 1, "labels not closed"),  # cut short
])
def test_malformed_lines_name_the_line(text, line, words):
    with pytest.raises(MetricsParseError, match=words) as caught:
        parse_metrics(text)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"line {line}:")


def test_select_by_name_regex_and_label_filters():
    m = parse_metrics('a_total{s="x",e="0"} 1\na_total{s="y",e="0"} 2\na{s="x"} 4\nb 8\n')
    assert [s.value for s in m.select("a_total")] == [1, 2]
    assert [s.value for s in m.select("a(?:_total)?", {"s": "x"})] == [1, 4]
    assert m.sum("a_total", {"s": re.compile("x|y")}) == 3
    # A label the series lacks matches as the empty string, as in PromQL.
    assert m.sum(".*", {"e": ""}) == 12
    assert m.sum("a_tot") is None  # full match, not a prefix
    assert m.sum("nothing") is None


def test_sums_of_infinities_do_not_raise():
    m = parse_metrics("a +Inf\nb -Inf\nc 1e308\nd 1e308\n")
    assert math.isnan(m.sum("a|b"))
    assert m.sum("c|d") == math.inf
    assert add_up([0.1] * 10) == 1.0  # exact, unlike sum()


def test_type_of_histogram_samples_and_undeclared_names():
    m = parse_metrics(SPEC_EXAMPLE)
    assert m.type_of("http_request_duration_seconds_bucket") == "histogram"
    assert m.type_of("metric_without_timestamp_and_labels") == "untyped"


def test_sample_key_is_promql_with_sorted_escaped_labels():
    s = Sample(name="x", labels={"b": 'q"', "a": "1"}, value=1)
    assert s.key == 'x{a="1",b="q\\""}'


@pytest.mark.parametrize("path", sorted(DATA.glob("*.prom")), ids=lambda p: p.name)
def test_every_recorded_style_metrics_file_parses(path):
    m = parse_metrics(path.read_text())
    assert m.samples
    # Every family declares its TYPE, as the engines' exporters do.
    assert all(m.type_of(s.name) != "untyped" for s in m.samples)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_raises_only_metrics_parse_error(text):
    try:
        result = parse_metrics(text)
    except MetricsParseError as exc:
        assert str(exc).startswith(f"line {exc.line}: ")
    else:
        assert isinstance(result, MetricSet)


LINE = st.one_of(
    st.from_regex(r'[a-z_:]{1,6}(\{([a-z]{1,3}="[^"\\\n]{0,4}",?){0,3}\})? -?[0-9.eE+-]{1,6}'
                  r'( -?[0-9]{1,4})?', fullmatch=True),
    st.from_regex(r"# (HELP|TYPE) [a-z_]{1,5} [a-z ]{0,9}", fullmatch=True),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=8))
def test_nearly_valid_lines_raise_only_metrics_parse_error(lines):
    try:
        result = parse_metrics("\n".join(lines))
    except MetricsParseError as exc:
        assert 1 <= exc.line <= len(lines)
    else:
        assert len(result.samples) <= len(lines)


# --- OpenMetrics 1.0 ---------------------------------------------------------------------

OPENMETRICS = '''# TYPE vllm:prompt_tokens counter
# HELP vllm:prompt_tokens Number of prefill tokens processed.
vllm:prompt_tokens_total{engine="0",model_name="m"} 65536.0
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 3.0
# TYPE vllm:time_to_first_token_seconds histogram
# UNIT vllm:time_to_first_token_seconds seconds
vllm:time_to_first_token_seconds_bucket{le="0.5"} 6.0
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 8.0 # {trace_id="a"} 0.7 1700000000.25
vllm:time_to_first_token_seconds_count 8.0
vllm:time_to_first_token_seconds_sum 3.5
vllm:time_to_first_token_seconds_created 1.7e+09
g_stamped 1.5 1700000000.123
# EOF
'''


def test_openmetrics_counters_keep_total_and_set_created_apart():
    m = parse_metrics(OPENMETRICS)
    assert m.names() == ["vllm:prompt_tokens_total", "vllm:num_requests_running",
                         "vllm:time_to_first_token_seconds_bucket",
                         "vllm:time_to_first_token_seconds_count",
                         "vllm:time_to_first_token_seconds_sum", "g_stamped"]
    assert m.sum("vllm:prompt_tokens_total") == 65536
    assert m.type_of("vllm:prompt_tokens_total") == "counter"
    assert m.help["vllm:prompt_tokens"] == "Number of prefill tokens processed."
    # _created are start times, not counts: kept, but where no select or sum reaches them.
    assert [(s.name, s.value) for s in m.created] == [
        ("vllm:prompt_tokens_created", 1.7e9), ("vllm:time_to_first_token_seconds_created", 1.7e9)]
    assert m.sum("vllm:prompt_tokens_.*") == 65536
    assert m.select(".*_created") == []


def test_openmetrics_gauge_histogram_exemplar_and_timestamps_in_seconds():
    m = parse_metrics(OPENMETRICS)
    assert m.type_of("vllm:num_requests_running") == "gauge"
    assert m.sum("vllm:num_requests_running") == 3
    assert [s.value for s in m.select("vllm:time_to_first_token_seconds_bucket")] == [6, 8]
    assert m.type_of("vllm:time_to_first_token_seconds_count") == "histogram"
    assert m.select("vllm:time_to_first_token_seconds_bucket")[1].timestamp_ms is None
    (g,) = m.select("g_stamped")
    assert (g.value, g.timestamp_ms) == (1.5, 1700000000123)
    assert m.type_of("g_stamped") == "untyped"


def test_the_content_type_chooses_the_format_before_the_text_does():
    om = "application/openmetrics-text; version=1.0.0; charset=utf-8"
    assert parse_metrics(OPENMETRICS, content_type=om).created
    # Said to be text 0.0.4, "# EOF" is a comment and _created an ordinary sample.
    text = parse_metrics("x_total 1\nx_created 5\n# EOF\n", "text/plain; version=0.0.4")
    assert text.names() == ["x_total", "x_created"] and not text.created
    with pytest.raises(MetricsParseError, match="Missing # EOF") as caught:
        parse_metrics("# TYPE x counter\nx_total 1\n", content_type=om)  # cut short
    assert caught.value.line == 2
    with pytest.raises(MetricsParseError, match="^line 1: Missing # EOF"):
        parse_metrics("", content_type=om)
    assert parse_metrics("").samples == []


def test_the_same_scrape_in_both_formats_gives_the_same_samples():
    registry = CollectorRegistry()
    tokens = Counter("vllm:prompt_tokens", "Prompt tokens.", ["model_name"], registry=registry)
    tokens.labels("m").inc(65536)
    Gauge("vllm:num_requests_running", "Running.", registry=registry).set(2)
    ttft = Histogram("vllm:time_to_first_token_seconds", "TTFT.", buckets=(0.5, 1.0),
                     registry=registry)
    for seconds in (0.2, 0.7, 3.0):
        ttft.observe(seconds)
    text = parse_metrics(generate_latest(registry).decode())
    om = parse_metrics(generate_openmetrics(registry, escaping=UTF8).decode())
    # prometheus_client writes _created as gauge families in 0.0.4, inside their family in
    # OpenMetrics; the counts are the same.
    assert [s for s in text.samples if not s.name.endswith("_created")] == om.samples
    assert {s.name for s in om.created} == {"vllm:prompt_tokens_created",
                                            "vllm:time_to_first_token_seconds_created"}
    assert om.sum("vllm:prompt_tokens_total", {"model_name": "m"}) == 65536
    assert om.sum("vllm:time_to_first_token_seconds_count") == 3


# What prometheus_client 0.26 serves a scraper that asks for OpenMetrics without
# "escaping=allow-utf-8": its sample lines turn ':' into '_', its TYPE lines do not
# (prometheus/client_python#1177), so the samples fall out of their family.
OPENMETRICS_COLON_BUG = """# HELP vllm:prompt_tokens Number of prefill tokens processed.
# TYPE vllm:prompt_tokens counter
vllm_prompt_tokens_total{model_name="m"} 3.0
vllm_prompt_tokens_created{model_name="m"} 1.7961161481454978e+09
# EOF
"""


def test_samples_orphaned_by_the_colon_escaping_bug_keep_their_names():
    m = parse_metrics(OPENMETRICS_COLON_BUG)
    # As exposed: an untyped "vllm_..." series (the adapters take "vllm[:_]"); its start time
    # is still kept apart from the counts.
    assert m.names() == ["vllm_prompt_tokens_total"]
    assert m.type_of("vllm_prompt_tokens_total") == "untyped"
    assert [s.name for s in m.created] == ["vllm_prompt_tokens_created"]
    assert detect_engine(m) == "vllm"


class _Replay:
    """A collector yielding families prometheus_client parsed, to write them as OpenMetrics."""

    def __init__(self, text: str):
        # 0.0.4 gives counters' start times as gauge families "x_created"; OpenMetrics has them
        # inside the counter's family and refuses them as families of their own.
        self.families = [f for f in text_string_to_metric_families(text)
                         if not (f.type == "gauge" and f.name.endswith("_created"))]

    def collect(self):
        return self.families


# prometheus_client exporters: the engines that answer an OpenMetrics Accept header.
PYTHON_EXPORTERS = sorted(p.name.removesuffix(".before.prom") for p in DATA.glob("*.before.prom")
                          if p.name.startswith(("vllm", "lmcache", "sglang")))


@pytest.mark.parametrize("escaping", [UTF8, UNDERSCORES])
@pytest.mark.parametrize("name", PYTHON_EXPORTERS)
def test_recorded_scrapes_served_as_openmetrics_attribute_the_same(name, escaping):
    # These exporters name counters "_total" in both formats, so an engine answering a
    # scraper's OpenMetrics Accept header must give the adapters the same numbers, even with
    # the colons prometheus_client's default escaping turns into "_" (see above).
    def both(when: str) -> tuple[MetricSet, MetricSet]:
        text = (DATA / f"{name}.{when}.prom").read_text()
        registry = CollectorRegistry()
        registry.register(_Replay(text))
        served = generate_openmetrics(registry, escaping=escaping).decode()
        return parse_metrics(text), parse_metrics(served, "application/openmetrics-text")

    try:
        (before, before_om), (after, after_om) = both("before"), both("after")
    except MetricsParseError as exc:
        # The bug also scatters a labelled histogram's orphaned series into families whose
        # names clash: refused, naming the line, rather than read wrong.
        assert escaping == UNDERSCORES and "Clashing name" in str(exc)
        return
    if escaping == UTF8:
        assert after_om.samples == [s for s in after.samples if not s.name.endswith("_created")]
    engine = detect_engine(after)
    assert detect_engine(after_om) == engine
    if engine is None:
        return
    got, want = attribute(engine, before_om, after_om), attribute(engine, before, after)
    # Only the names the report lists as matched show the escaping.
    assert got.model_dump(exclude={"matched"}) == want.model_dump(exclude={"matched"})
    assert escaping == UNDERSCORES or got == want


@pytest.mark.parametrize("text, line, family, words", [
    ("# TYPE c counter\nc_total 1\n\nc_created 1\n# EOF\n", 3, None, "blank line"),
    ("# TYPE c counter\nc_total 1\n# EOF\nc_total 2\n", 4, "c_total", "after # EOF"),
    ("# TYPE c counter\nc_total -1\n# EOF\n", 2, "c_total", "cannot be negative"),
    ("# TYPE c counter\nc_total five\n# EOF\n", 2, "c_total", "not a number"),
    ("# TYPE c counter\nc_total 1\nc_total 2\n# EOF\n", 3, None, "c_total appears twice"),
    ('# TYPE c counter\nc_total{a="1",b="2"} 1\nc_total{b="2",a="1"} 2\n# EOF\n', 3, None,
     "appears twice"),
    ("g 1 1e400\n# EOF\n", 1, "g", "timestamp"),
    ("# TYPE x untyped\nx 1\n# EOF\n", 1, "x", "Invalid TYPE"),
    # Whole-family checks run when the family closes: the error names it and its first line.
    ('a 1\n# TYPE h histogram\nh_bucket{le="1"} 1\nh_count 1\nh_sum 1\n# TYPE g gauge\n'
     'g 1\n# EOF\n', 2, "h", "+Inf bucket missing"),
    ("x_total 1\n# TYPE x counter\nx_total 2\n# EOF\n", 2, "x", "Clashing name"),
])
def test_malformed_openmetrics_names_the_line_and_family(text, line, family, words):
    with pytest.raises(MetricsParseError, match=re.escape(words)) as caught:
        parse_metrics(text, "application/openmetrics-text")
    assert (caught.value.line, caught.value.family) == (line, family)
    assert str(caught.value).startswith(f"line {line}: ")


def test_a_garbled_line_deep_in_a_recorded_scrape_is_named():
    lines = (DATA / "vllm.after.prom").read_text().splitlines()
    lines[40] = lines[40][:25] + "\u0663" + lines[40][25:]  # one byte flipped in transit
    with pytest.raises(MetricsParseError) as caught:
        parse_metrics("\n".join(lines))
    assert caught.value.line == 41


# --- properties ----------------------------------------------------------------------------

SERIES = st.dictionaries(
    st.tuples(st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,8}", fullmatch=True),
              st.frozensets(st.tuples(st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,4}", fullmatch=True),
                                      st.text(max_size=6)), max_size=3)),
    st.tuples(st.floats(allow_nan=True, allow_infinity=True),
              st.one_of(st.none(), st.integers(0, 10**15))),
    max_size=8)


def _render(series: dict, openmetrics: bool) -> tuple[str, list[Sample]]:
    lines, expected = [], []
    for (name, labels), (value, ms) in sorted(series.items(), key=lambda kv: kv[0][0]):
        labels = dict(labels)  # a label name given twice keeps one value
        sample = Sample(name=name, labels=labels, value=value, timestamp_ms=ms)
        inner = sample.key[len(name):]
        stamp = "" if ms is None else f" {ms // 1000}.{ms % 1000:03d}" if openmetrics else f" {ms}"
        lines.append(f"{name}{inner} {value!r}{stamp}")
        expected.append(sample)
    return "\n".join(lines + (["# EOF"] if openmetrics else [])) + "\n", expected


def _same(got: Sample, want: Sample) -> bool:
    both_nan = math.isnan(got.value) and math.isnan(want.value)
    return got.model_copy(update={"value": 0}) == want.model_copy(update={"value": 0}) and (
        both_nan or got.value == want.value)


@settings(max_examples=200, deadline=None)
@given(SERIES, st.booleans())
def test_generated_samples_round_trip_in_both_formats(series, openmetrics):
    text, expected = _render(series, openmetrics)
    got = parse_metrics(text).samples
    assert len(got) == len(expected) and all(map(_same, got, expected))


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from([None, "application/openmetrics-text", "text/plain"]))
def test_arbitrary_openmetrics_raises_only_metrics_parse_error(text, content_type):
    try:
        parse_metrics(text + "\n# EOF\n", content_type)
    except MetricsParseError as exc:
        assert str(exc).startswith(f"line {exc.line}: ") and exc.line >= 1


OM_LINE = st.one_of(
    st.from_regex(r'[a-z_]{1,6}(_total|_created|_bucket|_count|_sum)?(\{([a-z]{1,3}="[^"\\\n]{0,4}"'
                  r',?){0,3}\})? -?[0-9.eE+-]{1,6}( -?[0-9.]{1,6})?( # \{[a-z]="[a-z]"\} 1)?',
                  fullmatch=True),
    st.from_regex(r"# (HELP|TYPE|UNIT) [a-z_]{1,5} (counter|gauge|histogram|summary|info|"
                  r"stateset|unknown|[a-z ]{0,9})", fullmatch=True),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(OM_LINE, max_size=8))
def test_nearly_valid_openmetrics_raises_only_metrics_parse_error(lines):
    try:
        result = parse_metrics("\n".join([*lines, "# EOF"]))
    except MetricsParseError as exc:
        assert 1 <= exc.line <= len(lines) + 1
    else:
        assert len(result.samples) + len(result.created) <= len(lines)


# --- the family filter and the size limit (issue #25 item 8) ------------------------------------

def test_the_filter_keeps_the_wanted_families_and_still_checks_every_line():
    text = "# HELP a_total A.\n# TYPE a_total counter\na_total 1\n# TYPE b gauge\nb 2\n"
    m = parse_metrics(text, keep=lambda name: name.startswith("a"))
    assert m.names() == ["a_total"] and m.types == {"a_total": "counter"}
    assert m.help == {"a_total": "A."}
    with pytest.raises(MetricsParseError, match="labels not closed") as caught:
        parse_metrics(text + 'b{x="1" 2\n', keep=lambda name: name.startswith("a"))
    assert caught.value.line == 6


def test_the_filter_streams_lines_and_reads_openmetrics_when_told():
    import io

    lines = io.StringIO(OPENMETRICS)
    m = parse_metrics(lines, openmetrics=True, keep=lambda name: "prompt_tokens" in name)
    assert m.names() == ["vllm:prompt_tokens_total"] and len(m.created) == 1


def test_an_exposition_over_the_limit_is_refused_naming_it():
    import io

    for text in ("x 1\n" * 10, io.StringIO("x 1\n" * 10)):
        with pytest.raises(MetricsParseError, match="larger than 0 MiB, the most kvgate reads"):
            parse_metrics(text, limit=20)


@pytest.mark.parametrize("before, after, engine", [
    ("vllm", "vllm", "vllm"), ("vllm-native", "vllm-native", "vllm-native"),
    ("lmcache-tp8", "lmcache-tp8-rank3-zero", "lmcache"), ("lmcache-mp", "lmcache-mp", "lmcache"),
    ("sglang-tp8", "sglang-tp8", "sglang"), ("dynamo-kvbm", "dynamo-kvbm", "dynamo-kvbm"),
    ("kvgate-sim", "kvgate-sim", "kvgate-sim"), ("llamacpp", "llamacpp", "llamacpp")])
def test_the_engines_families_alone_attribute_as_the_whole_scrape(before, after, engine):
    from gates.proof import families

    def read(name: str, keep=None) -> MetricSet:
        return parse_metrics((DATA / f"{name}.prom").read_text(), keep=keep)
    keep = families(engine)
    whole = attribute(engine, read(f"{before}.before"), read(f"{after}.after"))
    kept = attribute(engine, read(f"{before}.before", keep), read(f"{after}.after", keep))
    assert kept == whole
    assert len(read(f"{after}.after", keep).samples) <= len(read(f"{after}.after").samples)
