"""Workload plans as token-id prompts, deterministic from a seed (DESIGN §5). Pure: no I/O.

Every token id comes from BLAKE2b keyed by the seed and a block key, never from shared random
state, so a plan is identical across runs, machines and Python versions, and ``workload_hash``
lets G3 prove it replayed G2's workload exactly.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..core.configuration import WorkloadSettings

WARMUP, SEED, EVICT, PROBE = "warmup", "seed", "evict", "probe"
RESERVED = 1000  # low ids skipped: many vocabularies keep control tokens there
MAX_INPUT = 1 << 22  # 4 Mi tokens: beyond any model's context; bounds a hostile trace


class WorkloadError(ValueError):
    """A workload that cannot be built: bad parameters or a bad trace line."""


class PlannedRequest(BaseModel):
    """One request the load generator will send; ``at`` is an offset in s (None: when free)."""

    model_config = ConfigDict(frozen=True)

    request_id: str
    phase: str
    prompt: list[int]
    max_tokens: int = Field(ge=1)
    ignore_eos: bool = True
    at: float | None = None
    context_id: str | None = None
    session: str | None = None  # multi-turn: turn n+1 is sent only after turn n finished
    turn: int | None = None


class Plan(BaseModel):
    """A whole workload: its recipe, its requests in dispatch order, what storage should hold."""

    kind: str
    seed: int
    params: dict[str, Any] = Field(default_factory=dict)
    requests: list[PlannedRequest] = Field(default_factory=list)
    # context_id -> prompt tokens the probe should find in the storage tier.
    expected_kv_tokens: dict[str, int] = Field(default_factory=dict)

    def phase(self, name: str) -> list[PlannedRequest]:
        """The requests of one phase, in order."""
        return [r for r in self.requests if r.phase == name]

    @property
    def total_expected_kv_tokens(self) -> int:
        """Sum of expected_kv_tokens over contexts."""
        return sum(self.expected_kv_tokens.values())


def block_tokens(block_key: str, size: int, vocab: int, reserved: int = RESERVED) -> list[int]:
    """``size`` token ids in [reserved, vocab), a pure function of the key."""
    if size < 0 or not 0 <= reserved < vocab:
        raise WorkloadError(f"need size >= 0 and 0 <= reserved < vocab (size={size}, "
                            f"reserved={reserved}, vocab={vocab})")
    span, out, counter = vocab - reserved, [], 0
    # The key is hashed first: BLAKE2b keys are limited to 64 bytes, block keys are not.
    key = hashlib.blake2b(block_key.encode("utf-8", "surrogatepass"), digest_size=32,
                          person=b"kvgate-tokens").digest()
    while len(out) < size:
        # 64-byte digests in counter mode, 16 ids each; modulo bias is < span / 2**32.
        digest = hashlib.blake2b(counter.to_bytes(8, "little"), key=key).digest()
        out.extend(reserved + int.from_bytes(digest[i:i + 4], "little") % span
                   for i in range(0, 64, 4))
        counter += 1
    return out[:size]


def _unique_blocks(keys: list[str], size: int, vocab: int, reserved: int) -> list[list[int]]:
    """One block per key, each with a first token no other block has (no shared prefix)."""
    if len(keys) > vocab - reserved:
        raise WorkloadError(f"{len(keys)} unrelated prompts need more than {vocab - reserved} "
                            f"distinct first tokens")
    firsts: set[int] = set()
    blocks = []
    for key in keys:
        salt = 0
        while True:
            block = block_tokens(f"{key}#{salt}" if salt else key, size, vocab, reserved)
            if not block or block[0] not in firsts:
                break
            salt += 1
        if block:
            firsts.add(block[0])
        blocks.append(block)
    return blocks


def _positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise WorkloadError(f"{name} must be at least 1, got {value}")


def cold_recovery(contexts: int, context_tokens: int, question_tokens: int, output_tokens: int,
                  seed: int, vocab: int, filler_contexts: int = 0, chunk_tokens: int = 256,
                  warmup: int = 2, warmup_tokens: int = 64, reserved: int = RESERVED) -> Plan:
    """LMCache long_doc_qa shape: warm-up, seed contexts, optional filler flood, probe."""
    _positive(contexts=contexts, context_tokens=context_tokens, question_tokens=question_tokens,
              output_tokens=output_tokens, chunk_tokens=chunk_tokens)
    if filler_contexts < 0 or warmup < 0 or (warmup and warmup_tokens < 1):
        raise WorkloadError("filler_contexts and warmup must be >= 0, warmup_tokens >= 1")
    ids = [f"ctx-{i:04d}" for i in range(contexts)]
    fillers = [f"filler-{i:04d}" for i in range(filler_contexts)]
    warm = [f"warmup-{i:04d}" for i in range(warmup)]
    # One pool of unrelated prompts: no context shares a prefix with another, a filler or a
    # warm-up prompt, so a probe hit can only come from that context's own seed.
    pool = _unique_blocks([f"{seed}:cold:{k}" for k in ids + fillers + warm], 1, vocab, reserved)
    firsts = dict(zip(ids + fillers + warm, pool, strict=True))

    def body(name: str, size: int) -> list[int]:
        return firsts[name] + block_tokens(f"{seed}:cold:{name}:body", size - 1, vocab, reserved)

    requests = [PlannedRequest(request_id=f"{WARMUP}-{i:04d}", phase=WARMUP,
                               prompt=body(name, warmup_tokens), max_tokens=output_tokens)
                for i, name in enumerate(warm)]
    docs = {name: body(name, context_tokens) for name in ids}
    requests += [PlannedRequest(request_id=f"{SEED}-{name}", phase=SEED, prompt=docs[name],
                                max_tokens=1, context_id=name) for name in ids]
    requests += [PlannedRequest(request_id=f"{EVICT}-{name}", phase=EVICT,
                                prompt=body(name, context_tokens), max_tokens=1)
                 for name in fillers]
    requests += [PlannedRequest(
        request_id=f"{PROBE}-{name}", phase=PROBE, context_id=name, max_tokens=output_tokens,
        prompt=docs[name] + block_tokens(f"{seed}:cold:{name}:question", question_tokens,
                                         vocab, reserved)) for name in ids]
    # Tiers store whole chunks only: a context's partial last chunk is recomputed.
    stored = context_tokens // chunk_tokens * chunk_tokens
    return Plan(kind="cold_recovery", seed=seed, requests=requests,
                expected_kv_tokens={name: stored for name in ids},
                params=dict(contexts=contexts, context_tokens=context_tokens,
                            question_tokens=question_tokens, output_tokens=output_tokens,
                            vocab=vocab, reserved=reserved, filler_contexts=filler_contexts,
                            chunk_tokens=chunk_tokens, warmup=warmup,
                            warmup_tokens=warmup_tokens))


def multi_turn(sessions: int, turns: int, first_tokens: int, turn_tokens: int,
               output_tokens: int, seed: int, vocab: int, reserved: int = RESERVED) -> Plan:
    """Chat sessions: turn n = turn n-1's prompt + a stand-in for its output + new user tokens."""
    # The engine's real output differs from the stand-in, so the reusable prefix of turn n is
    # turn n-1's prompt. Turns of one session must be sent one after another (session, turn).
    _positive(sessions=sessions, turns=turns, first_tokens=first_tokens,
              turn_tokens=turn_tokens, output_tokens=output_tokens)
    heads = _unique_blocks([f"{seed}:turns:{s}" for s in range(sessions)], 1, vocab, reserved)
    requests = []
    for s in range(sessions):
        name = f"session-{s:04d}"
        prompt = heads[s] + block_tokens(f"{seed}:turns:{s}:0", first_tokens - 1, vocab,
                                         reserved)
        for t in range(turns):
            if t:
                prompt = (prompt
                          + block_tokens(f"{seed}:turns:{s}:{t}:answer", output_tokens, vocab,
                                         reserved)
                          + block_tokens(f"{seed}:turns:{s}:{t}", turn_tokens, vocab,
                                         reserved))
            requests.append(PlannedRequest(request_id=f"{name}-turn-{t:03d}", phase=PROBE,
                                           prompt=prompt, max_tokens=output_tokens,
                                           context_id=name, session=name, turn=t))
    return Plan(kind="multi_turn", seed=seed, requests=requests,
                params=dict(sessions=sessions, turns=turns, first_tokens=first_tokens,
                            turn_tokens=turn_tokens, output_tokens=output_tokens, vocab=vocab,
                            reserved=reserved))


def shared_prefix(groups: int, per_group: int, prefix_tokens: int, suffix_tokens: int,
                  output_tokens: int, seed: int, vocab: int, reserved: int = RESERVED,
                  total: int | None = None) -> Plan:
    """G groups of M requests; members of a group share a P-token prefix, groups share none.

    ``total`` keeps the first that many requests, so the last group may hold fewer than M:
    asked for 90 in groups of 4, the plan is 22 groups of 4 and one of 2, not 88 requests.
    """
    _positive(groups=groups, per_group=per_group, prefix_tokens=prefix_tokens,
              suffix_tokens=suffix_tokens, output_tokens=output_tokens)
    if total is not None and not (groups - 1) * per_group < total <= groups * per_group:
        raise WorkloadError(f"total {total} does not fit {groups} groups of {per_group}: "
                            f"need {(groups - 1) * per_group} < total <= {groups * per_group}")
    heads = _unique_blocks([f"{seed}:groups:{g}" for g in range(groups)], 1, vocab, reserved)
    requests = []
    for g in range(groups):
        prefix = heads[g] + block_tokens(f"{seed}:groups:{g}:prefix", prefix_tokens - 1, vocab,
                                         reserved)
        requests += [PlannedRequest(
            request_id=f"group-{g:04d}-{m:04d}", phase=PROBE, max_tokens=output_tokens,
            context_id=f"group-{g:04d}",
            prompt=prefix + block_tokens(f"{seed}:groups:{g}:{m}", suffix_tokens, vocab,
                                         reserved)) for m in range(per_group)]
    # Without total the params (so the workload hash) are what they always were.
    return Plan(kind="shared_prefix", seed=seed, requests=requests[:total],
                params=dict(groups=groups, per_group=per_group, prefix_tokens=prefix_tokens,
                            suffix_tokens=suffix_tokens, output_tokens=output_tokens,
                            vocab=vocab, reserved=reserved)
                | ({} if total is None else {"total": total}))


def workload_hash(plan: Plan, **conditions: Any) -> str:
    """SHA-256 (hex) of the plan's canonical JSON: same plan, same hash, on any machine.

    conditions are what else changes what a probe measures without being in the prompts (the
    eviction mode): hashed beside the plan, so G3 and G2 compare only like with like.
    """
    body = plan.model_dump(mode="json") | ({"conditions": conditions} if conditions else {})
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                           allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def workload_plan(workload: WorkloadSettings, output_tokens: int | None = None) -> Plan:
    """The cold-recovery plan of site.toml [workload]; output_tokens overrides the probe length."""
    w = workload
    return cold_recovery(w.contexts, w.context_tokens, w.question_tokens,
                         output_tokens or w.output_tokens, w.seed, w.vocab,
                         filler_contexts=w.filler_contexts, chunk_tokens=w.chunk_tokens,
                         warmup=w.warmup)
