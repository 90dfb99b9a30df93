"""llama-server over HTTP: slot save/restore/erase, and streaming completions pinned to a slot.

Completions go through the load generator's own send() (its HTTP client, its stream class), so
TTFT, usage and every outcome and error text mean exactly what they mean elsewhere; their body
adds llama.cpp's ``id_slot``, ``cache_prompt`` and ``return_tokens`` (with ``verbose``, so each
streamed chunk carries its token ids under ``__verbose.tokens``). The slot actions and GET
/props are plain request-response calls over aiohttp.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from pydantic import BaseModel

from ...core.verdicts import RequestRecord
from ...loadgen import (
    Endpoint,
    LoadSettings,
    PlannedLike,
    Pool,
    ResponseStream,
    SSEProtocolError,
    payload,
    send,
)

SLOT_TIMEOUT = 300.0  # s; a restore of a long context from slow storage is still one request
# A slot answer is a line of JSON, /props a few kB (settings and the chat template): past this
# a server is not answering the question asked, and kvgate stops reading rather than hold it.
ANSWER_MAX = 1 << 20


class SlotError(Exception):
    """A slot action failed; the message names the URL and the server's answer."""


class SlotResult(BaseModel):
    """llama-server's answer to a slot action (fields absent for other actions stay None)."""

    id_slot: int
    filename: str = ""
    n_saved: int | None = None  # tokens written by save
    n_written: int | None = None  # bytes written by save
    n_restored: int | None = None  # tokens read by restore
    n_read: int | None = None  # bytes read by restore
    n_erased: int | None = None
    ms: float | None = None  # the server's own save/restore time (ms), for the record only


def parse_slot_result(text: str, url: str) -> SlotResult:
    """A slot action's JSON body; SlotError naming the URL when it is not one."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise SlotError(f"{url}: answer is not JSON: {text[:200]!r}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("id_slot"), int):
        raise SlotError(f"{url}: answer has no integer id_slot: {text[:200]!r}")
    timings = doc.get("timings") if isinstance(doc.get("timings"), dict) else {}
    ms = next((v for k, v in timings.items() if k.endswith("_ms")
               and isinstance(v, int | float)), None)
    known = {k: doc[k] for k in SlotResult.model_fields if k in doc and k != "ms"}
    try:
        return SlotResult(**known, ms=ms)
    except ValueError as exc:
        raise SlotError(f"{url}: unexpected slot answer {text[:200]!r}: {exc}") from None


async def read_answer(response: aiohttp.ClientResponse, what: str) -> str:
    """The body as text (undecodable bytes replaced: it is quoted, never parsed as numbers),
    SlotError naming the request once it passes ANSWER_MAX bytes."""
    raw = bytearray()
    async for part in response.content.iter_any():
        raw += part
        if len(raw) > ANSWER_MAX:
            raise SlotError(f"{what}: the answer is larger than {ANSWER_MAX:,} bytes, the most "
                            "kvgate reads of it: is this llama-server?")
    return raw.decode("utf-8", errors="replace")


async def slot_action(session: aiohttp.ClientSession, base: str, slot: int, action: str,
                      filename: str = "") -> SlotResult:
    """POST /slots/{slot}?action=save|restore|erase; SlotError on any failure."""
    url = f"{base.rstrip('/')}/slots/{slot}?action={action}"
    body = {"filename": filename} if filename else {}
    try:
        async with session.post(url, json=body,
                                timeout=aiohttp.ClientTimeout(total=SLOT_TIMEOUT)) as response:
            text = await read_answer(response, f"POST {url}")
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise SlotError(f"POST {url}: {exc!r}") from None
    if response.status != 200:
        raise SlotError(f"POST {url}: HTTP {response.status}: {text[:300]}")
    return parse_slot_result(text, url)


async def total_slots(session: aiohttp.ClientSession, base: str) -> int:
    """The server's parallel slots, from GET /props."""
    url = base.rstrip("/") + "/props"
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=30)) as response:
            doc = json.loads(await read_answer(response, f"GET {url}"))
    except (aiohttp.ClientError, TimeoutError, ValueError, RecursionError) as exc:
        raise SlotError(f"GET {url}: {exc!r}") from None
    slots = doc.get("total_slots") if isinstance(doc, dict) else None
    if not isinstance(slots, int) or slots < 1:
        raise SlotError(f"GET {url}: no total_slots in the answer")
    return slots


def chunk_token_ids(data: str) -> list[int]:
    """Token ids of one streamed chunk (``__verbose.tokens``), [] when it carries none."""
    if '"__verbose"' not in data:
        return []
    try:
        tokens = json.loads(data)["__verbose"].get("tokens", [])
    except (ValueError, KeyError, AttributeError, TypeError):
        raise SSEProtocolError(f"chunk with a malformed __verbose field: {data[:200]!r}") from None
    if not isinstance(tokens, list) or not all(type(t) is int and t >= 0 for t in tokens):
        raise SSEProtocolError(f"__verbose.tokens is not a list of token ids: {tokens!r:.100}")
    return tokens


class SlotStream(ResponseStream):
    """The load generator's accumulator, plus the token ids llama.cpp sends per chunk."""

    def _event(self, data: str, elapsed_ns: int) -> None:
        before = len(self.content_ns)
        super()._event(data, elapsed_ns)
        if len(self.content_ns) > before:  # the final chunk repeats every id: content only
            self.ids.extend(chunk_token_ids(data))


def slot_body(endpoint: Endpoint, request: PlannedLike, settings: LoadSettings, slot: int,
              cache_prompt: bool) -> dict[str, Any]:
    """The load generator's body, pinned to a slot, with llama.cpp's token-id extras."""
    return payload(endpoint, request, settings) | {
        "id_slot": slot, "cache_prompt": cache_prompt, "return_tokens": True, "verbose": True}


async def send_to_slot(pool: Pool, endpoint: Endpoint, request: PlannedLike,
                       settings: LoadSettings, origin_ns: int, *, slot: int, cache_prompt: bool,
                       t0_ns: int | None = None, queue: float = 0.0) -> RequestRecord:
    """Stream one completion on a slot; t0_ns (e.g. the restore's start) is when TTFT starts.

    The load generator's own send(), client and stream: the same timing, outcomes and error
    texts as every other probe; only the body (the slot) and the stream (token ids) differ.
    """
    body = json.dumps(slot_body(endpoint, request, settings, slot, cache_prompt)).encode()
    return await send(pool, endpoint, request, settings, origin_ns, queue, body, t0_ns=t0_ns,
                      stream_type=SlotStream)
