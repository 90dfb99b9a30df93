"""The run options, declared once: `kvgate run`, `kvgate checklist`, `kvgate soak` and the pytest
plugin all add them from here.

The configuration they name is read and validated once per run (RunConfig.load) and handed to
the gate session, whether the run started from the CLI or from `pytest -m gate`.
"""

from __future__ import annotations

from argparse import ArgumentTypeError
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..core.configuration import LoadedFile, Site, Thresholds, in_checkout, load_config, shipped
from .inputs import Range, duration_text, folder, input_file, run_id


@dataclass
class RunOptions:
    """What the user asked for on the command line."""

    site: Path = Path("site.toml")
    thresholds: Path = Path("thresholds.toml")
    out: Path = Path("reports")
    run_id: str = ""
    force: bool = False
    destructive: bool = False
    confirm_serial: str = ""
    soak_duration: str = ""  # e.g. "10m": a shortened G4
    soak_window: str = ""
    soak_resume: str = ""  # the run id of a G4 soak to continue
    sweep_resume: str = ""  # the run id of a working-set sweep to continue (kvgate sweep)
    soak_metrics_port: int | None = None  # Prometheus endpoint on loopback while soaking
    checklist_id: str = ""  # the `kvgate checklist` run whose answers the reports carry
    engine: str = ""  # --engine: replaces the site's [engine] prefer ("" = as the site says)

    @classmethod
    def from_namespace(cls, namespace: object) -> RunOptions:
        """The options from a parsed argparse or pytest namespace (absent ones at default)."""
        values = {f.name: getattr(namespace, f.name, None) for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if v is not None})


@dataclass(frozen=True)
class Option:
    """One run option: its flag, help text and the type argparse or pytest parses it to."""

    flag: str
    help: str
    kind: Callable[[str], Any] = str  # argparse's and pytest's type=: it parses and checks
    metavar: str | None = None

    @property
    def dest(self) -> str:
        """The RunOptions field the option fills."""
        return self.flag.removeprefix("--").replace("-", "_")


# --engine's words: "arms" = the site's [arms] as written (the embedded default's: kvgate's
# simulator); the others are the real engines `kvgate engine install` puts in place.
ENGINE_WORDS = {"arms": "", "llamacpp": "llamacpp", "vllm": "vllm"}


def engine_word(text: str) -> str:
    """--engine's value: one of ENGINE_WORDS, refused naming them ("": the site's choice,
    the default argparse also passes through here)."""
    if text and text not in ENGINE_WORDS:
        raise ArgumentTypeError(f"{text!r} is not an engine kvgate measures: write "
                                f"{', '.join(list(ENGINE_WORDS)[:-1])} or {list(ENGINE_WORDS)[-1]}")
    return text


RUN_OPTIONS = (
    Option("--site", "site file (default: ./site.toml)", input_file),
    Option("--thresholds", "limits file (default: ./thresholds.toml)", input_file),
    Option("--out", "folder for the store, reports and evidence (default: ./reports)", folder),
    Option("--run-id", "run id to use (default: a new one)", run_id),
    Option("--force", "run even if the upstream gate did not pass; the report says so in red",
           bool),
    Option("--destructive", "allow fio to write the raw block device named in [target] device",
           bool),
    Option("--confirm-serial", "that device's serial, typed back to confirm --destructive"),
    Option("--soak-duration", "shorten G4 for a rehearsal, e.g. 10m (reported as no sign-off)",
           duration_text(1.0)),
    Option("--soak-window", "G4 window length, e.g. 1m", duration_text(1.0)),
    Option("--soak-metrics-port", "serve the soak's metrics for Prometheus on 127.0.0.1:PORT "
           "(0: any free port)", Range(0, 65535, whole=True, unit="a TCP port"), "PORT"),
    Option("--checklist-id", "the `kvgate checklist` run whose manual answers the reports carry",
           metavar="ID"),
    Option("--soak-resume", "continue the G4 soak of RUN_ID from its last committed window",
           run_id, "RUN_ID"),
    Option("--engine", "what G2/G3 measure: llamacpp or vllm (a real engine, installed by "
           "`kvgate engine install`), or arms (the site's [arms] as written: the embedded "
           "default's are kvgate's simulator); default: the site's [engine] prefer",
           engine_word, "ENGINE"),
)
DEFAULTS = RunOptions()


def add_run_options(add: Callable[..., Any], only: Iterable[str] | None = None,
                    skip: Iterable[str] = (), inherit: Iterable[str] = (),
                    inherited_from: str = "") -> None:
    """Declare the run options through argparse's add_argument or pytest's addoption.

    ``inherit``: options whose default is taken from what is resumed (`kvgate checklist
    --resume`, `kvgate soak resume`): None here, and ``inherited_from`` says where it comes
    from in the help ("{default}" stands for the usual default).
    """
    wanted = None if only is None else set(only)
    for option in RUN_OPTIONS:
        if option.dest in skip or (wanted is not None and option.dest not in wanted):
            continue
        if option.kind is bool:
            add(option.flag, action="store_true", help=option.help)
            continue
        inherited = option.dest in set(inherit)
        add(option.flag, type=option.kind,
            default=None if inherited else getattr(DEFAULTS, option.dest),
            metavar=option.metavar,
            help=_inherited_help(option.help, inherited_from) if inherited else option.help)


def _inherited_help(text: str, inherited_from: str) -> str:
    # "site file (default: ./site.toml)" with inherited_from "{default}, or the resumed run's"
    stem, _, default = text.removesuffix(")").partition(" (default: ")
    return f"{stem} (default: {inherited_from.format(default=default)})"


@dataclass
class RunConfig:
    """Both configuration files of a run, validated, with where they came from."""

    site: Site
    site_file: LoadedFile
    thresholds: Thresholds
    thresholds_file: LoadedFile

    embedded: list[str] = field(default_factory=list)  # files taken from kvgate's own copy
    engine_asked: str = ""  # the --engine word, already written into site.engine.prefer

    @classmethod
    def load(cls, options: RunOptions) -> RunConfig:
        """Read and validate site.toml, then thresholds.toml with the site's limits profile.

        Where the user named neither file and the current folder has none (an installed
        kvgate run anywhere), kvgate's shipped copy is the embedded default; its relative
        paths (the target directory) are then taken in the current folder, never inside
        the installation.
        """
        site_path, base, embedded = options.site, None, []
        if _embedded_default(options.site, DEFAULTS.site):
            site_path, base = shipped("site.toml"), Path.cwd()
            embedded.append(str(site_path))
        th_path = options.thresholds
        if _embedded_default(th_path, DEFAULTS.thresholds):
            th_path = shipped("thresholds.toml")
            embedded.append(str(th_path))
        # The site's limits profile and the checks that need both files (G2's concurrency
        # against the workload's probe requests) are refused here, before anything runs.
        site, site_file, thresholds, th_file = load_config(site_path, th_path, base)
        if options.engine:  # the one place the word replaces the site's choice
            site.engine.prefer = ENGINE_WORDS[options.engine]
        return cls(site, site_file, thresholds, th_file, embedded, options.engine)


def _embedded_default(path: Path, default: Path) -> bool:
    # Only the default name, only when it is absent: a file the user names is never replaced.
    return path == default and not path.exists() and not in_checkout()
