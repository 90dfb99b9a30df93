"""The comparison as a sealed, signed page: <out>/compare-<when>-<runs>/comparison.*.

comparison.json (the Comparison with its own SHA-256), comparison.html (sealed, naming that
digest) and comparison.json.sig (when a key is configured), in a folder of its own inside the
reports folder, beside the run folders whose records it cites: `kvgate verify` of that folder
finds each cited record at ../<run_id>/<gate>.json, as it does for a summary, and re-derives
the rankings from the figures the comparison states (comparison_check.py).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TypeVar

from markupsafe import Markup
from pydantic import BaseModel

from ..core.quantities import format_size
from ..core.verdicts import json_digest
from ..store import write_new
from .comparison_model import GAINS, NO_RECORD, Comparison
from .layout import COMPARISON_HTML, COMPARISON_JSON
from .pages import PAGES, self_hashed
from .sealing import content_hash, record_meta, seal, seal_placeholder
from .signing import CONFIGURED, Signer, configured_signer, grouped, sig_path, statement
from .summary import SignerInfo

COMPARISON_HASH_KEY = "comparison_sha256"
P = TypeVar("P", bound=BaseModel)


def comparison_digest(body: dict) -> str:
    """SHA-256 of comparison.json without its own hash field (sorted keys, as written)."""
    return json_digest(body, (COMPARISON_HASH_KEY,))


def comparison_json(c: Comparison) -> str:
    """comparison.json's text: the comparison with its own SHA-256."""
    return self_hashed(c, COMPARISON_HASH_KEY)


def render_comparison(c: Comparison) -> str:
    """comparison.html, sealed with its own SHA-256, naming the digest of comparison.json."""
    digest = json.loads(comparison_json(c))[COMPARISON_HASH_KEY]
    html = PAGES.get_template("comparison.html.j2").render(
        c=c, GAINS=GAINS, NO_RECORD=NO_RECORD, grouped=grouped, format_size=format_size,
        seal_field=Markup(seal_placeholder()), record_meta=Markup(record_meta(digest)))
    return seal(html)[0]


def with_signer(page: P, signer: Signer | None | str) -> tuple[P, Signer | None]:
    """The page naming the key that will sign it, and that key (None: unsigned); signer as
    for write_summary: CONFIGURED, a Signer, or None."""
    key = configured_signer() if signer == CONFIGURED else signer
    if not isinstance(key, Signer):
        return page, None
    return page.model_copy(update={"signer": SignerInfo(fingerprint=key.public.fingerprint,
                                                        public_key=key.public.text)}), key


def write_comparison(out_dir: Path, c: Comparison,
                     signer: Signer | None | str = CONFIGURED) -> dict[str, Path]:
    """The comparison's folder in out_dir with its JSON, page and signature; never overwrites.

    signer as for write_summary: CONFIGURED ($KVGATE_SIGNING_KEY or the default key, if any),
    a Signer, or None (unsigned).
    """
    c, key = with_signer(c, signer)
    folder = out_dir / c.id
    if folder.exists():  # a comparison made in the same second of the same runs: refused
        raise FileExistsError(f"{folder} already exists; kvgate never overwrites a comparison")
    # Written whole in a hidden folder, then renamed: a failure (a full disk) leaves no half
    # comparison for verify to call altered.
    draft = out_dir / f".{c.id}.partial"
    draft.mkdir()
    try:
        files = _write(draft, c, key)
        draft.rename(folder)
    except BaseException:
        shutil.rmtree(draft, ignore_errors=True)
        raise
    return {kind: folder / path.name for kind, path in files.items()}


def _write(folder: Path, c: Comparison, key: Signer | None) -> dict[str, Path]:
    text, html = comparison_json(c), render_comparison(c)
    files = {"json": write_new(folder / COMPARISON_JSON, text),
             "html": write_new(folder / COMPARISON_HTML, html)}
    if key:
        signed = statement(COMPARISON_JSON, json.loads(text)[COMPARISON_HASH_KEY],
                           COMPARISON_HTML, content_hash(html))
        files["sig"] = write_new(sig_path(files["json"]),
                                 json.dumps(key.sign(signed), indent=2) + "\n")
    return files
