"""vLLM's output detail for correctness: return_token_ids and logprobs, asked and read back."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.core.verdicts import RequestOutcome
from gates.loadgen import (
    Endpoint,
    LoadSettings,
    ResponseStream,
    SSEProtocolError,
    payload,
)
from gates.loadgen.chunks import classify
from gates.loadgen.generator import request_record

# One streamed chunk as vLLM 0.32.0's completion server writes it with return_token_ids and
# logprobs = 1 (vllm/entrypoints/openai/completion/serving.py), captured from the CPU build.
CHUNK = {"id": "cmpl-9d70dbb57df33002", "object": "text_completion", "created": 1796122680,
         "model": "tiny-llama", "choices": [{"index": 0, "text": " t8083", "logprobs": {
             "text_offset": [0], "token_logprobs": [-7.319583892822266], "tokens": ["t8083"],
             "top_logprobs": [{"t8083": -7.319583892822266}]}, "finish_reason": None,
             "stop_reason": None, "token_ids": [8083]}]}


class Planned:
    request_id, phase, prompt, max_tokens = "probe-ctx-0000", "probe", [5, 6, 7], 4


def test_the_body_asks_for_ids_and_logprobs_only_when_told():
    endpoint = Endpoint(url="http://127.0.0.1:1", model="m")
    plain = payload(endpoint, Planned(), LoadSettings())
    assert "return_token_ids" not in plain and "logprobs" not in plain
    asked = payload(endpoint, Planned(), LoadSettings(output_detail=True))
    # The top 2 by token id, not logprobs = 1: the near-tie rule reads recompute's runner-up
    # (#43; tests/test_top_logprobs.py).
    assert asked["return_token_ids"] is True and asked["logprobs"] == 2


def test_a_chunk_s_token_ids_and_logprobs_reach_the_record():
    chunk = classify(json.dumps(CHUNK))
    assert chunk.token_ids == [8083] and chunk.logprobs == [-7.319583892822266]
    stream = ResponseStream()
    for n in range(2):
        stream.feed(f"data: {json.dumps(CHUNK)}\n\n".encode(), 1000 * (n + 1))
    record = request_record(Planned(), Endpoint(url="http://127.0.0.1:1"), 0.0, 0.0, stream,
                            RequestOutcome.OK)
    assert record.output_ids == [8083, 8083]
    assert record.output_logprobs == [-7.319583892822266] * 2


@pytest.mark.parametrize("bad", [[0.5], ["x"], [float("nan")], "-1.0", [None]])
def test_logprobs_that_are_not_logprobs_are_a_protocol_error(bad):
    doc = json.loads(json.dumps(CHUNK))
    doc["choices"][0]["logprobs"]["token_logprobs"] = bad
    with pytest.raises(SSEProtocolError, match="token_logprobs is not a list of logprobs"):
        classify(json.dumps(doc))


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.floats()),
                 st.dictionaries(st.text(), st.lists(st.floats(max_value=0)))))
def test_any_logprobs_value_is_read_or_refused_never_an_exception(value):
    doc = json.loads(json.dumps(CHUNK))
    doc["choices"][0]["logprobs"] = value
    try:
        chunk = classify(json.dumps(doc))
    except SSEProtocolError:
        return
    assert chunk.logprobs is None or all(x <= 0 for x in chunk.logprobs)
