"""Procurement summary: a site's G1→G4 chain, key figures, costs and a recommendation.

One sealed static HTML page (gates/templates/summary.html.j2) and summary.json beside it, in
the run's folder. The chain is read from the store: each gate's record is this run's when it
has one, else the one the next gate stands on, else the site's latest.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jinja2
from markupsafe import Markup
from pydantic import BaseModel

from .. import __version__
from ..core import (
    GATE_TITLES,
    GATES,
    SHORTENED,
    SIMULATED_ENGINE,
    GateRecord,
    Outcome,
    json_digest,
    upstream_gate,
)
from ..model import Catalog, CatalogError, load_catalog
from ..store import Store, utc_now, write_new
from .figures import CostSection, KeyFigure, cost_section, key_figures, model_facts
from .sealing import seal, seal_placeholder

ACCEPT, NOT_READY = "ACCEPT", "NOT READY FOR SIGN-OFF"
SIMULATED = SIMULATED_ENGINE
SUMMARY_HASH_KEY = "summary_sha256"
ITEMS_TESTED = ("The results apply only to the items tested, in the configuration and at the "
                "time recorded in each gate report.")


class ChainLink(BaseModel):
    """One gate of the chain: the record the summary uses and whether its link holds."""

    gate: str
    title: str
    source: str  # "this run", "cited by G3", "latest for the site", "none"
    run_id: str = ""
    verdict: str = "NO RECORD"
    record_sha256: str = ""
    link_ok: bool | None = None  # None: first gate, or no record
    link_note: str = ""
    report: str = ""  # relative to the summary
    limits_profile: str = ""
    forced: bool = False
    simulated: bool = False
    shortened: bool = False
    key_figures: list[KeyFigure] = []


class Deviation(BaseModel):
    """A deviation a chain record carries; none can be closed yet, so every one is open."""

    gate: str
    run_id: str
    text: str


class Recommendation(BaseModel):
    """ACCEPT, or NOT READY FOR SIGN-OFF with every reason."""

    status: Literal["ACCEPT", "NOT READY FOR SIGN-OFF"]
    reasons: list[str] = []

    @property
    def text(self) -> str:
        """The recommendation in one line."""
        return self.status if not self.reasons else f"{self.status}: {'; '.join(self.reasons)}"


class Summary(BaseModel):
    """Everything summary.html shows, as summary.json holds it."""

    kind: Literal["kvgate procurement summary"] = "kvgate procurement summary"
    site: str
    run_id: str
    created: str
    kvgate_version: str = __version__
    recommendation: Recommendation
    chain: list[ChainLink]
    cost: CostSection
    deviations: list[Deviation]
    banners: list[str]
    statement: str = ITEMS_TESTED


@dataclass
class Found:
    """A record with the SHA-256 the store holds for it (the hash it was cited by)."""

    record: GateRecord
    sha256: str


def _stored(store: Store, run_id: str, gate: str) -> Found | None:
    # The stored hash, not a recomputed one: records written before a field was added to
    # GateRecord re-serialise differently, but were cited by the hash they had.
    found = store.record(run_id, gate)
    return Found(*found) if found else None


def choose_records(store: Store, site: str, run_id: str) -> dict[str, tuple[Found | None, str]]:
    """Per gate, the record the summary uses and where it came from, G4 first."""
    chosen: dict[str, tuple[Found | None, str]] = {}
    below: Found | None = None
    for gate in reversed(GATES):
        found, source = _stored(store, run_id, gate), "this run"
        ref = below.record.upstream if below else None
        if found is None and ref and ref.gate == gate:
            found = _stored(store, ref.run_id, gate)
            source = f"cited by {below.record.gate.upper()}"
        if found is None:
            latest = store.latest_record(gate, site)
            found, source = (Found(*latest), "latest for the site") if latest else (None, "none")
        chosen[gate], below = (found, source), found
    return chosen


def link_status(found: Found | None, upstream: Found | None) -> tuple[bool | None, str]:
    """Whether a record cites exactly the upstream record shown below it in the chain."""
    if found is None:
        return None, "no record"
    before = upstream_gate(found.record.gate)
    ref = found.record.upstream
    if before is None:
        return None, "first gate"
    if ref is None:
        return False, f"cites no {before.upper()} record"
    if upstream is None:
        return False, f"cites {before.upper()} of run {ref.run_id}, which the store lacks"
    if ref.record_sha256 != upstream.sha256:
        return False, (f"cites {before.upper()} run {ref.run_id} ({ref.record_sha256[:16]}…), "
                       f"not the {before.upper()} record shown (run {upstream.record.run_id})")
    return True, f"cites {before.upper()} run {ref.run_id}, SHA-256 matches"


def chain_link(gate: str, found: Found | None, source: str, upstream: Found | None,
               run_id: str) -> ChainLink:
    """The summary's row for one gate."""
    ok, note = link_status(found, upstream)
    base = ChainLink(gate=gate, title=GATE_TITLES[gate], source=source, link_ok=ok,
                     link_note=note, key_figures=key_figures(gate, found and found.record))
    if found is None:
        return base
    r = found.record
    return base.model_copy(update=dict(
        run_id=r.run_id, verdict=r.verdict.value, record_sha256=found.sha256,
        report=f"{gate}.html" if r.run_id == run_id else f"../{r.run_id}/{gate}.html",
        limits_profile=r.limits_profile, forced=r.forced,
        simulated=any(d.lower().startswith(SIMULATED) for d in r.deviations),
        shortened=any(d.startswith(SHORTENED.split(":")[0]) for d in r.deviations)))


def rehearsal_reasons(link: ChainLink) -> list[str]:
    """Why a gate's record, whatever its verdict, cannot stand for a sign-off."""
    return ([f'limits profile "{link.limits_profile}", not the ordered array\'s limits']
            if link.limits_profile else []) + \
        (["simulated engine"] if link.simulated else []) + \
        (["shortened rehearsal"] if link.shortened else []) + \
        (["forced past the upstream gate"] if link.forced else [])


def gate_reasons(link: ChainLink) -> list[str]:
    """Everything that keeps one gate from counting towards ACCEPT."""
    if not link.run_id:
        return ["no record"]
    return ([f"did not pass ({link.verdict})"] if link.verdict != Outcome.PASS.value else []) \
        + ([f"chain link does not verify ({link.link_note})"] if link.link_ok is False else []) \
        + rehearsal_reasons(link)


def recommend(chain: list[ChainLink]) -> Recommendation:
    """ACCEPT only when G1–G4 all PASS on real, full-length runs whose chain holds."""
    present = {link.gate: link for link in chain}
    by_reason: dict[str, list[str]] = {}
    for gate in GATES:
        link = present.get(gate) or ChainLink(gate=gate, title=GATE_TITLES[gate], source="none")
        for reason in gate_reasons(link):
            by_reason.setdefault(reason, []).append(gate.upper())
    reasons = [f"{reason}: {', '.join(gates)}" for reason, gates in by_reason.items()]
    return Recommendation(status=NOT_READY if reasons else ACCEPT, reasons=reasons)


def banners(chain: list[ChainLink], profile_description: str) -> list[str]:
    """The demo, simulator and rehearsal warnings the page opens with."""
    profiles = sorted({link.limits_profile for link in chain if link.limits_profile})
    sim = [link.gate.upper() for link in chain if link.simulated]
    short = [link.gate.upper() for link in chain if link.shortened]
    why = profile_description or "the absolute limits are not the ordered array's, so this is " \
        "not a sign-off"
    return ([f"Limits profile {', '.join(profiles)}: {why}."]
            if profiles else []) + \
        ([f"Simulated engine — not valid for procurement: {', '.join(sim)} ran kvgate's "
          "reference engine simulator, not a real inference engine."] if sim else []) + \
        ([f"Shortened rehearsal: {', '.join(short)} did not run the full duration of "
          "thresholds.toml."] if short else [])


def _catalog(path: Path | None) -> tuple[Catalog | None, str]:
    if path is None:
        return None, ""
    try:
        return load_catalog(path), str(path)
    except CatalogError as exc:
        return None, str(exc)


def build_summary(store: Store, site: str, run_id: str, *,
                  array: str = "", catalog: Path | None = None,
                  profile_description: str = "") -> Summary:
    """The summary of a site's chain as seen from one run."""
    chosen = choose_records(store, site, run_id)
    chain = [chain_link(g, *chosen[g], chosen[b][0] if (b := upstream_gate(g)) else None,
                        run_id) for g in GATES]
    records = {g: f.record if f else None for g, (f, _) in chosen.items()}
    loaded, note = _catalog(catalog)
    cost = cost_section(array, loaded, note, {c.gate: c.key_figures for c in chain},
                        model_facts(records))
    deviations = [Deviation(gate=g, run_id=r.run_id, text=d)
                  for g, r in sorted(records.items()) if r for d in r.deviations]
    return Summary(site=site, run_id=run_id, created=utc_now(), recommendation=recommend(chain),
                   chain=chain, cost=cost, deviations=deviations,
                   banners=banners(chain, profile_description))


def summary_digest(body: dict) -> str:
    """SHA-256 of summary.json without its own hash field (sorted keys, as written)."""
    return json_digest(body, (SUMMARY_HASH_KEY,))


def summary_json(summary: Summary) -> str:
    """summary.json's text: the summary with its own SHA-256."""
    body = json.loads(summary.model_dump_json())
    body[SUMMARY_HASH_KEY] = summary_digest(body)
    return json.dumps(body, sort_keys=True, indent=2) + "\n"


def _css_string(text: str) -> Markup:
    # Inside <style> nothing is HTML-decoded: escape for CSS, so no text can close the string.
    return Markup("".join(c if c.isalnum() or c in " -_.:/" else f"\\{ord(c):x} " for c in text))


_ENV = jinja2.Environment(loader=jinja2.PackageLoader("gates.report", "templates"),
                          autoescape=jinja2.select_autoescape(["html", "j2"]),
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_ENV.filters["css_string"] = _css_string


def render_summary(summary: Summary) -> str:
    """summary.html, sealed with its own SHA-256."""
    html = _ENV.get_template("summary.html.j2").render(
        s=summary, seal_field=Markup(seal_placeholder()), ACCEPT=ACCEPT)
    return seal(html)[0]


def write_summary(store: Store, site_name: str, run_id: str, **options) -> dict[str, Path]:
    """Write <out>/<run_id>/summary.html and summary.json; never overwrites either."""
    summary = build_summary(store, site_name, run_id, **options)
    folder = store.run_dir(run_id)
    return {"json": write_new(folder / "summary.json", summary_json(summary)),
            "html": write_new(folder / "summary.html", render_summary(summary))}
