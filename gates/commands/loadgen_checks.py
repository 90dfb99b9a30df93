"""What `kvgate loadgen` is given, checked: its arguments, the server's model list, the errors.

Each refusal is one line naming what was wrong and where, so a run never starts on a guess.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from urllib.parse import urlsplit

import aiohttp

from ..core.verdicts import RequestRecord
from ..inference import ColdRecovery, PhaseError
from ..loadgen import LoadSettings

MODELS_MAX = 1 << 20  # bytes of GET /v1/models read at most: a hostile server may not stop
# Seconds the whole model lookup may take without --request-timeout (at least --stall-timeout):
# a server that trickles a byte a second never stalls, and would hold the run forever.
LOOKUP_MAX_S = 60.0
SHOWN_ERRORS = 5  # distinct request errors listed under the failure count


def base_url(text: str) -> str:
    """Parse --url: an http(s) base URL with a host, refused before anything is sent."""
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 -- raises ValueError on a port that is not a number
    except ValueError:
        parts = None
    if not parts or parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(f"{text!r} is not a base URL like "
                                         "http://127.0.0.1:8000")
    return text


def error_rate(text: str) -> Fraction:
    """Parse --max-error-rate: a fraction in 0..1 ("0.05") or a percentage ("5%"), exactly."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(%?)", text.strip())
    value = Fraction(match[1]) / (100 if match[2] else 1) if match else None
    if value is None or value > 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a fraction from 0 to 1 (0.05) or a percentage from 0 to 100 (5%)")
    return value


def percent(value: float) -> str:
    """A rate as a short percentage: 0.25 -> "25%", 2/3 -> "66.67%"."""
    return f"{float(value) * 100:.4g}%"


def _lookup_failed(where: str, why: str) -> PhaseError:
    return PhaseError(f"GET {where}: {why}; pass --model NAME to name the model yourself")


def _shown(raw: bytes) -> str:
    """A server's body as one printable line, cut short."""
    text = "".join(c if c.isprintable() else " " for c in raw.decode("utf-8", "replace"))
    text = " ".join(text.split())
    return (text[:300] + " …" if len(text) > 300 else text) or "(an empty body)"


def _model_in(where: str, status: int, raw: bytes, keyed: bool) -> str:
    if status != 200:
        hint = ("; no key was sent: name its variable with --api-key-env VAR"
                if status in (401, 403) and not keyed else "")
        raise _lookup_failed(where, f"HTTP {status}: {_shown(raw)}{hint}")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        raise _lookup_failed(where, f"the answer is not JSON: {_shown(raw)}") from None
    cards = body.get("data") if isinstance(body, dict) else None
    if not isinstance(cards, list):
        raise _lookup_failed(where, 'expected {"data": [{"id": ...}]}, got ' + _shown(raw))
    if not cards:
        raise _lookup_failed(where, 'the server lists no model ("data" is empty)')
    model = cards[0].get("id") if isinstance(cards[0], dict) else None
    if not isinstance(model, str) or not model:
        raise _lookup_failed(where, 'the first entry of "data" has no "id" string: '
                             + _shown(raw))
    return model


async def first_model(url: str, key: str | None, settings: LoadSettings) -> str:
    """The first model the server lists; any other answer is a PhaseError naming the URL."""
    where = url.rstrip("/") + "/v1/models"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    total = settings.request_timeout or max(LOOKUP_MAX_S, settings.stall_timeout)
    timeout = aiohttp.ClientTimeout(total=total, sock_connect=settings.stall_timeout,
                                    sock_read=settings.stall_timeout)
    raw = bytearray()
    try:
        async with aiohttp.ClientSession() as session, session.get(
                where, headers=headers, timeout=timeout) as response:
            async for part in response.content.iter_any():
                raw += part
                if len(raw) > MODELS_MAX:
                    raise _lookup_failed(where, f"the answer is over {MODELS_MAX:,} bytes, the "
                                         "most kvgate reads of it")
            status = response.status
    except TimeoutError as exc:  # aiohttp's own timeouts are TimeoutErrors as well
        why = f"no answer within {settings.stall_timeout:g} s (--stall-timeout)"
        if not isinstance(exc, aiohttp.ServerTimeoutError):  # the whole lookup's cap
            why = (f"not done within {total:g} s (--request-timeout)" if settings.request_timeout
                   else f"not done within {total:g} s, the most a model lookup may take "
                   "without --request-timeout")
        raise _lookup_failed(where, why) from None
    except aiohttp.ClientConnectorError as exc:
        raise _lookup_failed(where, f"cannot connect: {exc.os_error.strerror or exc}") from None
    except aiohttp.ClientError as exc:
        raise _lookup_failed(where, f"{type(exc).__name__}: {exc}") from None
    return _model_in(where, status, bytes(raw), bool(key))


def failures(records: Sequence[RequestRecord]) -> tuple[Fraction, list[str]]:
    """The share of requests that failed, and lines saying how many failed and why."""
    failed = [r for r in records if not r.ok]
    rate = Fraction(len(failed), len(records)) if records else Fraction(0)
    lines = [f"failed: {len(failed)} of {len(records)} requests sent ({percent(rate)})"]
    reasons = Counter(r.error or r.outcome.value for r in failed)
    lines += [f"  {count} x {error}" for error, count in reasons.most_common(SHOWN_ERRORS)]
    if len(reasons) > SHOWN_ERRORS:
        lines.append(f"  and {len(reasons) - SHOWN_ERRORS} other errors (every record has its "
                     "own: --json, --out)")
    return rate, lines


def unmeasured(cold: ColdRecovery) -> list[str]:
    """Why the probe's storage reads are not known: the scrape's error, or each series whose
    delta was refused (a counter that is NaN, infinite, negative or reset), named. A counter
    the engine does not expose is no error: it prints as "—", saying so."""
    problems = [cold.metrics_error] if cold.metrics_error else []
    return problems + [f"{quantity}: {why}" for a in cold.attribution
                       for quantity, why in a.errors.items()]
