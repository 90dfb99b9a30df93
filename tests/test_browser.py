"""Browser check: Chromium renders each gate report, screenshots it and prints it to PDF.

Skipped where Chromium is absent (CI installs Debian's `chromium`). The reports are the ones
test_report builds through the real GateSession: every outcome, charts, evidence, checklist.
"""

from __future__ import annotations

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

from test_report import VERDICTS, build_reports  # noqa: E402  (after the skip: same builder)

GATES = ("g1", "g2", "g3", "g4")
HEADERS = "Measurement Value Limit Margin Outcome Notes"
# Points of the paper sizes: Chromium prints Letter unless the page asks for another size.
LETTER, A4 = (612, 792), (595, 842)
# The verdict box's fill and text colours in the report's CSS.
VERDICT_FILL = {"FAIL": (0xfd, 0xec, 0xee), "PASS": (0xe8, 0xf5, 0xec),
                "MARGINAL": (0xff, 0xf4, 0xe0)}
VERDICT_INK = {"FAIL": (0xb0, 0x00, 0x20), "PASS": (0x0a, 0x6b, 0x2a),
               "MARGINAL": (0x8a, 0x56, 0x00)}
# A chart's axis label in each gate's report (text stays text in the SVG, so in the PDF too).
CHART_TEXT = {"g1": "hours since the soak began", "g2": "fraction of requests",
              "g3": "output throughput (tok/s)", "g4": "hours since the soak began"}


def chromium(profile: Path, *args: str) -> None:
    """One headless Chromium run with no network, no GPU, no first-run work; 60 s at most."""
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


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
    reader = pypdf.PdfReader(rendered[gate]["letter"])
    texts = page_texts(rendered[gate]["letter"])
    chart_page = next(i for i, t in enumerate(texts) if CHART_TEXT[gate] in t)
    assert "Charts" in "".join(texts[max(0, chart_page - 1):chart_page + 1])
    lines = [line_segments(page) for page in reader.pages]
    assert lines[chart_page] >= 40 and lines[chart_page] > sum(lines) / 2, lines


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
    ys, xs = fill.nonzero()
    assert fill.sum() > 5000, f"no {verdict} verdict box in the screenshot"
    box = rgb[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
    ink = (abs(box - VERDICT_INK[verdict]).sum(axis=2) <= 30).sum()
    assert ink > 300, "the verdict box has no text"
    assert ys.max() < 1000, "the verdict is not near the top of the report"
