"""Procurement summary: a site's G1→G4 chain, key figures, costs and a recommendation.

One sealed static HTML page (gates/templates/summary.html.j2) and summary.json beside it, in
the run's folder, signed like a gate record (summary.json.sig) when a key is configured. The
chain is read from the store (chain.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import jinja2
from markupsafe import Markup
from pydantic import BaseModel

from .. import __version__
from ..core import GATE_TITLES, GATES, Outcome, json_digest, upstream_gate
from ..model import Catalog, CatalogError, load_catalog
from ..store import Store, utc_now, write_new
from .chain import ChainLink, chain_link, choose_records
from .figures import CostSection, cost_section, model_facts
from .sealing import content_hash, record_meta, seal, seal_placeholder
from .signing import CONFIGURED, Signer, configured_signer, grouped, statement, write_signature

ACCEPT, NOT_READY = "ACCEPT", "NOT READY FOR SIGN-OFF"
SUMMARY_HASH_KEY = "summary_sha256"
ITEMS_TESTED = ("The results apply only to the items tested, in the configuration and at the "
                "time recorded in each gate report.")


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


class SignerInfo(BaseModel):
    """The key that signs the summary (summary.json.sig): its fingerprint and public key."""

    algorithm: Literal["ed25519"] = "ed25519"
    fingerprint: str
    public_key: str  # the raw key, base64


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
    signer: SignerInfo | None = None  # None: unsigned
    statement: str = ITEMS_TESTED


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
                  profile_description: str = "", signer: Signer | None = None) -> Summary:
    """The summary of a site's chain as seen from one run (signer: the key that will sign)."""
    chosen = choose_records(store, site, run_id)
    chain = [chain_link(g, *chosen[g], chosen[b][0] if (b := upstream_gate(g)) else None,
                        run_id, store.out_dir) for g in GATES]
    records = {g: f.record if f else None for g, (f, _) in chosen.items()}
    loaded, note = _catalog(catalog)
    cost = cost_section(array, loaded, note, {c.gate: c.key_figures for c in chain},
                        model_facts(records))
    deviations = [Deviation(gate=g, run_id=r.run_id, text=d)
                  for g, r in sorted(records.items()) if r for d in r.deviations]
    return Summary(site=site, run_id=run_id, created=utc_now(), recommendation=recommend(chain),
                   chain=chain, cost=cost, deviations=deviations,
                   banners=banners(chain, profile_description),
                   signer=signer and SignerInfo(fingerprint=signer.public.fingerprint,
                                                public_key=signer.public.text))


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
    """summary.html, sealed with its own SHA-256, naming the digest of its summary.json."""
    digest = json.loads(summary_json(summary))[SUMMARY_HASH_KEY]
    html = _ENV.get_template("summary.html.j2").render(
        s=summary, seal_field=Markup(seal_placeholder()), ACCEPT=ACCEPT, grouped=grouped,
        record_meta=Markup(record_meta(digest)))
    return seal(html)[0]


def write_summary(store: Store, site_name: str, run_id: str,
                  signer: Signer | None | str = CONFIGURED, **options) -> dict[str, Path]:
    """Write summary.html and summary.json (and .sig when signed); never overwrites one.

    signer as for write_reports: CONFIGURED ($KVGATE_SIGNING_KEY or the default key, if any),
    a Signer, or None (unsigned).
    """
    key = configured_signer() if signer == CONFIGURED else signer
    key = key if isinstance(key, Signer) else None
    summary = build_summary(store, site_name, run_id, signer=key, **options)
    folder = store.run_dir(run_id)
    text, html = summary_json(summary), render_summary(summary)
    files = {"json": write_new(folder / "summary.json", text),
             "html": write_new(folder / "summary.html", html)}
    if key:
        files["sig"] = write_signature(files["json"], key, statement(
            "summary.json", json.loads(text)[SUMMARY_HASH_KEY], "summary.html", content_hash(html)))
    return files
