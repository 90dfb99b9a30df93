"""Sign-off reports: one static HTML file (no JavaScript) and the same record as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from ._record import GateRecord
from ._store import write_new
from ._verdict import Measurement, Outcome

if TYPE_CHECKING:
    from ._session import GateSession

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("gates", "templates"),
    autoescape=jinja2.select_autoescape(["html", "j2"]),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def decision_rule(record: GateRecord, statistic: str, confidence: float,
                  marginal_band: float) -> str:
    """The rule that turned measurements into this verdict, in words a reader can audit."""
    band = (f"a pass within {marginal_band:g} % of a bound is MARGINAL; " if marginal_band
            else "")
    return (
        f"Each measurement is held against its limit from thresholds.toml (revision "
        f"{record.thresholds_revision}); bounds are inclusive unless the limit shows < or >. "
        f"Statistic: {statistic.replace('_', ' ')} at {confidence:.0%} confidence where an "
        f"interval is given; {band}a MARGINAL result is not a pass and needs a reviewer's "
        "waiver. The gate PASSES only if at least one measurement was taken and every "
        "applicable measurement passed; any FAIL makes it FAIL; otherwise any ERROR (not "
        "measured) makes it ERROR, any BLOCKED makes it BLOCKED. NOT APPLICABLE checks do not "
        "count either way.")


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


_ENV.filters["value"] = format_value
_ENV.filters["margin"] = format_margin


def render_html(record: GateRecord, context: dict) -> str:
    """The gate's HTML report; a gate adds its own section template, not a copy of this one."""
    section = f"sections/{record.gate}.html.j2"
    has_section = section in _ENV.list_templates()
    return _ENV.get_template("report.html.j2").render(
        record=record, rows=record.ordered(), section=section if has_section else None,
        Outcome=Outcome, **context)


def report_context(session: GateSession) -> dict:
    """Facts every report shows besides the record: site, profile, decision rule inputs."""
    th = session.thresholds
    return {
        "site": session.site.site,
        "profile": th.profile,
        "profile_description": th.profile_description,
        "statistic": th.decision.statistic,
        "confidence": th.decision.confidence,
        "marginal_band": th.decision.marginal_band,
        "target": str(session.site.target.directory),
        "thresholds_path": session.thresholds_file.path,
        "site_path": session.site_file.path,
        "charts": session.charts,
        "simulated_arms": sorted(name for name, arm in session.site.arms.items()
                                 if arm.engine == "kvgate-sim"),
    }


def write_reports(record: GateRecord, session: GateSession) -> dict[str, Path]:
    """Write <run>/<gate>.html and <gate>.json; files of an earlier run are never touched."""
    folder = session.store.run_dir(record.run_id)
    context = report_context(session)
    context["rule"] = decision_rule(record, context["statistic"], context["confidence"],
                                    context["marginal_band"])
    body = json.loads(record.canonical_json())
    body["decision_rule"] = context["rule"]
    body["record_sha256"] = record.sha256()
    return {
        "json": write_new(folder / f"{record.gate}.json", json.dumps(body, indent=2) + "\n"),
        "html": write_new(folder / f"{record.gate}.html", render_html(record, context)),
    }
