"""Issue #43: what a report shows of a rule's coverage and of each deviation's typed cause.

A gate report's Outcome cell says how many of its inputs the rule read ("pairs 7/8"), so an
ERROR or MARGINAL that coverage capped reads as such beside the verdict, not only in the note.
Its deviation list, and the procurement summary's, name each deviation's cause and the effect
that cause has on ACCEPT, read from the type (an older record's bare text from its legacy
prefix), never from the words.
"""

import html as htmllib
import re
from pathlib import Path

from _chain import SITE, add_gate, full_chain

from gates.core.configuration import SiteInfo
from gates.core.verdicts import (
    CAUSES,
    Cause,
    Coverage,
    Deviation,
    GateRecord,
    Measurement,
    Outcome,
)
from gates.core.verdicts.deviation import causes_table
from gates.report import build_summary
from gates.report.report import ReportContext, render_html
from gates.report.summary import render_summary
from gates.store import Store

CONTEXT = ReportContext(site=SiteInfo(name="Typed site"))


def outcome_cells(page: str) -> list[str]:
    """The Outcome cells of the results table, as text (tags dropped, entities read)."""
    table = page[page.index('<table id="results">'):]
    table = table[:table.index("</table>")]
    cells = [row.split("<td")[5] for row in table.split("<tr>")[2:]]
    return [htmllib.unescape(re.sub(r"<[^>]+>", " ", c.split(">", 1)[1])).split() for c in cells]


def test_a_measurement_s_coverage_is_shown_under_its_outcome():
    pairs = Coverage(range(1, 9), read=[1, 2, 4, 5, 6, 7, 8], failed={3: "no figure"},
                     what="pairs")
    gain = pairs.judge(Measurement(name="Throughput gain", value=35.0, unit="%",
                                   outcome=Outcome.PASS), minimum=0.75)
    alone = Measurement(name="Engine answered", outcome=Outcome.PASS)  # one reading
    record = GateRecord(gate="g3", run_id="r1", site="Typed site", started="t",
                        measurements=[gain, alone])
    cells = outcome_cells(render_html(record, CONTEXT))
    assert gain.outcome is Outcome.MARGINAL and gain.coverage is not None
    assert [" ".join(c) for c in cells] == ["MARGINAL pairs 7/8", "PASS"]


def test_a_gate_report_names_each_deviation_s_cause_and_effect():
    typed = Deviation(cause=Cause.GAIN_BEYOND_STORAGE, text="a +340 % gain nothing explains")
    record = GateRecord(gate="g3", run_id="r1", site="Typed site", started="t",
                        deviations=[typed, "simulated engine: the arms baseline ran kvgate-sim"])
    page = htmllib.unescape(render_html(record, CONTEXT))
    listed = page[page.index("<h3>Deviations</h3>"):page.index("<h3>Retests</h3>")]
    assert "a +340 % gain nothing explains" in listed
    assert "(gain beyond the arms' storage: blocking)" in listed
    # An older record's bare text: the cause its words were classified by then.
    assert "simulated engine: the arms baseline ran kvgate-sim" in listed
    assert "(simulated engine: rehearsal)" in listed


def test_the_summary_lists_each_deviation_with_its_cause_and_the_effect_of_that_cause(tmp_path):
    causes = [Cause.LIMITS_CHANGED, Cause.SHORTENED, Cause.NO_PREDICTION]
    found = [Deviation(cause=c, text=f"finding {n}") for n, c in enumerate(causes)]
    with Store(tmp_path / "out") as store:
        full_chain(store, "r1", gates=("g1",))
        below = store.record("r1", "g1")
        for gate in ("g2", "g3", "g4"):
            below = add_gate(store, "r1", gate, cites=below,
                             deviations=found if gate == "g4" else [])
        summary = build_summary(store, SITE, "r1")
    assert [(d.text, d.cause, d.kind) for d in summary.deviations] == [
        (d.text, d.cause, CAUSES[d.cause][0]) for d in found]
    page = htmllib.unescape(render_summary(summary))
    table = page[page.index('<table id="deviations">'):]
    rows = [re.sub(r"<[^>]+>", "|", row) for row in table[:table.index("</table>")]
            .split("<tr>")[2:]]
    cells = [cell for cell in rows[0].split("|") if cell.strip()]
    assert cells[2:5] == ["finding 0", "limits changed", "open"]
    assert "shortened soak" in rows[1] and "rehearsal: never a sign-off" in rows[1]
    assert "no pre-flight prediction" in rows[2] and "note: does not block" in rows[2]


def test_the_docs_table_of_causes_is_the_one_causes_gives():
    page = (Path(__file__).resolve().parent.parent / "docs" / "reports.md").read_text()
    shown = page.split("<!-- causes: begin -->\n", 1)[1].split("<!-- causes: end -->", 1)[0]
    assert shown == causes_table()
    assert [line.split("`")[1] for line in shown.splitlines()[2:]] == [str(c) for c in CAUSES]
