"""Site values the engine the arms launch, or the sweep, cannot take: said at `config check`.

A context longer than the simulator's engine takes is refused by it at the first probe (HTTP
400), after the seed; a sweep size below one KV chunk is no working set the engine can hold
(its tier stores whole chunks). Both are refused here, on the file alone, naming the key.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..quantities import format_size
from .cross_checks import KeyedError

# kvgate's simulator: its profiles' max_model_len (prompt + output tokens), as gates/sim/model.py
# PROFILES states them. The simulator is a separate server this room may not import;
# tests/test_quiet_acceptance.py holds the two equal.
SIM_MAX_MODEL_LEN = {"tiny": 65_536, "qwen3-coder-480b-scaled": 262_144}
SIM_DEFAULT_PROFILE = "tiny"  # gates/sim/cli.py: --profile's default
SIM_ENGINE = "kvgate-sim"


def _sim_profile(command: list[str]) -> str:
    """The --profile a simulator command line gives ("" when it names none we know)."""
    if "--profile" in command[:-1]:
        return command[command.index("--profile") + 1]
    given = next((c.split("=", 1)[1] for c in command if c.startswith("--profile=")), None)
    return SIM_DEFAULT_PROFILE if given is None else given


def engine_workload_problem(site: Any, context: Any) -> KeyedError | None:
    """An [engine] workload key that is unknown, or a value [workload] would refuse."""
    kind = type(site.workload)
    for where, keys in (("engine.workload", site.engine.workload),
                        ("engine.vllm.workload", site.engine.vllm.workload)):
        unknown = sorted(set(keys) - set(kind.model_fields))
        if unknown:
            return KeyedError(f"{where}.{unknown[0]}", "is an unknown key (known: "
                              + ", ".join(kind.model_fields) + ")", repr(keys[unknown[0]]))
        try:
            kind.model_validate(site.workload.model_dump(mode="json") | keys, context=context)
        except ValidationError as exc:
            e = exc.errors()[0]
            return KeyedError(".".join(map(str, (where, *e["loc"]))),
                              e["msg"].removeprefix("Value error, "), repr(e.get("input")))
    return None


def sim_context_problem(site: Any) -> KeyedError | None:
    """A probe (context + question + output) longer than a launched simulator arm takes."""
    # The arms as written run [workload] as written: where [engine] prefer names an engine that
    # is not installed, and always for the simulator's own arms.
    w = site.workload
    longest = w.context_tokens + w.question_tokens + w.output_tokens
    for name, arm in sorted(site.arms.items()):
        if arm.kind != "launch" or arm.engine != SIM_ENGINE:
            continue
        profile = _sim_profile(list(arm.command))
        room = SIM_MAX_MODEL_LEN.get(profile)
        if room is not None and longest > room:
            return KeyedError("workload.context_tokens", (
                f"+ question_tokens + output_tokens = {longest:,} tokens, more than arms.{name}'s "
                f"simulator (--profile {profile}) takes: {room:,} (its max_model_len); write "
                f"context_tokens = {room - w.question_tokens - w.output_tokens:,} or fewer"),
                str(w.context_tokens))
    return None


def sweep_chunk_problem(site: Any) -> KeyedError | None:
    """A [sweep] size smaller than one KV chunk of the workload the sweep runs."""
    for w in [site.workload] + ([site.engine_workload()] if site.engine.prefer else []):
        if problem := _below_a_chunk(w, site.sweep.sizes):
            return problem
    return None


def _below_a_chunk(w: Any, sizes: list[int]) -> KeyedError | None:
    if not w.kv_bytes_per_token:
        return None  # from [sizing]'s model: sized when the sweep plans (gates.sweep)
    chunk = w.chunk_tokens * w.kv_bytes_per_token
    for i, size in enumerate(sizes):
        if size < chunk:
            return KeyedError(f"sweep.sizes[{i}]", (
                f"is below one KV chunk of the workload ([workload] chunk_tokens = "
                f"{w.chunk_tokens} x kv_bytes_per_token = {w.kv_bytes_per_token} B = "
                f"{format_size(chunk)}), and a working set is whole contexts of "
                f"{format_size(w.context_tokens * w.kv_bytes_per_token)}: write a size of "
                f"at least \"{format_size(w.context_tokens * w.kv_bytes_per_token)}\""),
                f'"{format_size(size)}"')
    return None
