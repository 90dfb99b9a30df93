"""Browser check: Chromium renders each gate report and the procurement summary, screenshots
them and prints them to PDF.

Skipped where Chromium is absent (CI installs Debian's `chromium`). The reports are the ones
test_report builds through the real GateSession: every outcome, charts, evidence, checklist.
The summary is write_summary's over a chain in a real store (tests/_chain.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.access(
    "/usr/bin/chromium", os.X_OK) else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="Chromium is not installed (apt-get install chromium)")

pypdf = pytest.importorskip("pypdf")
mpimg = pytest.importorskip("matplotlib.image")

from _chain import SIMULATED, SITE, add_gate, open_run  # noqa: E402
from _chain import m as whole  # noqa: E402 (every input read)
from test_report import VERDICTS, build_reports  # noqa: E402  (after the skip: same builder)

from gates.core.verdicts import SHORTENED, Limit  # noqa: E402
from gates.report import write_summary  # noqa: E402
from gates.store import Store  # noqa: E402

GATES = ("g1", "g2", "g3", "g4")
HEADERS = "Measurement Value Limit Margin Outcome Notes"
# Points of the paper sizes: Chromium prints Letter unless the page asks for another size.
LETTER, A4 = (612, 792), (595, 842)
# The verdict box's fill and text colours in the report's CSS.
VERDICT_FILL = {"FAIL": (0xfd, 0xec, 0xee), "PASS": (0xe8, 0xf5, 0xec),
                "MARGINAL": (0xff, 0xf4, 0xe0)}
VERDICT_INK = {"FAIL": (0xb0, 0x00, 0x20), "PASS": (0x0a, 0x6b, 0x2a),
               "MARGINAL": (0x8a, 0x56, 0x00)}
# The summary's recommendation box: fill and text colours for NOT READY FOR SIGN-OFF.
NOT_READY_FILL, NOT_READY_INK = (0xfd, 0xec, 0xee), (0xb0, 0x00, 0x20)
FIGURES_HEADER = "Gate Figure Measurement Value Outcome"
CATALOG = Path(__file__).resolve().parent.parent / "catalog" / "arrays.toml"
# The charts' axis labels in each gate's report (text stays text in the SVG, so in the PDF too).
CHART_TEXT = {"g1": ("hours since the soak began",), "g2": ("fraction of requests",),
              "g3": ("fraction of requests", "output throughput (tok/s)"),
              "g4": ("hours since the soak began",)}


def chromium(profile: Path, *args: str) -> None:
    """One headless Chromium run with no network, no GPU, no first-run work; 60 s at most."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


# KVGATE_DOCS_IMG=docs/img: the summary's and G3's screenshots are kept there as summary.png
# and g3.png, the pictures of a report in README.md and the user guide.
DOCS_IMG = os.environ.get("KVGATE_DOCS_IMG", "")


def keep_for_docs(png: Path, name: str) -> None:
    """Copy a screenshot into $KVGATE_DOCS_IMG when the environment asks for it."""
    if DOCS_IMG:
        shutil.copyfile(png, Path(DOCS_IMG) / name)


def with_paper(html: Path, size: str, to: Path) -> Path:
    """A copy of the report that asks for one paper size (the report itself forces none)."""
    text = html.read_text().replace("</style>", f"@page {{ size: {size}; }}\n</style>", 1)
    to.write_text(text)
    return to


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Every gate report printed at Letter and A4, and screenshotted."""
    root = tmp_path_factory.mktemp("browser")
    profile = root / "chromium-profile"
    out = {}
    for gate, (record, files) in build_reports(root / "run").items():
        html = files["html"]
        letter, a4, png = (root / f"{gate}-letter.pdf", root / f"{gate}-a4.pdf",
                           root / f"{gate}.png")
        chromium(profile, f"--print-to-pdf={letter}", "--no-pdf-header-footer", html.as_uri())
        a4_html = with_paper(html, "A4", root / f"{gate}-a4.html")
        chromium(profile, f"--print-to-pdf={a4}", "--no-pdf-header-footer", a4_html.as_uri())
        chromium(profile, f"--screenshot={png}", "--window-size=1200,1600",
                 "--hide-scrollbars", html.as_uri())
        out[gate] = {"record": record, "letter": letter, "a4": a4, "png": png}
        if gate == "g3":
            keep_for_docs(png, "g3.png")
    return out


def page_texts(pdf: Path) -> list[str]:
    """Each page's text, ligatures unfolded (the PDF writes "fi" as one glyph)."""
    return [unicodedata.normalize("NFKC", p.extract_text()) for p in pypdf.PdfReader(pdf).pages]


def squeezed(text: str) -> str:
    """Text without whitespace: a table cell may wrap a name anywhere."""
    return re.sub(r"\s+", "", text)


@pytest.mark.parametrize("gate", GATES)
def test_pdf_shows_verdict_results_and_every_measurement(rendered, gate):
    record = rendered[gate]["record"]
    text = "\n".join(page_texts(rendered[gate]["letter"]))
    assert f"Verdict: {VERDICTS[gate]}" in text
    assert HEADERS in text
    for m in record.measurements:
        assert squeezed(m.name) in squeezed(text), m.name
    assert "Sign-off" in text and "The results apply only to the items tested" in text


@pytest.mark.parametrize("paper", ["letter", "a4"])
@pytest.mark.parametrize("gate", GATES)
def test_every_page_carries_the_report_id_and_page_x_of_y(rendered, gate, paper):
    record = rendered[gate]["record"]
    reader = pypdf.PdfReader(rendered[gate][paper])
    box = reader.pages[0].mediabox
    assert (round(box.width), round(box.height)) == (LETTER if paper == "letter" else A4)
    texts = page_texts(rendered[gate][paper])
    assert 2 <= len(texts) <= 8
    for number, text in enumerate(texts, start=1):
        assert f"page {number} of {len(texts)}" in text
        assert f"kvgate report {record.run_id}/{gate}" in text


def line_segments(page) -> int:
    """How many straight path segments (the `l` operator) a PDF page draws.

    Chromium draws table borders and backgrounds as rectangles, so lines come from the charts.
    """
    return len(re.findall(r"\sl\n", page.get_contents().get_data().decode("latin-1")))


@pytest.mark.parametrize("gate", GATES)
def test_charts_render_into_the_pdf(rendered, gate):
    """The charts are drawn as vectors on the pages that carry their axis labels (a long
    results table may push the second chart onto the next page)."""
    reader = pypdf.PdfReader(rendered[gate]["letter"])
    texts = page_texts(rendered[gate]["letter"])
    pages = sorted({next(i for i, t in enumerate(texts) if label in t)
                    for label in CHART_TEXT[gate]})
    assert "Charts" in "".join(texts[max(0, pages[0] - 1):pages[0] + 1])
    lines = [line_segments(page) for page in reader.pages]
    drawn = sum(lines[i] for i in pages)
    assert drawn >= 40 and drawn > sum(lines) / 2, lines


def pixels(png: Path):
    """The screenshot as rows of 0-255 RGB."""
    image = mpimg.imread(png)
    assert image.ndim == 3 and image.shape[2] >= 3
    return (image[:, :, :3] * 255).round().astype(int)


@pytest.mark.parametrize("gate", GATES)
def test_screenshot_shows_the_verdict_box(rendered, gate):
    verdict = VERDICTS[gate]
    rgb = pixels(rendered[gate]["png"])
    assert rgb.shape[:2] == (1600, 1200)
    assert (rgb < 250).any(axis=2).mean() > 0.02, "the page is blank"
    fill = (abs(rgb - VERDICT_FILL[verdict]).sum(axis=2) <= 6)
    # The verdict box is the first band of rows in its fill colour (outcome cells further down
    # the results table may share the colour).
    rows = fill.sum(axis=1) > 50
    top = int(rows.argmax())
    bottom = top + int(rows[top:].argmin()) if not rows[top:].all() else len(rows)
    fill[bottom:] = False
    ys, xs = fill.nonzero()
    assert fill.sum() > 5000, f"no {verdict} verdict box in the screenshot"
    box = rgb[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
    ink = (abs(box - VERDICT_INK[verdict]).sum(axis=2) <= 30).sum()
    assert ink > 300, "the verdict box has no text"
    assert ys.max() < 1000, "the verdict is not near the top of the report"


# ---- the procurement summary ----------------------------------------------------------------

def rehearsal_chain(store: Store) -> str:
    """A demo-limits rehearsal over two runs: G1 and G2 earlier, G3 now, and a G4 soak that
    failed on request errors after a shortened run. Returns the current run id."""
    earlier, now = "20261128T090000Z-1a2b3c", "20261130T091000Z-4d5e6f"
    open_run(store, earlier)
    g1 = add_gate(store, earlier, "g1", limits_profile="demo",
                  facts={"pre-flight predicted TTFT reduction": "37.0 %"})
    g2 = add_gate(store, earlier, "g2", cites=g1, limits_profile="demo", deviations=SIMULATED)
    open_run(store, now)
    g3 = add_gate(store, now, "g3", cites=g2, limits_profile="demo", deviations=SIMULATED)
    soak = [whole("g4.effective_duration", 120, Limit.at_least(120, "s")),
            whole("g4.request_errors", 3, Limit.at_most(0, "requests")),
            whole("g4.throughput_floor", 95, Limit.at_least(90, "%")),
            whole("g4.ttft_drift", 2, Limit.at_most(10, "%"))]
    add_gate(store, now, "g4", soak, cites=g3, limits_profile="demo",
             deviations=[*SIMULATED, f"{SHORTENED} (ran 120 s of the 259200 s in thresholds.toml)",
                         "window 20 s instead of 300 s"])
    return now


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    """The summary of a rehearsal chain printed at Letter and A4, and screenshotted."""
    root = tmp_path_factory.mktemp("summary")
    with Store(root / "reports") as store:
        run_id = rehearsal_chain(store)
        html = write_summary(store, SITE, run_id, array="FX100",
                             catalog=CATALOG, profile_description="DEMO limits for a local disk")
    body = json.loads((html["json"]).read_text())
    html = html["html"]
    profile, out = root / "chromium-profile", {"body": body}
    out |= {"letter": root / "summary-letter.pdf", "a4": root / "summary-a4.pdf",
            "png": root / "summary.png"}
    chromium(profile, f"--print-to-pdf={out['letter']}", "--no-pdf-header-footer", html.as_uri())
    a4_html = with_paper(html, "A4", html.with_name("summary-a4.html"))
    chromium(profile, f"--print-to-pdf={out['a4']}", "--no-pdf-header-footer", a4_html.as_uri())
    chromium(profile, f"--screenshot={out['png']}", "--window-size=1200,1600",
             "--hide-scrollbars", html.as_uri())
    keep_for_docs(out["png"], "summary.png")
    return out


def test_the_summary_fixture_is_a_realistic_chain(summary):
    body = summary["body"]
    assert [c["verdict"] for c in body["chain"]] == ["PASS", "PASS", "PASS", "FAIL"]
    assert [c["source"] for c in body["chain"]][:2] == ["cited by G2", "cited by G3"]
    assert body["cost"]["configured"] and body["deviations"] and len(body["banners"]) == 3


@pytest.mark.parametrize("paper", ["letter", "a4"])
def test_summary_pdf_shows_recommendation_every_verdict_row_and_figures(summary, paper):
    body = summary["body"]
    texts = page_texts(summary[paper])
    flat = squeezed("".join(texts))
    status = body["recommendation"]["status"]
    assert f"Recommendation: {status}" in texts[0]  # unbroken, on the first page
    for reason in body["recommendation"]["reasons"]:
        assert squeezed(reason) in flat, reason
    for c in body["chain"]:  # one row per gate: title, source, verdict, run, record hash
        row = squeezed(c["title"] + c["source"] + c["verdict"] + c["run_id"] + c["record_sha256"])
        assert row in flat, c["gate"]
    assert "Key figures" in "".join(texts) and FIGURES_HEADER in "".join(texts)
    for page in texts:  # a page the figures table runs onto repeats its header
        if any(squeezed(f["name"]) in squeezed(page) for c in body["chain"]
               for f in c["key_figures"]):
            assert FIGURES_HEADER in page
    assert "Price per GB/s of KV-restore bandwidth" in "".join(texts)
    assert "Sign-off" in texts[-1] and "Witness" in texts[-1]


@pytest.mark.parametrize("paper", ["letter", "a4"])
def test_every_summary_page_carries_the_run_id_and_page_x_of_y(summary, paper):
    reader = pypdf.PdfReader(summary[paper])
    box = reader.pages[0].mediabox
    assert (round(box.width), round(box.height)) == (LETTER if paper == "letter" else A4)
    texts = page_texts(summary[paper])
    assert 2 <= len(texts) <= 5
    run_id = summary["body"]["run_id"]
    for number, text in enumerate(texts, start=1):
        assert f"page {number} of {len(texts)}" in text
        assert f"kvgate procurement summary {run_id}" in text


def filled_rows(fill) -> tuple[int, int]:
    """First and last row of the one band where a fill colour spans 100 px or more.

    Anti-aliased red text has pixels of the pale fill colour too, but never a whole row of them.
    """
    rows = (fill.sum(axis=1) >= 100).nonzero()[0]
    assert len(rows), "no filled box in the screenshot"
    assert rows.max() - rows.min() + 1 == len(rows), f"more than one filled band: {rows}"
    return rows.min(), rows.max()


def test_summary_screenshot_shows_the_recommendation_box(summary):
    rgb = pixels(summary["png"])
    assert rgb.shape[:2] == (1600, 1200)
    assert (rgb < 250).any(axis=2).mean() > 0.02, "the page is blank"
    fill = (abs(rgb - NOT_READY_FILL).sum(axis=2) <= 6)
    top, bottom = filled_rows(fill)
    xs = fill[top:bottom + 1].sum(axis=0).nonzero()[0]
    box = rgb[top:bottom + 1, xs.min():xs.max() + 1]
    assert bottom - top >= 30 and xs.max() - xs.min() >= 400, (top, bottom, xs.min(), xs.max())
    assert fill[top:bottom + 1, xs.min():xs.max() + 1].mean() > 0.5, "the box is not filled"
    ink = (abs(box - NOT_READY_INK).sum(axis=2) <= 30).sum()
    assert ink > 300, "the recommendation box has no text"
    assert bottom < 600, "the recommendation is not near the top of the summary"
