"""The simulator's command line, declared once: `python -m gates.sim` and `kvgate sim serve`.

`python -m gates.sim` is the standalone entry every launch arm uses: it loads only this package
(plus aiohttp and pydantic), not the rest of kvgate, so an arm's start-up is the server's own.
`kvgate sim serve` registers the same options through ``add_serve_options`` and runs
``serve_command``, so the two cannot drift apart.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

from pydantic import ValidationError

from .model import PROFILES, FaultConfig, Profile, get_profile
from .server import serve

__all__ = ["SERVE_HELP", "add_serve_options", "bandwidth", "build_parser", "main",
           "paced_profile", "serve_command", "serve_examples", "size", "tiered_profile"]

SERVE_HELP = "serve the simulator on loopback"

_EXAMPLES = """examples:
  {cmd} --profile tiny --kv-dir /tmp/kv --port 8000     (in one terminal)
  kvgate loadgen --url http://127.0.0.1:8000 --workload cold-recovery --concurrency 8
  {cmd} --profile tiny --port 8001     (no --kv-dir: no KV tier, every prompt recomputed)
  {cmd} --kv-dir /tmp/kv --read-limit 20MB/s --faults '{{"error_every": 10}}'
  {cmd} --kv-dir /tmp/kv --prefill-tokens-per-s 2000     (a slower GPU: recompute costs more)
  {cmd} --kv-dir /tmp/kv --gpu-cache 12MiB --cpu-tier 24MiB     (a DRAM tier in front)
"""

# Bandwidth units as gates.core.units reads them (kept equal by tests/test_sim_standalone.py):
# the simulator may not import gates.core, and --read-limit must mean the same in both.
_RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-zµ/%]*)")
_BYTES = {"b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12,
          "kib/s": 1024.0, "mib/s": 1024.0**2, "gib/s": 1024.0**3, "tib/s": 1024.0**4}
_BITS = {"kbit/s": 1e3 / 8, "mbit/s": 1e6 / 8, "gbit/s": 1e9 / 8, "tbit/s": 1e12 / 8,
         "kbps": 1e3 / 8, "mbps": 1e6 / 8, "gbps": 1e9 / 8, "tbps": 1e12 / 8}
# Sizes as gates.core.units reads them (SIZE_UNITS; kept equal by tests/test_sim_standalone.py);
# a plain number is bytes, as kvgate's {gpu_cache} and {cpu_tier} placeholders write them.
_SIZE = re.compile(r"([0-9]+(?:\.[0-9]+)?|\.[0-9]+)\s*([A-Za-z]*)")
_SIZES = {"": 1, "b": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1024**2, "mib": 1024**2,
          "mb": 1000**2, "g": 1024**3, "gib": 1024**3, "gb": 1000**3, "t": 1024**4,
          "tib": 1024**4, "tb": 1000**4}
MAX_CACHE = 1024**4  # a simulated cache of more than 1 TiB of digests is no test machine's


def serve_examples(command: str) -> str:
    """The --help epilog, its examples spelled with ``command`` (how the user started us)."""
    return _EXAMPLES.format(cmd=command)


def bandwidth(text: str) -> float:
    """Bytes per second from "20MB/s", "800MiB/s" or "10 Gbit/s"; ValueError otherwise."""
    match = _RATE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"{text!r} is not a bandwidth (write it like '5.2 GB/s')")
    number, unit = match.groups()
    key = unit.lower()
    if re.fullmatch(r"[KMGT]b/s", unit):
        key = unit[0].lower() + "bit/s"  # "Gb/s" is bits, "GB/s" is bytes
    elif re.fullmatch(r"[kmgt]?b/s|[kmgtKMGT]ib/s", unit):
        # "gb/s" or "Mib/s": bits or bytes? Guessing wrong is a factor of 8.
        raise ValueError(f"ambiguous bandwidth unit {unit!r} in {text!r}: write 'GB/s' or "
                         "'MiB/s' for bytes, 'Gb/s' or 'Gbit/s' for bits")
    factor = _BYTES.get(key) or _BITS.get(key)
    if factor is None:
        raise ValueError(f"unknown bandwidth unit {unit!r} in {text!r} "
                         "(use MB/s, GB/s, MiB/s, GiB/s, or Gb/s / Gbit/s for links)")
    result = float(number) * factor
    if not math.isfinite(result):
        raise ValueError(f"{text!r} is too large for a bandwidth")
    return result


def size(text: str) -> int:
    """Bytes from "12MiB", "24 MB" or "1048576", for --gpu-cache and --cpu-tier."""
    match = _SIZE.fullmatch(text.strip())
    factor = _SIZES.get(match.group(2).lower()) if match else None
    if factor is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: write bytes or a size with "
                                         "its unit, e.g. 12MiB (B, KiB, MiB, GiB, KB, MB, GB)")
    value = round(Decimal(match.group(1)) * factor)
    if value > MAX_CACHE:
        raise argparse.ArgumentTypeError(f"{text!r} is more than the 1 TiB a simulated cache "
                                         "may hold")
    return value


def port(text: str) -> int:
    """A TCP port for --port: 0 (a free one) to 65535, said so otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a whole number from 0 (any free port) to "
                                         f"65535, not {text!r}")
    return value


def rate(text: str) -> float:
    """A finite speed above zero for --prefill-tokens-per-s."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"tokens per second must be a finite number above "
                                         f"0, e.g. 2000, not {text!r}")
    return value


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Declare the simulator's options on ``parser`` (standalone or `kvgate sim serve`)."""
    parser.add_argument("--profile", choices=sorted(PROFILES), default="tiny")
    parser.add_argument("--kv-dir", type=Path, help="storage tier directory (none: recompute)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port, default=8000, help="0 = any free port")
    parser.add_argument("--faults", default="", help='JSON, e.g. \'{"error_every": 10}\'')
    parser.add_argument("--read-limit", default="",
                        help="cap the tier's read bandwidth, e.g. 20MB/s (a slower tier)")
    parser.add_argument("--prefill-tokens-per-s", type=rate, default=None, metavar="N",
                        help="prefill speed instead of the profile's, e.g. 2000 (a slower "
                             "GPU: recomputing a prompt takes long beside restoring its KV)")
    parser.add_argument("--gpu-cache", type=size, default=None, metavar="SIZE",
                        help="the GPU prefix cache instead of the profile's, e.g. 12MiB "
                             "(whole chunks; 0 = none)")
    parser.add_argument("--cpu-tier", type=size, default=0, metavar="SIZE",
                        help="a CPU (DRAM) KV tier between the GPU cache and the storage, "
                             "e.g. 24MiB (whole chunks; default 0 = none); its hits count as "
                             "kvgate_sim_cpu_hit_tokens_total")


def build_parser(prog: str = "python -m gates.sim") -> argparse.ArgumentParser:
    """The standalone parser: the options of add_serve_options, examples in the epilog."""
    parser = argparse.ArgumentParser(
        prog=prog, description="kvgate's reference engine simulator: an OpenAI-compatible "
        "server with vLLM-style /metrics and a real storage KV tier, on loopback unless --host.",
        epilog=serve_examples(prog), formatter_class=argparse.RawDescriptionHelpFormatter)
    add_serve_options(parser)
    return parser


def paced_profile(name: str, prefill_tokens_per_s: float | None) -> Profile:
    """The named profile, its prefill speed replaced when given; ValueError if it is not > 0."""
    profile = get_profile(name)
    if prefill_tokens_per_s is None:
        return profile
    return Profile.model_validate(profile.model_dump()
                                  | {"prefill_tokens_per_s": prefill_tokens_per_s})


def tiered_profile(profile: Profile, gpu_cache: int | None, cpu_tier: int) -> Profile:
    """The profile with its GPU cache (None: the profile's) and CPU tier set in bytes, each
    rounded down to whole chunks."""
    caches = {"cpu_tier_chunks": cpu_tier // profile.chunk_bytes}
    if gpu_cache is not None:
        caches["gpu_cache_chunks"] = gpu_cache // profile.chunk_bytes
    return Profile.model_validate(profile.model_dump() | caches)


def serve_command(args: argparse.Namespace, name: str = "sim serve") -> int:
    """Run the simulator the parsed options describe until Ctrl-C; 2 if they are bad."""
    try:
        faults = FaultConfig.model_validate_json(args.faults) if args.faults else FaultConfig()
        if args.read_limit:
            faults.read_bytes_per_s = bandwidth(args.read_limit)
        profile = tiered_profile(paced_profile(args.profile, args.prefill_tokens_per_s),
                                 args.gpu_cache, args.cpu_tier)
    except (ValidationError, ValueError) as exc:  # ValidationError first: it is a ValueError
        print(f"{name}: bad --faults or --read-limit or --prefill-tokens-per-s: {exc}",
              file=sys.stderr)
        return 2
    try:
        serve(profile, args.kv_dir, host=args.host, port=args.port, faults=faults)
    except OSError as exc:  # the port is taken, the host is not this machine's, the tier dir
        print(f"{name}: cannot serve on {args.host}:{args.port} with KV tier "
              f"{args.kv_dir or '(none)'}: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m gates.sim [options]`: parse ``argv`` (default sys.argv[1:]) and serve."""
    parser = build_parser()
    return serve_command(parser.parse_args(argv), parser.prog)
