"""The reference engine simulator: an OpenAI-compatible server with a real storage KV tier.

It imports nothing else of gates, so an arm running it is an honest, separate server. Run it as
`python -m gates.sim --profile tiny --port 8000` (or `kvgate sim serve`, the same options).
"""

from .cli import SERVE_HELP, add_serve_options, serve_command, serve_examples

__all__ = [
    "SERVE_HELP",
    "add_serve_options",
    "serve_command",
    "serve_examples",
]
