"""Browser check of the comparison page (kvgate compare): Chromium prints it to PDF at Letter
and A4; every page carries the comparison's id and "page X of Y", and the ranking, the "not
distinguishable" case, the prices and the sign-off are in the printed text.

Three candidates on chains in a real store (tests/test_compare.py): a fast tier, a slow one and
one as fast as the slow one, so one ranking holds an order and a tie. Skipped with
test_browser where Chromium is absent.
"""

from __future__ import annotations

import json

import pytest
from test_browser import A4, CHROMIUM, LETTER, chromium, page_texts, squeezed, with_paper
from test_compare import chain, gains

from gates.model import SHIPPED_CATALOG, load_catalog
from gates.report import compare, new_key, write_comparison
from gates.report.signing import load_signer
from gates.store import Store

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Chromium is not installed (apt-get install chromium)")
pypdf = pytest.importorskip("pypdf")


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """The signed comparison of three candidates, printed at Letter and A4."""
    root = tmp_path_factory.mktemp("comparison")
    reports = root / "reports"
    signer = load_signer(new_key(root / "key" / "k")[0])
    with Store(reports) as store:
        chain(store, "run-fast", gains(60.0, 45.0))
        chain(store, "run-slow", gains(30.0, 31.0))
        chain(store, "run-same", gains(31.0, 30.0))
        c = compare(store, [("run-slow", "FX100"), ("run-same", "FX200"),
                            ("run-fast", "FX300")], load_catalog(SHIPPED_CATALOG))
    files = write_comparison(reports, c, signer)
    out = {"body": json.loads(files["json"].read_text()), "letter": root / "letter.pdf",
           "a4": root / "a4.pdf", "id": files["json"].parent.name}
    profile = root / "chromium-profile"
    chromium(profile, f"--print-to-pdf={out['letter']}", "--no-pdf-header-footer",
             files["html"].as_uri())
    a4 = with_paper(files["html"], "A4", root / "comparison-a4.html")
    chromium(profile, f"--print-to-pdf={out['a4']}", "--no-pdf-header-footer", a4.as_uri())
    return out


@pytest.mark.parametrize("paper", ["letter", "a4"])
def test_every_page_carries_the_comparison_id_and_page_x_of_y(printed, paper):
    reader = pypdf.PdfReader(printed[paper])
    box = reader.pages[0].mediabox
    assert (round(box.width), round(box.height)) == (LETTER if paper == "letter" else A4)
    texts = page_texts(printed[paper])
    assert 1 <= len(texts) <= 5
    cid = squeezed(f"kvgate comparison {printed['id']}")
    for number, text in enumerate(texts, start=1):
        assert f"page {number} of {len(texts)}" in text
        assert cid in squeezed(text) and "Results apply only to the items tested." in text


@pytest.mark.parametrize("paper", ["letter", "a4"])
def test_the_pdf_shows_the_order_the_tie_the_prices_and_the_sign_off(printed, paper):
    texts = page_texts(printed[paper])
    flat = squeezed("".join(texts))
    body = printed["body"]
    ttft8 = next(r for r in body["rankings"] if (r["id"], r["at"]) ==
                 ("g3.ttft_p50_reduction", 8))
    assert [(x["estimate"]["name"], x["rank"]) for x in ttft8["ranked"]] == [
        ("FX300", 1), ("FX200", 2), ("FX100", 2)]
    assert squeezed("TTFT p50 reduction at concurrency 8") in flat
    assert squeezed("1 FX300 60.0 % [56.0, 64.0] %") in flat  # rank, name, point, interval
    assert squeezed("Not distinguishable from") in flat and squeezed("FX100, FX200") in flat
    assert squeezed(body["risk"]) in flat
    assert squeezed("¥924,000") in flat and squeezed("¥15,400") in flat  # FX300 price, per pt
    assert "Sign-off" in texts[-1] and "Witness" in texts[-1]
    assert squeezed(body["columns"][0]["records"][0]["record_sha256"]) in flat
