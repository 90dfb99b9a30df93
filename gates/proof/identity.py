"""Which engine really answered: the server's own word, not the site file's `engine =`.

A record is labelled "simulated engine" when the server says it is kvgate's simulator (its
`X-KVGate-Simulator` header, or `kvgate_simulator` / `owned_by: "kvgate-simulator"` in
`GET /v1/models`, gates/sim/server.py), whatever the arm's configuration claims. Real engines
name themselves in `GET /v1/models` `owned_by` (vLLM: "vllm", vllm-project/vllm
vllm/entrypoints/openai/protocol.py ModelCard; SGLang: "sglang", sgl-project/sglang
python/sglang/srt/entrypoints/openai/protocol.py) and report their version at vLLM's
`GET /version` (vllm/entrypoints/serve/instrumentator/basic.py) or SGLang's
`GET /server_info` (python/sglang/srt/entrypoints/http_server.py); llama-server answers
`owned_by: "llamacpp"` (seen from the build kvgate installs). `identify` is pure; the
HTTP edge asks each once and never fails a run: an unanswered question is "unknown".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp
from pydantic import BaseModel

SIM_HEADER = "X-KVGate-Simulator"  # the simulator sets it on every response
SIM_OWNER = "kvgate-simulator"
VERSION_PATHS = {"vllm": "/version", "sglang": "/server_info"}
# A question is one small JSON answer: what a server sends past this, or after this long (a
# trickle never stalls a read), is not waited for; the identity is then "unknown", saying why.
ANSWER_MAX = 1 << 20
ANSWER_SECONDS = 10.0


UNKNOWN = "unknown"  # the engine of a server that did not say what it is


class ServerIdentity(BaseModel):
    """What a server said it is, and what said so."""

    engine: str = UNKNOWN  # "kvgate-sim", "vllm", "sglang", an owned_by value, or UNKNOWN
    version: str = ""
    simulated: bool = False
    evidence: str = ""

    @property
    def name(self) -> str:
        """Engine and version: "vllm 0.32.0"."""
        return f"{self.engine} {self.version}".strip()

    @property
    def known(self) -> bool:
        """The server said what it is."""
        return self.engine != UNKNOWN

    def describe(self) -> str:
        """One line for the record: "vllm 0.32.0 (GET /v1/models owned_by, GET /version)"."""
        return f"{self.name} ({self.evidence})" if self.evidence else self.name

    @staticmethod
    def name_of(described: str) -> str:
        """The name in a line ``describe`` wrote (records keep that line): "vllm 0.32.0"."""
        return described.split(" (", 1)[0].strip()


def identify(models: Any, headers: Mapping[str, str], version: Any = None) -> ServerIdentity:
    """The identity in a /v1/models body, its response headers and a version body."""
    cards = models.get("data") if isinstance(models, dict) else None
    card = cards[0] if isinstance(cards, list) and cards and isinstance(cards[0], dict) else {}
    owner = str(card.get("owned_by", "")) if card else ""
    if headers.get(SIM_HEADER) or card.get("kvgate_simulator") or owner == SIM_OWNER:
        said = f"{SIM_HEADER} header" if headers.get(SIM_HEADER) else "GET /v1/models"
        return ServerIdentity(engine="kvgate-sim", simulated=True, evidence=said)
    if not owner:
        return ServerIdentity(evidence="GET /v1/models named no owner")
    number = version.get("version") if isinstance(version, dict) else None
    return ServerIdentity(engine=owner, version=str(number) if number else "",
                          evidence="GET /v1/models owned_by"
                          + (f", GET {VERSION_PATHS[owner]}" if number else ""))


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[Any, Mapping[str, str], str]:
    """The JSON body (None if none), headers, and why there is no body ("" when there is)."""
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=ANSWER_SECONDS)) as r:
            if r.status != 200:
                return None, r.headers, f"GET {url}: HTTP {r.status}"
            raw = bytearray()
            async for part in r.content.iter_any():
                raw += part
                if len(raw) > ANSWER_MAX:
                    return None, r.headers, (f"GET {url}: more than {ANSWER_MAX:,} bytes, the "
                                             "most kvgate reads of it")
            return json.loads(raw), r.headers, ""
    except TimeoutError:
        return None, {}, f"GET {url}: not answered within {ANSWER_SECONDS:g} s"
    except (aiohttp.ClientError, ValueError, RecursionError) as exc:
        return None, {}, f"GET {url}: {type(exc).__name__}"


async def server_identity(url: str, api_key: str = "") -> ServerIdentity:
    """Ask a server what it is: GET /v1/models, then its version endpoint if it has one."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    async with aiohttp.ClientSession(headers=headers) as session:
        models, seen, why = await _get(session, url.rstrip("/") + "/v1/models")
        found = identify(models, seen)
        if why and not found.known:
            return found.model_copy(update={"evidence": why})
        if found.engine in VERSION_PATHS:
            version, _, _ = await _get(session, url.rstrip("/") + VERSION_PATHS[found.engine])
            found = identify(models, seen, version)
        return found
