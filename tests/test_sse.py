"""gates.loadgen.sse: the incremental SSE decoder and the OpenAI streaming-chunk classifier."""

import json

import pytest
from conftest import DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from gates.loadgen import SSEProtocolError
from gates.loadgen.chunks import DONE, StreamChunk, Usage, classify
from gates.loadgen.sse import SSEDecoder, SSEEvent

SSE = DATA / "sse"


def decode(raw: bytes, cuts: list[int] | None = None, **kw) -> tuple[list[SSEEvent], str]:
    """Events from raw fed whole (or cut at the given offsets), and what close() dropped."""
    decoder = SSEDecoder(**kw)
    bounds = [0, *sorted(cuts or []), len(raw)]
    events = [e for a, b in zip(bounds, bounds[1:], strict=False)
              for e in decoder.feed(raw[a:b])]
    events += decoder.close()
    return events, decoder.dropped


def chunks(raw: bytes) -> list[StreamChunk]:
    return [classify(e.data) for e in decode(raw)[0]]


def variants(raw: bytes) -> list[bytes]:
    """The same stream with each line ending the SSE spec allows."""
    lf = raw.replace(b"\r\n", b"\n")
    return [lf, lf.replace(b"\n", b"\r\n"), lf.replace(b"\n", b"\r")]


# ---- recorded-style streams ---------------------------------------------------------------

C, R, U, D, E, X = "content", "role", "usage", "done", "error", "other"
SAMPLES = {
    # file: (chunk kinds, text of all chunks, last usage, finish reason)
    "vllm_completions_usage.sse": (
        [C] * 5 + [U, D], " The quick brown fox jumps", Usage(8, 5, None), "length"),
    "vllm_completions_continuous_usage.sse": (
        [C] * 3 + [U, D], " The quick brown", Usage(8, 3, 0), "length"),
    "vllm_chat_reasoning.sse": (
        [R] + [C] * 12 + [U, D], "Okay, the user wants a greeting.\n\nHello! 👋",
        Usage(12, 12, None), "stop"),
    "vllm_chat_reasoning_content.sse": (
        [R] + [C] * 6 + [U, D], "Let me think.Paris.", Usage(20, 6, None), "stop"),
    "openai_chat_usage.sse": (
        [R] + [C] * 5 + [X, U, D], "The sky is blue.", Usage(1203, 5, 1152), "stop"),
    "openai_chat_tool_calls.sse": ([C] * 6 + [X, U, D], "", Usage(81, 15, 0), "tool_calls"),
    "vllm_error.sse": ([C, C, E, D], " The quick", None, None),
    "truncated.sse": ([C] * 3, " The quick brown", None, None),
    "proxy_crlf.sse": ([R, C, X, D], "Hi", None, "stop"),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
@pytest.mark.parametrize("ending", ["lf", "crlf", "cr"])
def test_samples(name, ending):
    kinds, text, usage, finish = SAMPLES[name]
    raw = variants((SSE / name).read_bytes())[["lf", "crlf", "cr"].index(ending)]
    got = chunks(raw)
    assert [c.kind for c in got] == kinds
    assert "".join(c.text for c in got) == text
    assert [c.usage for c in got if c.usage][-1:] == ([usage] if usage else [])
    assert [c.finish_reason for c in got if c.finish_reason][-1:] == ([finish] if finish else [])
    # Fed one byte at a time, the same events come out.
    assert decode(raw, list(range(len(raw))))[0] == decode(raw)[0]


def test_vllm_completions_token_ids_and_usage_only_final_chunk():
    got = chunks((SSE / "vllm_completions_usage.sse").read_bytes())
    assert [c.token_ids for c in got[:5]] == [[576], [3974], [13876], [38835], [34208]]
    assert got[5] == StreamChunk("usage", usage=Usage(8, 5, None))
    assert got[6] is DONE


def test_content_chunks_keep_usage():
    got = chunks((SSE / "vllm_completions_continuous_usage.sse").read_bytes())
    assert [c.usage.completion_tokens for c in got if c.is_content] == [1, 2, 3]


def test_role_only_first_chunk_is_not_content():
    first = chunks((SSE / "openai_chat_usage.sse").read_bytes())[0]
    assert first.kind == "role" and not first.is_content and first.text == ""


def test_tool_call_chunks_are_content():
    got = chunks((SSE / "openai_chat_tool_calls.sse").read_bytes())
    assert all(c.is_content for c in got[:6])  # the first one carries the role as well


def test_error_event():
    error = chunks((SSE / "vllm_error.sse").read_bytes())[2]
    assert error.kind == "error"
    assert error.error == ("The decoder prompt (length 40000) is longer than the maximum model "
                           "length of 32768. (BadRequestError, 400)")


def test_truncated_stream_drops_the_unterminated_event():
    events, dropped = decode((SSE / "truncated.sse").read_bytes())
    assert len(events) == 3 and all(classify(e.data).is_content for e in events)
    assert dropped.startswith("a line not ended: 'data: {\"id\":\"cmpl-")


def test_proxy_fields():
    events, _ = decode((SSE / "proxy_crlf.sse").read_bytes())
    assert [(e.event, e.id) for e in events] == [
        (None, "1"), ("message", "2"), (None, "2"), (None, "2")]


# ---- the decoder, field by field ----------------------------------------------------------

@pytest.mark.parametrize(("raw", "expected"), [
    (b"data: a\ndata: b\n\n", [SSEEvent("a\nb")]),
    (b"data: a\n\ndata: b\n\n", [SSEEvent("a"), SSEEvent("b")]),
    (b"data:\n\n", [SSEEvent("")]),  # an empty data line still makes an event
    (b"data\n\n", [SSEEvent("")]),  # a field without a colon has an empty value
    (b"data:x\n\n", [SSEEvent("x")]),
    (b"data:  two\n\n", [SSEEvent(" two")]),  # only one space is stripped
    (b"data: a:b: c\n\n", [SSEEvent("a:b: c")]),
    (b": comment\n\n", []),
    (b":\ndata: x\n: more\n\n", [SSEEvent("x")]),
    (b"event: ping\n\n", []),  # no data, no event
    (b"event: ping\n\ndata: x\n\n", [SSEEvent("x")]),  # the type does not outlive its event
    (b"event: update\ndata: x\n\n", [SSEEvent("x", "update")]),
    (b"event:\ndata: x\n\n", [SSEEvent("x")]),
    (b"id: 7\ndata: a\n\ndata: b\n\n", [SSEEvent("a", None, "7"), SSEEvent("b", None, "7")]),
    (b"id: 7\nid: 8\x00\ndata: a\n\n", [SSEEvent("a", None, "7")]),  # NUL: id ignored
    (b"retry: 10\nfoo: bar\ndata: x\n\n", [SSEEvent("x")]),
    (b"DATA: x\n\n", []),  # field names are case-sensitive
    (b"\xef\xbb\xbfdata: x\n\n", [SSEEvent("x")]),  # a leading BOM is stripped
    (b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n", []),  # only one: "\ufeffdata" is unknown
    (b"data: x\r\n\r\ndata: y\r\rdata: z\n\n", [SSEEvent(c) for c in "xyz"]),
    (b"data: x\n\r\n", [SSEEvent("x")]),
    ("data: Grüße 👋\n\n".encode(), [SSEEvent("Grüße 👋")]),
])
def test_fields(raw, expected):
    assert decode(raw)[0] == expected
    assert decode(raw, list(range(len(raw))))[0] == expected


def test_event_comes_out_with_the_bytes_that_end_it():
    # The load generator stamps an event when feed() returns it: never later than needed.
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\r") == [SSEEvent("a")]  # CR ends the blank line; no LF awaited
    assert decoder.feed(b"\ndata: b\r") == []  # that LF belonged to the CR
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("b")]


def test_utf8_split_across_feeds():
    raw = "data: 👋é\n\n".encode()
    decoder = SSEDecoder()
    out = [e for i in range(len(raw)) for e in decoder.feed(raw[i:i + 1])]
    assert out == [SSEEvent("👋é")]


@pytest.mark.parametrize(("raw", "at"), [
    (b"data: \xff\n\n", 6),
    (b"data: ok\n\ndata: \xc3(\n\n", 16),
    (b"data: \xed\xa0\x80\n\n", 6),  # an encoded surrogate
    (b"data: \xc0\xaf\n\n", 6),  # an overlong encoding
])
def test_invalid_utf8(raw, at):
    with pytest.raises(SSEProtocolError, match=f"invalid UTF-8 at byte {at}"):
        decode(raw)
    with pytest.raises(SSEProtocolError, match=f"invalid UTF-8 at byte {at}"):
        decode(raw, list(range(len(raw))))


def test_stream_ending_inside_a_character():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: ok\n\ndata: \xf0\x9f") == [SSEEvent("ok")]
    with pytest.raises(SSEProtocolError, match="invalid UTF-8 at byte 16"):
        decoder.close()


def test_a_failed_decoder_stays_failed():
    decoder = SSEDecoder()
    with pytest.raises(SSEProtocolError):
        decoder.feed(b"\xff")
    with pytest.raises(SSEProtocolError, match="no more input accepted: invalid UTF-8"):
        decoder.feed(b"data: x\n\n")


def test_line_limit():
    decoder = SSEDecoder(max_line=16)
    assert decoder.feed(b"data: 0123456789\n\n") == [SSEEvent("0123456789")]
    for _ in range(16):  # a line in small pieces, never ended
        decoder.feed(b"d")
    with pytest.raises(SSEProtocolError, match="a line longer than 16 characters"):
        decoder.feed(b"d")
    with pytest.raises(SSEProtocolError, match="a line longer than 16 characters"):
        SSEDecoder(max_line=16).feed(b"data: 01234567890\n\n")
    with pytest.raises(SSEProtocolError, match="a line longer than 16 characters"):
        SSEDecoder(max_line=16).feed(b"data: 0\ndata: 01234567890")
    with pytest.raises(SSEProtocolError, match="an event's data longer than 16 characters"):
        SSEDecoder(max_line=16).feed(b"data: 01234\n" * 3)
    with pytest.raises(ValueError, match="max_line"):
        SSEDecoder(max_line=0)


def test_default_limit_is_16_mib():
    decoder = SSEDecoder()
    assert decoder.max_line == 16 * 2**20
    decoder.feed(b"data: " + b"x" * (16 * 2**20 - 6))
    with pytest.raises(SSEProtocolError, match="longer than"):
        decoder.feed(b"x")


def test_close_drops_or_flushes_an_unterminated_event():
    raw = b"data: a\n\ndata: b\ndata: c\n"
    assert decode(raw) == ([SSEEvent("a")], "an event not ended by a blank line: 'b\\nc'")
    decoder = SSEDecoder()
    assert decoder.feed(raw) == [SSEEvent("a")]
    assert decoder.close(flush=True) == [SSEEvent("b\nc")]
    decoder = SSEDecoder()
    decoder.feed(b"data: [DONE]")  # the last line not even ended
    assert decoder.close(flush=True) == [SSEEvent("[DONE]")]
    assert decode(b"data: a\n\n") == ([SSEEvent("a")], "")
    assert decode(b"data: a\n\n: bye") == ([SSEEvent("a")], "a line not ended: ': bye'")


def test_after_close():
    decoder = SSEDecoder()
    decoder.close()
    assert decoder.close() == []
    with pytest.raises(SSEProtocolError, match="closed"):
        decoder.feed(b"data: x\n\n")


# ---- the decoder, properties --------------------------------------------------------------

def chars(exclude: str) -> st.SearchStrategy[str]:
    return st.characters(exclude_characters=exclude, exclude_categories=["Cs"])  # UTF-8 only


line_text = st.text(chars("\r\n"), max_size=30)
eol = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw) -> tuple[bytes, list[SSEEvent]]:
    """A valid stream in any of the spec's spellings, and the events it must decode to."""
    out: list[str] = []
    events, last_id = [], None

    def line(text: str) -> None:
        end = draw(eol)
        if text == "" and out and out[-1] == "\r" and end == "\n":
            end = "\r"  # CR then LF would be one line end, not a blank line
        out.extend([text, end])

    for _ in range(draw(st.integers(0, 6))):
        if draw(st.booleans()):
            line(":" + draw(line_text))
        if draw(st.booleans()):
            last_id = draw(st.text(chars("\r\n\x00"), max_size=5))
            line(f"id: {last_id}")
        event = draw(st.none() | st.text(chars("\r\n"), min_size=1, max_size=8))
        if event is not None:
            line(f"event: {event}")
        data = draw(st.lists(line_text, min_size=1, max_size=3))
        for value in data:
            bare = value[:1] != " " and draw(st.booleans())  # "data:x" spelled without space
            line(("data:" if bare else "data: ") + value)
        line("")
        events.append(SSEEvent("\n".join(data), event, last_id))
    return "".join(out).encode(), events


@settings(max_examples=200, deadline=None)
@given(streams(), st.lists(st.integers(0, 10**6), max_size=12))
def test_valid_stream_decodes_the_same_however_split(stream, cuts):
    raw, events = stream
    assert decode(raw) == (events, "")
    assert decode(raw, [c % (len(raw) + 1) for c in cuts]) == (events, "")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=10), st.booleans())
def test_arbitrary_bytes_raise_only_protocol_errors(raw, cuts, flush):
    decoder = SSEDecoder(max_line=64)
    bounds = [0, *sorted(c % (len(raw) + 1) for c in cuts), len(raw)]
    try:
        for a, b in zip(bounds, bounds[1:], strict=False):
            for event in decoder.feed(raw[a:b]):
                assert isinstance(event.data, str)
        decoder.close(flush=flush)
    except SSEProtocolError as exc:
        assert str(exc)


def test_samples_concatenated_split_the_same():
    raw = b"".join((SSE / name).read_bytes() for name in sorted(SAMPLES))
    whole = decode(raw.replace(b"\r\n", b"\n"))
    for step in (1, 3, 7, 64, 1000):
        cuts = list(range(step, len(raw), step))
        assert decode(raw.replace(b"\r\n", b"\n"), cuts) == whole


# ---- classify ------------------------------------------------------------------------------

def chunk(*choices, **top) -> str:
    return json.dumps({"choices": list(choices), **top})


@pytest.mark.parametrize(("data", "kind", "text"), [
    ("[DONE]", "done", ""),
    (" [DONE] ", "done", ""),
    (chunk({"index": 0, "text": "hi"}), "content", "hi"),
    (chunk({"index": 0, "text": ""}), "other", ""),
    (chunk({"delta": {"role": "assistant", "content": ""}}), "role", ""),
    (chunk({"delta": {"role": "assistant", "content": "Hi"}}), "content", "Hi"),
    (chunk({"delta": {"content": None, "tool_calls": []}}), "other", ""),  # vLLM's empty list
    (chunk({"delta": {"tool_calls": [{"index": 0}]}}), "content", ""),
    (chunk({"delta": {"reasoning_content": "hm"}}), "content", "hm"),
    (chunk({"delta": {"reasoning": "hm"}}), "content", "hm"),
    (chunk({"delta": {}, "finish_reason": "stop"}), "other", ""),
    (chunk(usage={"completion_tokens": 3}), "usage", ""),
    (chunk(usage=None), "other", ""),
    (json.dumps({"choices": None}), "other", ""),
    ("{}", "other", ""),
    (chunk({"text": "a"}, {"text": "b"}), "content", "ab"),
    (chunk({"delta": {"role": "assistant"}}, usage={"prompt_tokens": 1}), "role", ""),
    (chunk({"text": "x"}, error=None), "content", "x"),
])
def test_classify(data, kind, text):
    got = classify(data)
    assert (got.kind, got.text) == (kind, text)
    assert got.is_content == (kind == "content")


def test_classify_fields():
    got = classify(chunk({"index": 0, "text": " a", "token_ids": [5, 6], "finish_reason": "length"},
                         usage={"prompt_tokens": 9, "completion_tokens": 2,
                                "prompt_tokens_details": {"cached_tokens": 8}}))
    assert got == StreamChunk("content", " a", Usage(9, 2, 8), [5, 6], "length")
    assert classify(chunk(usage={"prompt_tokens_details": None})).usage == Usage()


@pytest.mark.parametrize(("data", "error"), [
    (json.dumps({"error": {"message": "boom", "type": "InternalServerError", "code": 500}}),
     "boom (InternalServerError, 500)"),
    (json.dumps({"error": {"message": "boom"}}), "boom"),
    (json.dumps({"error": "overloaded"}), "overloaded"),
    (json.dumps({"error": ""}), "(empty error message)"),
    (json.dumps({"error": {"code": 429}}), '{"code": 429} (429)'),
    (json.dumps({"error": 7}), "7"),
    (json.dumps({"object": "error", "message": "old vLLM", "type": "BadRequestError",
                 "param": None, "code": 400}), "old vLLM (BadRequestError, 400)"),
    (json.dumps({"error": {"message": "x"}, "choices": [{"text": "y"}]}), "x"),
])
def test_classify_errors(data, error):
    got = classify(data)
    assert (got.kind, got.error) == ("error", error)


@pytest.mark.parametrize(("data", "reason"), [
    ("", "not JSON"),
    ("data: {}", "not JSON"),
    ("{'a': 1}", "not JSON"),
    ("[" * 100_000, "not JSON"),
    ("9" * 5000, "not JSON"),  # past Python's int-string limit
    ("[1]", "JSON an array, not an object"),
    ('"[DONE]"', "JSON a string, not an object"),
    ("null", "JSON null, not an object"),
    ('{"choices": {}}', "choices is an object, not a list"),
    ('{"choices": [1]}', r"choices\[0\] is a number, not an object"),
    ('{"choices": [{"text": 5}]}', r"choices\[0\].text is a number, not a string"),
    ('{"choices": [{"delta": "x"}]}', r"choices\[0\].delta is a string, not an object"),
    ('{"choices": [{"delta": {"content": ["a"]}}]}',
     r"choices\[0\].delta.content is an array, not a string"),
    ('{"choices": [{"delta": {"role": 1}}]}', r"choices\[0\].delta.role is a number"),
    ('{"choices": [{"delta": {"tool_calls": {}}}]}', r"tool_calls is an object, not a list"),
    ('{"choices": [{"finish_reason": true}]}', r"finish_reason is a boolean, not a string"),
    ('{"choices": [{"text": "a"}, {"finish_reason": 1}]}', r"choices\[1\].finish_reason"),
    ('{"choices": [{"token_ids": [1, "a"]}]}', r"token_ids is not a list of token ids"),
    ('{"choices": [{"token_ids": [true]}]}', r"token_ids is not a list of token ids"),
    ('{"choices": [{"token_ids": 3}]}', r"token_ids is not a list of token ids"),
    ('{"usage": []}', "usage is an array, not an object"),
    ('{"usage": {"completion_tokens": -1}}', "usage.completion_tokens is -1, not a token count"),
    ('{"usage": {"completion_tokens": true}}', "usage.completion_tokens is true"),
    ('{"usage": {"prompt_tokens": 1.5}}', "usage.prompt_tokens is 1.5"),
    ('{"usage": {"prompt_tokens_details": 3}}', "prompt_tokens_details is a number"),
    ('{"usage": {"prompt_tokens_details": {"cached_tokens": "8"}}}',
     "usage.prompt_tokens_details.cached_tokens is"),
])
def test_classify_rejects(data, reason):
    with pytest.raises(SSEProtocolError, match=reason):
        classify(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)
# Dictionaries built from the names classify looks at, so the search reaches the deep paths.
keys = st.sampled_from(["choices", "delta", "text", "content", "reasoning", "reasoning_content",
                        "role", "tool_calls", "usage", "prompt_tokens", "completion_tokens",
                        "prompt_tokens_details", "cached_tokens", "token_ids", "finish_reason",
                        "error", "message", "type", "code", "object"])
openai_like = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3) | st.just("error"),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=5),
    max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(json_values | openai_like)
def test_classify_raises_only_protocol_errors(value):
    try:
        got = classify(json.dumps(value))
    except SSEProtocolError as exc:
        assert str(exc)
    else:
        assert got.kind in ("content", "role", "usage", "done", "error", "other")
        assert isinstance(got.text, str)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=50))
def test_classify_arbitrary_text(text):
    try:
        got = classify(text)
    except SSEProtocolError as exc:
        assert str(exc)
    else:
        assert got.kind in ("done", "other", "usage", "error")  # "1", "{}", "[DONE]"...
