"""llama-server's HTTP answers, parsed from responses recorded from the real server."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gates.engines.llamacpp.http import (
    SlotError,
    SlotStream,
    chunk_token_ids,
    parse_slot_result,
    slot_body,
)
from gates.loadgen import Endpoint, LoadSettings, PlannedRequest, SSEProtocolError

DATA = __import__("pathlib").Path(__file__).parent / "data" / "llamacpp"
URL = "http://127.0.0.1:1/slots/0?action=x"


def stream(name):
    s = SlotStream(0)
    s.feed((DATA / name).read_bytes(), 1000)
    s.decoder.close()
    return s


def test_save_and_restore_answers_carry_tokens_and_bytes():
    save = parse_slot_result((DATA / "slot-save.json").read_text(), URL)
    restore = parse_slot_result((DATA / "slot-restore.json").read_text(), URL)
    erase = parse_slot_result((DATA / "slot-erase.json").read_text(), URL)
    assert (save.n_saved, save.n_written, save.filename) == (1024, 16793840, "ctx-0000.bin")
    assert (restore.n_restored, restore.n_read) == (1024, 16793840)
    assert restore.ms == pytest.approx(2.007)
    assert erase.n_erased == 1024 and erase.n_read is None


@pytest.mark.parametrize("text, why", [("not json", "not JSON"), ("[1]", "id_slot"),
                                       ('{"id_slot": "0"}', "id_slot"),
                                       ('{"id_slot": 0, "n_read": "many"}', "unexpected")])
def test_a_bad_slot_answer_names_the_url(text, why):
    with pytest.raises(SlotError, match=why) as info:
        parse_slot_result(text, URL)
    assert URL in str(info.value)


@given(st.text(max_size=200))
def test_any_slot_answer_parses_or_raises_slot_error(text):
    try:
        result = parse_slot_result(text, URL)
    except SlotError as exc:
        assert URL in str(exc)
        return
    assert isinstance(result.id_slot, int)


def test_a_restored_probe_streams_the_same_ids_as_a_recompute():
    restored, recomputed = stream("probe-stream.txt"), stream("recompute-stream.txt")
    assert restored.done and len(restored.content_ns) == 8
    assert restored.ids == recomputed.ids == [340, 3394, 3411, 1498, 3622, 3178, 2598, 2862]
    assert restored.usage.cached_tokens == 1024 and recomputed.usage.cached_tokens == 0
    assert stream("seed-stream.txt").ids == [2782]  # the final chunk's repeat is not counted


def test_chunk_token_ids():
    line = next(ln for ln in (DATA / "probe-stream.txt").read_text().splitlines()
                if ln.startswith("data: {"))
    assert chunk_token_ids(line.removeprefix("data: ")) == [340]
    assert chunk_token_ids('{"choices": []}') == []
    with pytest.raises(SSEProtocolError, match="token ids"):
        chunk_token_ids('{"__verbose": {"tokens": [-1]}}')
    with pytest.raises(SSEProtocolError, match="malformed"):
        chunk_token_ids('{"__verbose": [1]}')


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=10))
def test_any_verbose_field_gives_ids_or_a_protocol_error(value):
    try:
        ids = chunk_token_ids(json.dumps({"__verbose": value}))
    except SSEProtocolError:
        return
    assert all(isinstance(i, int) and i >= 0 for i in ids)


def test_slot_body_pins_the_request_to_a_slot():
    request = PlannedRequest(request_id="probe-ctx-0000", phase="probe", prompt=[5, 6],
                             max_tokens=4)
    body = slot_body(Endpoint(url="http://x", model="m"), request, LoadSettings(), 3, False)
    assert body["id_slot"] == 3 and body["cache_prompt"] is False
    assert body["return_tokens"] and body["verbose"] and body["prompt"] == [5, 6]
    assert body["temperature"] == 0.0 and body["stream"]
