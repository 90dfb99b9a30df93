"""The simulator's wire format: request models and parsing, JSON bodies and SSE framing.

See _sim_server for the extensions to OpenAI's format (token_ids, sim_due_ns, sim_sent_ns).
"""

from __future__ import annotations

import contextlib
import json
import time

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from .engine import Engine, Prefilled
from .logprobs import MAX_LOGPROBS, completion_logprobs, output_top_logprobs
from .model import chat_ids, fault_hits, text_ids, token_text

RECEIVED = web.RequestKey("sim_recv_ns", int)


class _StreamOptions(BaseModel):
    include_usage: bool = False


class _Common(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature, seed...: accepted, ignored

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: _StreamOptions | None = None
    ignore_eos: bool = True  # always effectively true: the simulator has no EOS
    n: int = Field(default=1, ge=1, le=1)


class _CompletionRequest(_Common):
    prompt: str | list[int]
    # vLLM's CompletionRequest (gates.sim.logprobs): the top-k per token, and its keys by id.
    logprobs: int | None = Field(default=None, ge=0, le=MAX_LOGPROBS)
    return_tokens_as_token_ids: bool | None = None


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict] | None = None


class _ChatRequest(_Common):
    messages: list[_Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


def error_response(status: int, message: str, kind: str) -> web.Response:
    """An OpenAI-style error body with the given HTTP status."""
    return web.json_response({"error": {"message": message, "type": kind, "code": status}},
                             status=status)


def _content(m: _Message) -> str:
    if isinstance(m.content, list):  # [{"type": "text", "text": ...}, ...]
        return "".join(str(part.get("text", "")) for part in m.content)
    return m.content or ""


def parse_request(body: dict, chat: bool) -> tuple[list[int], int, _Common]:
    """Token ids, max_tokens and the parsed request; ValueError for a bad request."""
    if chat:
        req = _ChatRequest.model_validate(body)
        ids = chat_ids((m.role, _content(m)) for m in req.messages)
        max_tokens = req.max_completion_tokens or req.max_tokens or 16
    else:
        req = _CompletionRequest.model_validate(body)
        ids = text_ids(req.prompt) if isinstance(req.prompt, str) else req.prompt
        max_tokens = req.max_tokens or 16
    if not ids:
        raise ValueError("the prompt is empty")
    if any(not 0 <= t < 2**32 for t in ids):
        raise ValueError("token ids must be integers in [0, 2**32)")
    return ids, max_tokens, req


def _abort(request: web.Request) -> None:
    if request.transport is not None:  # None: the client has already gone
        request.transport.abort()


def _usage(prompt_tokens: int, completion_tokens: int, pre: Prefilled) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": pre.gpu_tokens + pre.cpu_tokens
                                                     + pre.storage_tokens}}


async def respond(request: web.Request, engine: Engine, n: int, req: _Common, chat: bool,
                  prompt_tokens: int, pre: Prefilled, out: list[int]) -> web.StreamResponse:
    """Pace out the tokens as one JSON body or an SSE stream, applying stall and drop faults."""
    f = engine.faults
    stall_at = f.stall_after_tokens if fault_hits(n, f.stall_every) else None
    drop_at = min(f.drop_after_tokens, len(out)) if fault_hits(n, f.drop_every) else None
    base = {"id": f"{'chatcmpl' if chat else 'cmpl'}-sim-{n}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()), "model": engine.profile.model_id,
            "sim_recv_ns": request[RECEIVED]}
    k = None if chat else req.logprobs  # chat's logprobs are not simulated: null, as asked
    tops = output_top_logprobs(out, k, engine.profile.vocab_size) if k is not None else None
    as_ids = bool(getattr(req, "return_tokens_as_token_ids", False))
    if not req.stream:
        async with contextlib.aclosing(engine.paced(len(out), stall_at, f.stall_s)) as ticks:
            async for _ in ticks:
                engine.counters.generation_tokens += 1
        if drop_at is not None:
            _abort(request)  # no response at all
            return web.Response()
        text = "".join(token_text(t) for t in out)
        choice = ({"index": 0, "message": {"role": "assistant", "content": text}} if chat
                  else {"index": 0, "text": text, "logprobs": None if tops is None else
                  completion_logprobs(out, tops, as_ids)})
        choice |= {"token_ids": out, "finish_reason": "length"}
        body = base | {"object": "chat.completion" if chat else "text_completion",
                       "choices": [choice], "usage": _usage(prompt_tokens, len(out), pre)}
        return web.json_response(body | {"sim_sent_ns": time.perf_counter_ns()})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                       "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(event: dict | str) -> None:
        if isinstance(event, dict):  # stamped just before the write, for timing fidelity
            event = json.dumps(event | {"sim_sent_ns": time.perf_counter_ns()})
        await resp.write(f"data: {event}\n\n".encode())

    try:
        if chat:  # vLLM's role-only first chunk: no content yet
            await send(base | {"choices": [{"index": 0, "delta": {"role": "assistant",
                                                                  "content": ""},
                                            "logprobs": None, "finish_reason": None}]})
        offset = 0  # vLLM's text_offset: the characters sent before this token
        async with contextlib.aclosing(engine.paced(len(out), stall_at, f.stall_s)) as ticks:
            async for i, due in ticks:
                if i == drop_at:
                    break
                text = token_text(out[i])
                choice = {"index": 0, "delta": {"content": text}} if chat else {
                    "index": 0, "text": text}
                choice |= {"token_ids": [out[i]], "logprobs": None if tops is None else
                           completion_logprobs([out[i]], [tops[i]], as_ids, offset),
                           "finish_reason": "length" if i == len(out) - 1 else None}
                offset += len(text)
                await send(base | {"choices": [choice], "sim_due_ns": due})
                engine.counters.generation_tokens += 1
        if drop_at is not None:
            _abort(request)  # mid-stream, without [DONE]
            return resp
        if req.stream_options and req.stream_options.include_usage:
            await send(base | {"choices": [], "usage": _usage(prompt_tokens, len(out), pre)})
        await send("[DONE]")
    except ConnectionError:  # the client went away; nothing to tell it
        pass
    return resp
