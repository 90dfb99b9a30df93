"""The reference engine simulator: an OpenAI-compatible server with a real storage KV tier.

It imports nothing else of gates, so an arm running it is an honest, separate server. Run it as
`python -m gates.sim --profile tiny --port 8000` (or `kvgate sim serve`, the same options).
"""

from .cli import (
    SERVE_HELP,
    add_serve_options,
    bandwidth,
    build_parser,
    main,
    paced_profile,
    serve_command,
    serve_examples,
)
from .engine import (
    Engine,
)
from .model import (
    PROFILES,
    QWEN3_CODER_480B_KV_BYTES_PER_TOKEN,
    FaultConfig,
    LruCache,
    Profile,
    chat_ids,
    chunk_hashes,
    decode_seconds,
    fault_hits,
    get_profile,
    output_ids,
    plan_prefill,
    prefill_seconds,
    root_hash,
    text_ids,
    token_text,
)
from .payload import (
    HEADER,
    HEADER_SIZE,
    KEYSTREAM_SALT,
    chunk_payload,
    clean_digest,
    corrupt,
    is_corrupted,
    keystream_block,
    kv_digest,
    verify_payload,
)
from .server import (
    ENGINE,
    SIM_HEADER,
    build_app,
    serve,
)
from .tier import (
    KvTier,
    Throttle,
)
from .timers import (
    FineTimerSelector,
    fine_loop,
)

__all__ = [
    "ENGINE",
    "Engine",
    "FaultConfig",
    "FineTimerSelector",
    "HEADER",
    "HEADER_SIZE",
    "KEYSTREAM_SALT",
    "KvTier",
    "LruCache",
    "PROFILES",
    "Profile",
    "QWEN3_CODER_480B_KV_BYTES_PER_TOKEN",
    "SERVE_HELP",
    "SIM_HEADER",
    "Throttle",
    "add_serve_options",
    "bandwidth",
    "build_app",
    "build_parser",
    "chat_ids",
    "chunk_hashes",
    "chunk_payload",
    "clean_digest",
    "corrupt",
    "decode_seconds",
    "fault_hits",
    "fine_loop",
    "get_profile",
    "is_corrupted",
    "keystream_block",
    "kv_digest",
    "main",
    "output_ids",
    "paced_profile",
    "plan_prefill",
    "prefill_seconds",
    "root_hash",
    "serve",
    "serve_command",
    "serve_examples",
    "text_ids",
    "token_text",
    "verify_payload",
]
