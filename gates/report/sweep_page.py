"""A working-set sweep as a sealed, signed page: <out>/sweep-<run_id>/sweep.{json,html,json.sig}.

sweep.json is the SweepRecord with its own SHA-256; sweep.html is sealed and names that digest;
sweep.json.sig signs both when a key is configured. It is not a gate record: it states where
the candidate starts to pay and where the proof holds, and has no verdict. Written whole in a
hidden folder and renamed, as a comparison is, so a failure leaves no half sweep.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from markupsafe import Markup
from pydantic import BaseModel

from .. import __version__
from ..charts import GainBand, WorkingSetPoint, working_set_chart
from ..core.configuration import Decision
from ..core.quantities import format_size
from ..inference import SweepPoint
from ..model import SweepForecast, Tier
from ..store import write_new
from .comparison_page import with_signer
from .layout import SWEEP_HTML, SWEEP_JSON
from .pages import PAGES, self_hashed
from .sealing import content_hash, record_meta, seal, seal_placeholder
from .signing import CONFIGURED, Signer, grouped, sig_path, statement
from .summary import ITEMS_TESTED, SignerInfo

SWEEP_HASH_KEY = "sweep_sha256"


class SweepRecord(BaseModel):
    """What `kvgate sweep` states: each working set's paired gains and proof, no verdict."""

    kind: str = "kvgate working-set sweep"
    run_id: str
    created: str
    site: str
    engine: str
    simulated: bool
    workload_hash: str  # of the workload at the first size (the sizes differ in contexts only)
    thresholds_revision: str
    thresholds_sha256: str
    concurrency: int
    pairs: int  # per size
    context_bytes: int  # KV of one context
    points: list[SweepPoint]
    tiers: list[Tier] = []
    break_even: int | None = None  # bytes: from here up every point clears both G3 limits
    proof_from: int | None = None  # bytes: from here up the chain proves storage reads
    forecast: SweepForecast | None = None  # the KV model's line; None: notes say why not
    sizes_planned: int = 0
    decision: Decision = Decision()  # the rule that says whether a point clears (thresholds)
    evidence: dict[str, str] = {}  # the run's evidence files (run-relative) and their SHA-256
    notes: list[str] = []
    kvgate_version: str = __version__
    signer: SignerInfo | None = None
    statement: str = ITEMS_TESTED

    @property
    def id(self) -> str:
        """The sweep's folder name in the reports folder."""
        return f"sweep-{self.run_id}"


def _band(figure) -> GainBand | None:
    return GainBand(point=figure.point, lo=figure.lo, hi=figure.hi) if figure else None


def sweep_chart(r: SweepRecord) -> str:
    """The chart of both gains against the working set, the tiers marked."""
    points = [WorkingSetPoint(working_set=p.working_set, ttft_reduction=_band(p.ttft_reduction),
                              throughput_gain=_band(p.throughput_gain), proven=p.proven,
                              proof=p.proof_word)
              for p in r.points if not p.error]
    first = next((p for p in r.points if p.ttft_reduction and p.throughput_gain), None)
    limits = ((first.ttft_reduction.limit, first.throughput_gain.limit)  # type: ignore[union-attr]
              if first else (0.0, 0.0))
    predicted = [(p.working_set, p.ttft_reduction) for p in r.forecast.points] \
        if r.forecast else None
    return working_set_chart(points, limits[0], limits[1], {t.name: t.bytes for t in r.tiers},
                             predicted)


def sweep_json(r: SweepRecord) -> str:
    """sweep.json's text: the record with its own SHA-256."""
    return self_hashed(r, SWEEP_HASH_KEY)


def render_sweep(r: SweepRecord) -> str:
    """sweep.html, sealed with its own SHA-256, naming the digest of sweep.json."""
    digest = json.loads(sweep_json(r))[SWEEP_HASH_KEY]
    html = PAGES.get_template("sweep.html.j2").render(
        r=r, chart=Markup(sweep_chart(r)) if r.points else "", format_size=format_size,
        grouped=grouped, seal_field=Markup(seal_placeholder()),
        record_meta=Markup(record_meta(digest)))
    return seal(html)[0]


def write_sweep(out_dir: Path, r: SweepRecord,
                signer: Signer | None | str = CONFIGURED) -> dict[str, Path]:
    """The sweep's folder in out_dir with its JSON, page and signature; never overwrites."""
    r, key = with_signer(r, signer)
    folder = out_dir / r.id
    if folder.exists():
        raise FileExistsError(f"{folder} already exists; kvgate never overwrites a sweep")
    draft = out_dir / f".{r.id}.partial"
    shutil.rmtree(draft, ignore_errors=True)  # a sweep killed while writing its page
    draft.mkdir()
    try:
        text, html = sweep_json(r), render_sweep(r)
        files = {"json": write_new(draft / SWEEP_JSON, text),
                 "html": write_new(draft / SWEEP_HTML, html)}
        if key:
            signed = statement(SWEEP_JSON, json.loads(text)[SWEEP_HASH_KEY], SWEEP_HTML,
                               content_hash(html))
            files["sig"] = write_new(sig_path(files["json"]),
                                     json.dumps(key.sign(signed), indent=2) + "\n")
        draft.rename(folder)
    except BaseException:
        shutil.rmtree(draft, ignore_errors=True)
        raise
    return {kind: folder / path.name for kind, path in files.items()}
