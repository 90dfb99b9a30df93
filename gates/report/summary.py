"""Procurement summary: a site's G1→G4 chain, key figures, costs and a recommendation.

One sealed static HTML page (gates/templates/summary.html.j2) and summary.json beside it, in
the run's folder, signed like a gate record (summary.json.sig) when a key is configured. The
chain is read from the store (chain.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from markupsafe import Markup
from pydantic import BaseModel

from .. import __version__
from ..core.verdicts import GATE_TITLES, GATES, Outcome, json_digest, upstream_gate
from ..model import Catalog, CatalogError, load_catalog
from ..store import Store, utc_now, write_new
from .chain import ChainLink, chain_link, choose_records
from .figures import CostSection, cost_section, model_facts
from .pages import PAGES, self_hashed
from .sealing import content_hash, record_meta, seal, seal_placeholder
from .signing import (
    CONFIGURED,
    SignatureProblem,
    Signer,
    configured_signer,
    grouped,
    read_signature,
    sig_path,
    statement,
    strict_json,
)
from .waivers import (
    ChainDeviation,
    machine_keys,
    trusted_waivers,
    waiver_for,
    waiver_problems,
)

ACCEPT, NOT_READY = "ACCEPT", "NOT READY FOR SIGN-OFF"
SUMMARY_HASH_KEY = "summary_sha256"
ITEMS_TESTED = ("The results apply only to the items tested, in the configuration and at the "
                "time recorded in each gate report.")


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
    deviations: list[ChainDeviation]
    banners: list[str]
    signer: SignerInfo | None = None  # None: unsigned
    statement: str = ITEMS_TESTED
    revision: int = 1  # raised each time `kvgate waive` re-issues the summary
    supersedes: str = ""  # the summary_sha256 of the revision this one replaced


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


def recommend(chain: list[ChainLink],
              deviations: list[ChainDeviation] = ()) -> Recommendation:
    """ACCEPT only when G1–G4 all PASS on real, full-length runs whose chain holds, and no
    deviation that can change a verdict's meaning is open (unwaived)."""
    present = {link.gate: link for link in chain}
    by_reason: dict[str, list[str]] = {}
    for gate in GATES:
        link = present.get(gate) or ChainLink(gate=gate, title=GATE_TITLES[gate], source="none")
        for reason in gate_reasons(link):
            by_reason.setdefault(reason, []).append(gate.upper())
    reasons = [f"{reason}: {', '.join(gates)}" for reason, gates in by_reason.items()]
    reasons += [f"open deviation ({d.gate.upper()}, run {d.run_id}): {_short(d.text)} — re-run, "
                "or waive it (kvgate waive)" for d in deviations if d.open]
    return Recommendation(status=NOT_READY if reasons else ACCEPT, reasons=reasons)


def _short(text: str, most: int = 120) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"


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
    waivers = trusted_waivers(store.waivers(), machine_keys())[0]  # never an untrusted one
    deviations = [ChainDeviation(gate=g, run_id=r.run_id, text=d.text, cause=d.cause,
                                 waiver=waiver_for(waivers, g, r.run_id, d.text))
                  for g, r in sorted(records.items()) if r for d in r.deviations]
    return Summary(site=site, run_id=run_id, created=utc_now(),
                   recommendation=recommend(chain, deviations),
                   chain=chain, cost=cost, deviations=deviations,
                   banners=banners(chain, profile_description),
                   signer=signer and SignerInfo(fingerprint=signer.public.fingerprint,
                                                public_key=signer.public.text))


def summary_findings(body: dict, carried) -> tuple[list[str], list[str]]:
    """(problems, waiver signers) of a summary.json's content: every waiver holds and names a
    deviation its record carries (``carried(run, gate)``: that record's deviations, or None),
    and the recommendation is the one its own chain and deviations give."""
    try:
        summary = Summary.model_validate({k: v for k, v in body.items()
                                          if k != SUMMARY_HASH_KEY})
    except ValueError as exc:
        return [f"not a kvgate summary ({str(exc).splitlines()[0]})"], []
    problems, signers = waiver_problems(
        [d.waiver for d in summary.deviations if d.waiver], carried)
    due = recommend(summary.chain, summary.deviations)
    if due != summary.recommendation:
        problems.append(f"it recommends {summary.recommendation.status}, but its own chain and "
                        f"deviations give {_short(due.text, 200)}")
    return problems, signers


def summary_digest(body: dict) -> str:
    """SHA-256 of summary.json without its own hash field (sorted keys, as written)."""
    return json_digest(body, (SUMMARY_HASH_KEY,))


def summary_json(summary: Summary) -> str:
    """summary.json's text: the summary with its own SHA-256."""
    return self_hashed(summary, SUMMARY_HASH_KEY)


def render_summary(summary: Summary) -> str:
    """summary.html, sealed with its own SHA-256, naming the digest of its summary.json."""
    digest = json.loads(summary_json(summary))[SUMMARY_HASH_KEY]
    html = PAGES.get_template("summary.html.j2").render(
        s=summary, seal_field=Markup(seal_placeholder()), ACCEPT=ACCEPT, grouped=grouped,
        record_meta=Markup(record_meta(digest)))
    return seal(html)[0]


def _files(folder: Path, summary: Summary, key: Signer | None, write) -> dict[str, Path]:
    text, html = summary_json(summary), render_summary(summary)
    files = {"json": write(folder / "summary.json", text),
             "html": write(folder / "summary.html", html)}
    if key:
        signed = statement("summary.json", json.loads(text)[SUMMARY_HASH_KEY], "summary.html",
                           content_hash(html))
        files["sig"] = write(sig_path(files["json"]), json.dumps(key.sign(signed), indent=2)
                             + "\n")
    return files


def _replace(path: Path, text: str) -> Path:
    """Write a file in place of its earlier revision, whole or not at all (rename)."""
    fresh = path.with_name(path.name + ".new")
    write_new(fresh, text)
    os.replace(fresh, path)
    return path


def reissue_summary(store: Store, run_id: str, signer: Signer) -> tuple[Summary, dict]:
    """summary.json/.html/.sig re-issued from the store (a waiver added), as the next revision.

    The one file kvgate re-issues: the summary is a view of the records, which never change.
    The revision it replaces must be intact (hash and signature); the new one names its hash
    (supersedes) and keeps its cost section and banners, which no waiver changes.
    """
    folder = store.run_dir(run_id)
    try:
        old = strict_json((folder / "summary.json").read_text())
        if summary_digest(old) != old.get(SUMMARY_HASH_KEY):
            raise ValueError("it was altered (its SHA-256 no longer matches)")
        if sig_path(folder / "summary.json").is_file():
            signed, _ = read_signature(sig_path(folder / "summary.json"))
            if signed.get("sha256") != old[SUMMARY_HASH_KEY]:
                raise ValueError("its signature does not sign it")
        previous = Summary.model_validate({k: v for k, v in old.items()
                                           if k != SUMMARY_HASH_KEY})
    except (OSError, ValueError, SignatureProblem) as exc:
        raise ValueError(f"{folder / 'summary.json'}: not re-issued: {exc}") from None
    fresh = build_summary(store, previous.site, run_id, signer=signer)
    summary = fresh.model_copy(update={"cost": previous.cost, "banners": previous.banners,
                                       "revision": previous.revision + 1,
                                       "supersedes": old[SUMMARY_HASH_KEY]})
    return summary, _files(folder, summary, signer, _replace)


def write_summary(store: Store, site_name: str, run_id: str,
                  signer: Signer | None | str = CONFIGURED, **options) -> dict[str, Path]:
    """Write summary.html and summary.json (and .sig when signed); never overwrites one.

    signer as for write_reports: CONFIGURED ($KVGATE_SIGNING_KEY or the default key, if any),
    a Signer, or None (unsigned).
    """
    key = configured_signer() if signer == CONFIGURED else signer
    key = key if isinstance(key, Signer) else None
    summary = build_summary(store, site_name, run_id, signer=key, **options)
    return _files(store.run_dir(run_id), summary, key, write_new)
