"""gates.inference.promtext: the Prometheus text format parser, selection, sums and deltas."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.inference import MetricSet, MetricsParseError, Sample, add_up, parse_metrics

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
    ('x{a="1" 2\n', 1, "expected ','"),
    ('x{a="1} 2\n', 1, "no closing quote"),
    ('x{a="\\t"} 2\n', 1, "invalid escape"),
    ('x{a="1",a="2"} 2\n', 1, "given twice"),
    ("x one\n", 1, "not a number"),
    ("x 1_000\n", 1, "not a number"),
    ("x 0x10\n", 1, "not a number"),
    ("x \u0663\n", 1, "not a number"),  # ARABIC-INDIC DIGIT THREE: float() takes it
    ("x 1\u30002\n", 1, "not a number"),  # an ideographic space is not a separator
    ("x 1 2 3\n", 1, "optional timestamp"),
    ("x 1 1.5\n", 1, "timestamp"),
    ("x\n", 1, "expected a space"),
    ("x 1\nx 2\n", 2, "appears twice"),
    ("\n\n# TYPE x countr\n", 3, "unknown type"),
    ("# TYPE x counter\n# TYPE x counter\n", 2, "second time"),
    ("# HELP 1x help\n", 1, "not a metric name"),
    ('x{1a="1"} 2\n', 1, "label name"),
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


def test_delta_subtracts_series_by_series():
    before = parse_metrics('# TYPE c counter\nc{k="1"} 10\nc{k="2"} 5\ng 7\n')
    after = parse_metrics('# TYPE c counter\nc{k="1"} 15\nc{k="2"} 5\nc{k="3"} 4\ng 3\n')
    d = after.delta(before)
    assert {s.key: s.value for s in d.samples} == {'c{k="1"}': 5, 'c{k="2"}': 0, 'c{k="3"}': 4,
                                                   "g": -4}
    assert d.resets == []


def test_a_counter_that_fell_was_reset_and_counts_from_zero():
    before = parse_metrics("# TYPE c counter\nc 100\nx_total 50\n# TYPE h histogram\nh_count 9\n")
    after = parse_metrics("# TYPE c counter\nc 30\nx_total 20\n# TYPE h histogram\nh_count 2\n")
    d = after.delta(before)
    assert {s.name: s.value for s in d.samples} == {"c": 30, "x_total": 20, "h_count": 2}
    assert d.resets == ["c", "x_total", "h_count"]


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
