"""The [workload] table of site.toml: the seeded cold-recovery workload every arm runs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt

from ._settings import Strict
from ._workloads import Plan, cold_recovery


class WorkloadSettings(Strict):
    """One workload, identical on every arm: G3 must match G2's workload hash."""

    contexts: PositiveInt = 8
    context_tokens: PositiveInt = 4096
    question_tokens: PositiveInt = 32
    output_tokens: PositiveInt = 32
    chunk_tokens: PositiveInt = 256  # the tier's chunk size (LMCache: 256 tokens)
    vocab: int = Field(default=32000, gt=1000)
    seed: int = 0
    warmup: int = Field(default=2, ge=0)
    eviction: Literal["reset", "flood", "restart"] = "reset"
    filler_contexts: int = Field(default=0, ge=0)  # for eviction = "flood"
    stall_timeout: float = Field(default=120.0, gt=0)

    def plan(self, output_tokens: int | None = None) -> Plan:
        """The cold-recovery plan; output_tokens overrides the probe length (correctness)."""
        return cold_recovery(self.contexts, self.context_tokens, self.question_tokens,
                             output_tokens or self.output_tokens, self.seed, self.vocab,
                             filler_contexts=self.filler_contexts, chunk_tokens=self.chunk_tokens,
                             warmup=self.warmup)

    def kv_bytes(self, kv_bytes_per_token: int) -> int:
        """Bytes the seeded contexts occupy on a tier that stores whole chunks."""
        return self.plan().total_expected_kv_tokens * kv_bytes_per_token
