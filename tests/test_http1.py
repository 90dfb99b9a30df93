"""The load generator's HTTP/1.1 response parser, on whole responses cut at any byte."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.loadgen.http1 import BadResponse, ResponseParser, ServerDisconnectedError, request_head

EVENTS = [b'data: {"choices": [{"index": 0, "text": "a"}]}\n\n', b"data: [DONE]\n\n"]


def chunked(parts, head=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            trailer=b""):
    framed = b"".join(f"{len(p):x};ext=1\r\n".encode() + p + b"\r\n" for p in parts)
    return head + framed + b"0\r\n" + trailer + b"\r\n"


def parse(data: bytes, cuts=()):
    """Feed data cut at the given offsets; the parser and the body pieces it handed on."""
    got = []
    parser = ResponseParser(lambda body, ns: got.append((body, ns)))
    edges = [0, *sorted(set(cuts)), len(data)]
    for i, (a, b) in enumerate(zip(edges, edges[1:], strict=False)):
        if a < b:
            parser.feed(data[a:b], i)
    return parser, got


RESPONSES = [
    chunked(EVENTS),
    chunked(EVENTS, trailer=b"X-Trailer: 1\r\n"),
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
    b"HTTP/1.1 100 Continue\r\n\r\n" + chunked(EVENTS),
    b"HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n",
]


@given(index=st.sampled_from(range(len(RESPONSES))), cuts=st.lists(st.integers(0, 400)))
def test_a_response_cut_anywhere_gives_the_same_body_and_status(index, cuts):
    data = RESPONSES[index]
    whole, whole_body = parse(data)
    parser, got = parse(data, [c for c in cuts if c < len(data)])
    assert parser.complete and whole.complete and parser.keep_alive
    assert parser.status == whole.status and parser.headers == whole.headers
    assert b"".join(b for b, _ in got) == b"".join(b for b, _ in whole_body)
    assert parser.received == len(data)


def test_a_chunked_body_loses_its_framing_and_is_handed_on_with_its_arrival_stamp():
    parser, got = parse(chunked(EVENTS))
    assert parser.status == 200 and parser.headers["transfer-encoding"] == "chunked"
    assert got == [(b"".join(EVENTS), 0)]  # one call per feed, stamped with that feed's time


def test_a_body_read_until_close_is_complete_only_when_the_connection_ends():
    parser, got = parse(b"HTTP/1.0 200 OK\r\n\r\nall of it")
    assert not parser.complete and got == [(b"all of it", 0)]
    parser.end()
    assert parser.complete and not parser.keep_alive


@pytest.mark.parametrize("head, keep", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", True),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", False),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: Keep-Alive, Close\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", False),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n", True),
])
def test_keep_alive_follows_the_version_and_connection_header(head, keep):
    assert parse(head)[0].keep_alive is keep


def test_bytes_after_the_end_of_a_response_spend_the_connection():
    parser, _ = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA")
    assert parser.complete and parser.trailing and not parser.keep_alive


@pytest.mark.parametrize("data, text", [  # llhttp's words, after "not an HTTP/1.1 response: "
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "Expected HTTP/"),
    (b"HTTP/1.1 2000 OK\r\n\r\n", "Invalid response status"),
    (b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "Unexpected space after start line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Invalid character in Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "Transfer-Encoding gzip: this"),
    (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\n\r\n", "Content-Encoding br"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "in chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc", "after chunk data"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 20000, "no complete response head in"),
])
def test_bytes_that_are_not_a_response_are_refused_saying_what(data, text):
    with pytest.raises(BadResponse, match=text):
        parse(data)


@given(st.binary(max_size=300), st.lists(st.integers(0, 300)))
def test_any_bytes_are_parsed_or_refused_never_anything_else(data, cuts):
    try:
        parser, _ = parse(data, [c for c in cuts if c < len(data)])
        parser.end()
    except (BadResponse, ServerDisconnectedError):
        return
    assert parser.complete and parser.status is not None


@pytest.mark.parametrize("cut", [0, 10, 60])
def test_a_connection_ending_mid_response_says_how_much_had_arrived(cut):
    parser, _ = parse(chunked(EVENTS)[:cut])
    with pytest.raises(ServerDisconnectedError) as info:
        parser.end()
    assert info.value.answered is (cut > 0)
    assert (f"after {cut} bytes" if cut else "before any byte of a response") in str(info.value)


def test_the_request_head_carries_host_length_and_the_callers_headers():
    head = request_head("POST", "/v1/completions", "127.0.0.1:8000",
                        {"Authorization": "Bearer k"}, 12)
    assert head.startswith(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n")
    assert b"\r\nAuthorization: Bearer k\r\n" in head
    assert head.endswith(b"\r\nContent-Length: 12\r\n\r\n")
