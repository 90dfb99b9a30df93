"""`kvgate config check`: both files validated as a run validates them, the values printed."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..core.configuration import ConfigError, workload_warnings
from ..options import RunConfig, RunOptions


def config_check(args: argparse.Namespace, console: Console) -> int:
    """Validate both files and print what kvgate will use."""
    config = RunConfig.load(RunOptions.from_namespace(args))
    say_embedded(config, console)
    site, site_file, thresholds, th_file = (config.site, config.site_file, config.thresholds,
                                            config.thresholds_file)
    # Names only the model room reads, which the run trips on after G1 (the pre-flight, G2's KV
    # sizing, the summary's prices): read here with the run's own readers.
    from ..model import SHIPPED_CATALOG, CatalogError, kv_geometry, load_catalog
    problems, sizing, catalog = [], site.sizing, site.site.catalog or SHIPPED_CATALOG
    try:
        kv_geometry(sizing.model, sizing.dtype, sizing.tp)
        names = [a.name for a in load_catalog(catalog).arrays]
        if site.site.array and site.site.array not in names:
            problems.append(f"key 'site.array': {site.site.array!r} is not in the catalogue "
                            f"{catalog} (it has {', '.join(names)}): write one of them, or \"\"")
    except (ValueError, OSError) as exc:  # ModelError, CatalogError: each names its file
        key = "site.catalog" if isinstance(exc, CatalogError) else "sizing.model"
        problems.append(f"key '{key}': {exc}")
    if problems:
        raise ConfigError(site_file.path, problems)
    console.print(f"[green]OK[/] {site_file.path} (SHA-256 {site_file.sha256[:16]}…)")
    console.print(f"[green]OK[/] {th_file.path} revision {thresholds.meta.revision} "
                  f"(SHA-256 {th_file.sha256[:16]}…)"
                  + (f", limits profile '{thresholds.profile}'" if thresholds.profile else ""))
    for text in workload_warnings(site, thresholds):
        console.print(f"[yellow]warning[/] {escape(text)}", highlight=False, soft_wrap=True)
    console.print_json(json.dumps({"site": site.model_dump(mode="json"),
                                   "thresholds": thresholds.model_dump(mode="json")}))
    return 0


def say_embedded(config: RunConfig, console: Console) -> None:
    """Tell the user when kvgate's own default files stand in for ./site.toml, thresholds."""
    for path in config.embedded:
        console.print(f"no {Path(path).name} here: using kvgate's embedded default {path} "
                      f"(relative paths in the current folder {Path.cwd()})", highlight=False,
                      markup=False)
