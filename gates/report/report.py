"""Sign-off reports: one static, sealed HTML file (no JavaScript) and the same record as JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
from markupsafe import Markup, escape
from pydantic import BaseModel

from ..core.configuration import Arm, SiteInfo
from ..core.verdicts import GateRecord, Measurement, Outcome
from ..store import Store, write_new
from .sealing import SEAL_ID, record_meta, seal, seal_placeholder
from .signing import (
    CONFIGURED,
    PublicKey,
    Signer,
    configured_signer,
    grouped,
    statement,
    write_signature,
)

# The revision of the report's format (sections, their order and meaning). Raise it when a
# reader comparing two reports of the same gate would otherwise be misled.
REPORT_REVISION = "1"

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("gates.report", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


BANDED = ("g1", "g3")  # the gates whose limits carry [decision] marginal_band


def decision_rule(record: GateRecord, statistic: str, confidence: float,
                  marginal_band: float) -> str:
    """The rule that turned measurements into this verdict, in words a reader can audit."""
    # The band is applied by G1's limits and G3's comparison; G2's and G4's rules decide on
    # their intervals and counts alone, so their reports do not claim it.
    band = (f"a pass within {marginal_band:g} % of a bound is MARGINAL; "
            if marginal_band and record.gate in BANDED else "")
    return (
        f"Each measurement is held against its limit from thresholds.toml (revision "
        f"{record.thresholds_revision}); bounds are inclusive unless the limit shows < or >. "
        f"Statistic: {statistic.replace('_', ' ')} at {confidence:.0%} confidence where an "
        f"interval is given (a PASS needs all of the interval inside the limit, a FAIL all of "
        f"it beyond one bound; an interval across a bound is MARGINAL); {band}a MARGINAL "
        "result is not a pass and needs a reviewer's "
        "waiver. The gate PASSES only if at least one measurement was taken and every "
        "applicable measurement passed; any FAIL makes it FAIL; otherwise any ERROR (not "
        "measured) makes it ERROR, any BLOCKED makes it BLOCKED. NOT APPLICABLE checks and "
        "REPORTED figures (measured, shown for the record: held against no limit, or a "
        "shortened G4 rehearsal's trend rule whose interval its few windows leave across the "
        "limit) do not count either way." + _design(record))


def _design(record: GateRecord) -> str:
    # G3's comparison is a design, not a formula: its record says which (the fact the G3
    # suite writes), and the rule a reader audits includes its stopping rule and risk.
    design = record.facts.get("comparison design", "")
    return f" Comparison (G3): {design}" if design else ""


def format_value(m: Measurement) -> str:
    """A measurement's value for a table cell: "5.23 GB/s", or "—" when unmeasured."""
    if m.value is None:
        return "—"
    text = f"{m.value:,.0f}" if abs(m.value) >= 1e4 else f"{m.value:,.4g}"
    return f"{text} {m.unit}".strip()


def format_margin(m: Measurement) -> str:
    """Distance to the limit with its sign and unit, e.g. "+1.2 GB/s"."""
    margin = m.margin
    if margin is None:
        return "—"
    text = f"{margin:+,.0f}" if abs(margin) >= 1e4 else f"{margin:+,.4g}"
    return f"{text} {m.unit}".strip()


def css_string(text: str) -> Markup:
    """Text as a quoted CSS string, safe inside <style> (which HTML does not unescape)."""
    escaped = "".join(c if c.isalnum() or c in " ./:-_·,()" else f"\\{ord(c):x} "
                      for c in str(text))
    return Markup(f'"{escaped}"')


def breakable(text: object) -> Markup:
    """Escaped text that may wrap after . _ / - : long keys and paths break at their parts."""
    return Markup(re.sub(r"([._/-])", r"\1<wbr>", str(escape(str(text)))))


_ENV.filters["value"] = format_value
_ENV.filters["margin"] = format_margin
_ENV.filters["css_string"] = css_string
_ENV.filters["breakable"] = breakable
_ENV.filters["fromjson"] = json.loads  # the record's site binding fact is JSON

# A shell line that zeroes the seal's digits and hashes the rest: the seal, recomputed by hand.
RECOMPUTE = (f"sed -E \"s/(id=\\\"{SEAL_ID}\\\">)[0-9a-f]{{64}}/\\1$(printf '%064d' 0)/\" "
             "FILE.html | sha256sum")

class ReportContext(BaseModel):
    """What a report shows besides its record, gathered by the session that ran the gate."""

    site: SiteInfo
    profile: str = ""
    profile_description: str = ""
    statistic: str = "point"
    confidence: float = 0.95
    marginal_band: float = 0.0
    target: str = ""
    thresholds_path: str = ""
    site_path: str = ""
    charts: dict[str, list[tuple[str, str]]] = {}  # gate: (title, inline SVG)
    simulated_arms: list[str] = []
    arms: list[dict[str, str]] = []  # arm_row() of each arm the gate measured
    retests: list[dict[str, str]] = []  # retest_rows(): earlier records of the gate


def render_html(record: GateRecord, context: ReportContext, rule: str = "",
                signer: PublicKey | None = None) -> str:
    """The gate's HTML report; a gate adds its own section template, not a copy of this one.

    It names the digest of the record it renders (a <meta> verify compares with the JSON) and
    the key that signs it, or says it is unsigned.
    """
    section = f"sections/{record.gate}.html.j2"
    has_section = section in _ENV.list_templates()
    return _ENV.get_template("report.html.j2").render(
        record=record, rows=record.ordered(), section=section if has_section else None,
        Outcome=Outcome, seal=Markup(seal_placeholder()), report_revision=REPORT_REVISION,
        recompute_seal=RECOMPUTE, **dict(context), rule=rule or decision_rule(
            record, context.statistic, context.confidence, context.marginal_band),
        record_meta=Markup(record_meta(record.sha256())), signer=signer, grouped=grouped,
        engine_versions={k: v for k, v in record.tool_versions.items()
                         if k.startswith("engine")})


def arm_row(name: str, arm: Arm, said: str = "") -> dict[str, str]:
    """One arm as the report lists it: how it was reached, which engine, where its KV went.

    The engine is what the arm's server said it is (``said``); an arm the gate never asked
    shows the site file's `engine =`, marked as such.
    """
    how = (f"launched: {' '.join(arm.command)}" if arm.kind == "launch"
           else f"endpoint: {', '.join(arm.urls)}")
    engine = said or f"{arm.engine} (site file; the server was not asked)"
    return {"name": name, "engine": engine, "model": arm.model or "—", "how": how,
            "kv_dir": str(arm.kv_dir) if arm.kv_dir else "none (recompute)"}


def retest_rows(store: Store, record: GateRecord) -> list[dict[str, str]]:
    """Earlier records of the same gate and site (retests), oldest first, as table rows."""
    return [{"run_id": r.run_id, "verdict": r.verdict.value, "finished": r.finished,
             "sha256": digest} for r, digest in store.earlier_records(record.gate, record.site,
                                                                      record.run_id)]


def write_reports(record: GateRecord, context: ReportContext, folder: Path,
                  signer: Signer | None | str = CONFIGURED) -> dict[str, Path]:
    """Write <gate>.html (sealed), <gate>.html.seal, <gate>.json and, signed, <gate>.json.sig.

    Files of an earlier run are never touched. The seal file holds the report's own SHA-256
    outside the report, so a summary or a bundle can list it without parsing HTML. signer is
    the performer's key (CONFIGURED: $KVGATE_SIGNING_KEY or the default key, if any; None:
    unsigned); its signature covers the record's digest and the sealed report's hash.
    """
    key = configured_signer() if signer == CONFIGURED else signer
    rule = decision_rule(record, context.statistic, context.confidence, context.marginal_band)
    body = json.loads(record.canonical_json())
    body["decision_rule"] = rule
    body["record_sha256"] = record.sha256()
    html, digest = seal(render_html(record, context, rule, key.public if key else None))
    name = f"{record.gate}.html"
    files = {
        "json": write_new(folder / f"{record.gate}.json", json.dumps(body, indent=2) + "\n"),
        "html": write_new(folder / name, html),
        "seal": write_new(folder / f"{name}.seal", f"{digest}  {name}\n"),
    }
    if isinstance(key, Signer):
        files["sig"] = write_signature(files["json"], key, statement(
            files["json"].name, body["record_sha256"], name, digest, decision_rule=rule))
    return files
