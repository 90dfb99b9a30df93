"""The Jinja environment of the summary and comparison pages (gate reports have their own)."""

from __future__ import annotations

import json

import jinja2
from markupsafe import Markup
from pydantic import BaseModel

from ..core.verdicts import json_digest


def css_text(text: str) -> Markup:
    """Text for inside a quoted CSS string: nothing in <style> is HTML-decoded, so every
    character that could close the string or the element is a CSS escape."""
    return Markup("".join(c if c.isalnum() or c in " -_.:/" else f"\\{ord(c):x} " for c in text))


PAGES = jinja2.Environment(loader=jinja2.PackageLoader("gates.report", "templates"),
                           autoescape=jinja2.select_autoescape(["html", "j2"]),
                           undefined=jinja2.StrictUndefined, trim_blocks=True,
                           lstrip_blocks=True)
PAGES.filters["css_string"] = css_text


def self_hashed(model: BaseModel, key: str) -> str:
    """A page's JSON text (sorted keys) with its own SHA-256 under key, over all but that key."""
    body = json.loads(model.model_dump_json())
    body[key] = json_digest(body, (key,))
    return json.dumps(body, sort_keys=True, indent=2) + "\n"
