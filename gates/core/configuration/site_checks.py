"""Checks of site.toml against thresholds.toml, and of the site as the run will use it.

Each is a check the run would make too late to help (the engine has no free slot, G4 cannot
judge the soak, two arms empty one KV directory), made here once, on the files alone, by
load_config for `kvgate config check` and the run alike.
"""

from __future__ import annotations

from pathlib import Path

from ..quantities import format_duration
from .arms import validate_arms
from .cross_checks import soak_problem
from .settings import Site
from .thresholds import Thresholds


def context_problem(site: Site) -> str:
    """Why the preferred engine cannot hold a probe of its workload ("" if it can, or unknown).

    vLLM refuses a prompt and its output beyond --max-model-len (gates.engines.vllm's
    workload_fit says so at the run); llama.cpp's slot context is said as a warning only, since
    whether a slot may use more of the server's context depends on its build.
    """
    engine = site.engine
    if engine.prefer == "llamacpp":
        key, room, flag = "engine.slot_tokens", engine.slot_tokens, "llama-server's context"
    elif engine.prefer == "vllm":
        key, room, flag = "engine.vllm.max_model_len", engine.vllm.max_model_len, \
            "vLLM --max-model-len"
    else:
        return ""
    w = site.engine_workload()
    longest = w.context_tokens + w.question_tokens + w.output_tokens
    if longest <= room:
        return ""
    return (f"key '{key}': {room} tokens ({flag}) are fewer than a probe of the workload "
            f'[engine] prefer = "{engine.prefer}" runs needs: context_tokens + question_tokens + '
            f"output_tokens = {w.context_tokens} + {w.question_tokens} + {w.output_tokens} = "
            f"{longest}: write {key.rsplit('.', 1)[-1]} = {longest} or more, or a shorter "
            "context")


def both_files_problems(site: Site, thresholds: Thresholds, site_path: Path | str,
                        thresholds_path: Path | str) -> list[tuple[Path | str, list[str]]]:
    """(file, problems) for each file at fault: what needs both files together.

    A G2 level the workload never reaches comes first: the slots it would need are moot.
    """
    found = [(thresholds_path, _concurrency_problems(site, thresholds, site_path)),
             (site_path, validate_arms(site.arms, ()) + _slot_problems(
                 site, thresholds, thresholds_path) + _soak_problems(site, thresholds,
                                                                     thresholds_path)
              + [p for p in [context_problem(site)] if p and site.engine.prefer == "vllm"])]
    return [(path, problems) for path, problems in found if problems]


def _slot_problems(site: Site, thresholds: Thresholds, thresholds_path: Path | str
                   ) -> list[str]:
    # llama.cpp's slot protocol needs a free slot for every request in flight (its runner
    # refuses a server with fewer slots than the concurrency, after the engine has started).
    levels, slots = thresholds.g2.concurrency, site.engine.slots
    if site.engine.prefer != "llamacpp" or slots >= max(levels):
        return []
    return [f"key 'engine.slots': {slots} llama-server slots (--parallel), but "
            f"{thresholds_path} [g2] concurrency = {levels} puts up to {max(levels)} requests "
            f"in flight, each on a slot of its own: write slots = {max(levels)} or more"]


def _soak_problems(site: Site, thresholds: Thresholds, thresholds_path: Path | str
                   ) -> list[str]:
    """The soak G4 will run: [soak] keys over thresholds.toml's [g4] (gates.soak.setup)."""
    soak, g4 = site.soak, thresholds.g4
    ours = {"duration": soak.duration, "window": soak.window,
            "warmup_windows": soak.warmup_windows}
    if all(value is None for value in ours.values()):
        return []  # thresholds.toml's own [g4], checked with that file
    values = {k: getattr(g4, k) if v is None else v for k, v in ours.items()}
    problem = soak_problem(values["duration"], values["window"], values["warmup_windows"])
    if problem is None:
        return []

    def named(key: str) -> str:
        value = values[key] if key == "warmup_windows" else f'"{format_duration(values[key])}"'
        where = "soak." if ours[key] is not None else f"{thresholds_path} [g4] "
        return f"{where}{key} = {value}"

    # The site's own key at fault, else the key of its [soak] that made the plan (a window of
    # thresholds.toml's soak): the message then starts with the thresholds file's key.
    fault, text = problem
    key = fault if ours[fault] is not None else next(k for k, v in ours.items() if v is not None)
    return [f"key 'soak.{key}': {named(fault)} " + text.format(
        duration=named("duration"), window=named("window"), warmup=named("warmup_windows"))]


def _concurrency_problems(site: Site, thresholds: Thresholds, site_path: Path | str
                          ) -> list[str]:
    """A G2 level above a workload's probe requests would be reported but never reached."""
    runs = {"[workload] contexts": site.workload.contexts}
    if site.engine.prefer:  # the engine's workload when it is installed, else [workload]
        runs[f'contexts of the workload [engine] prefer = "{site.engine.prefer}" runs'] = \
            site.engine_workload().contexts
    where, fewest = min(runs.items(), key=lambda run: run[1])
    example = ", ".join(map(str, sorted({max(1, fewest // 2), fewest})))
    return [f"key 'g2.concurrency[{i}]': {level} requests in flight, but {site_path} gives "
            f"only {fewest} probe requests per repetition ({where} = {fewest}): write levels "
            f"of at most {fewest} (e.g. concurrency = [{example}]), or raise contexts"
            for i, level in enumerate(thresholds.g2.concurrency) if level > fewest]
