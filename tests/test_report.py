"""Sign-off reports rendered through the real GateSession and write_reports, read back parsed.

`build_reports` makes a realistic store (an earlier G1 run, then G1–G4 with every outcome,
intervals, evidence, charts, checklist answers and the upstream chain); test_browser prints the
same reports with Chromium.
"""

from __future__ import annotations

import hashlib
import html as htmllib
import json
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from _chain import the_rest
from hypothesis import given
from hypothesis import strategies as st

from gates.charts import throughput_by_concurrency, time_series, ttft_cdf
from gates.checklist import ChecklistStore
from gates.checklist.store import ChecklistRun
from gates.core.verdicts import (
    Cause,
    ChecklistAnswer,
    Deviation,
    DutItem,
    Limit,
    Measurement,
)
from gates.core.verdicts.verdict import SEVERITY
from gates.inference import Repetition
from gates.options import RunOptions
from gates.report import KEY_DIR_ENV, KEY_ENV, grouped, new_key
from gates.report.report import REPORT_REVISION, css_string
from gates.report.sealing import RECORD_META, SEAL_ID, check_seal, embedded_records
from gates.session import GateSession
from gates.store import Store

REPO = Path(__file__).resolve().parent.parent

SITE = """
[site]
name = "Acme FRA2 KV array"
customer = "Acme Inference GmbH"
location = "Frankfurt FRA2, hall 3, rack R14"
procedure = "AP-7 storage acceptance, issue 3"

[target]
directory = "target"
create = true

[fio]
file_size = "1GiB"

[arms.baseline]
kind = "endpoint"
urls = ["http://10.20.0.5:8000"]
engine = "vllm"
model = "Qwen/Qwen3-32B"
kv_dir = "target/kv-baseline"

[arms.candidate]
kind = "launch"
command = ["vllm", "serve", "{model}", "--port", "{port}", "--kv-offload-dir", "{kv_dir}"]
engine = "lmcache"
model = "Qwen/Qwen3-32B"
kv_dir = "target/kv-candidate"

[arms.recompute]
kind = "endpoint"
urls = ["http://10.20.0.6:8000"]
engine = "vllm"
model = "Qwen/Qwen3-32B"
"""

GB = "GB/s"


def g1_measurements() -> list[Measurement]:
    """A G1 run with every outcome: one FAIL, a MARGINAL interval, an ERROR, N/A and passes."""
    return [
        Measurement.measured("sequential write bandwidth (1 MiB)", 3.42,
                             Limit.at_least(3.0, GB, key="g1.seq_write_bw_min"),
                             evidence=["evidence/fio-seqwrite.json"]),
        Measurement.measured("sequential read bandwidth (1 MiB)", 4.71,
                             Limit.at_least(5.0, GB, key="g1.seq_read_bw_min"),
                             evidence=["evidence/fio-seqread.json"],
                             note="steady state reached after 40 s"),
        Measurement.measured("KV-restore bandwidth (256 KiB, 4 jobs)", 5.21,
                             Limit.at_least(5.0, GB, key="g1.kv_restore_bw_min"),
                             interval=(4.93, 5.46), evidence=["evidence/fio-kvrestore.json"]),
        Measurement.measured("4 KiB random read p99 latency at QD1", 212.0,
                             Limit.at_most(500, "µs", key="g1.randread_4k_qd1_p99_max")),
        Measurement.measured("4 KiB random read IOPS at QD32", 612_345.0,
                             Limit.at_least(200_000, "IO/s", key="g1.randread_4k_iops_min")),
        Measurement.error("storage NIC link speed (ens1f0np0)", "ethtool: command not found",
                          Limit.at_least(100, "Gb/s", key="g1.link_speed")),
        Measurement.not_applicable("md RAID level", "site.toml [topology] sets no host RAID"),
        Measurement.measured("steady-state spread, sequential read", 6.3,
                             Limit.at_most(20, "%", key="g1.steady_state_spread_max")),
    ]


def repetitions(arm: str, scale: float) -> list[Repetition]:
    """Seeded TTFT samples and throughputs of one arm at two concurrency levels."""
    rng = random.Random(arm)
    return [Repetition(arm=arm, concurrency=c, repetition=i, sent=64, errors=0,
                       ttfts=[scale * c ** 0.3 * rng.lognormvariate(0, 0.25) for _ in range(64)],
                       output_throughput=900 * c / scale * rng.uniform(0.97, 1.03))
            for c in (8, 16) for i in range(3)]


def soak_panels() -> list[tuple[str, str, list[tuple[float, float]]]]:
    """Four hours of per-window soak signals."""
    rng = random.Random(4)
    ts = [t * 300.0 for t in range(48)]
    return [("output throughput", "tok/s", [(t, 5200 + rng.gauss(0, 60)) for t in ts]),
            ("TTFT p50", "s", [(t, 0.41 + t / 4e6 + rng.gauss(0, 0.01)) for t in ts]),
            ("free space", "GB", [(t, 1800 - t / 40) for t in ts])]


def later_measurements() -> dict[str, list[Measurement]]:
    """G2 passes, G3 is MARGINAL on its interval, G4 fails a window and misses a signal."""
    cv = Limit.at_most(5, "%", key="g2.cv_max")
    gain = Limit.at_least(25, "%", key="g3.ttft_p50_reduction_min", relative_to="G2 TTFT p50")
    return {
        "g2": [Measurement.measured(f"TTFT p50 run-to-run CV @ {c}", v, cv)
               for c, v in ((8, 1.9), (16, 2.7))]
        + [Measurement.measured("request errors", 0,
                                Limit.at_most(0, key="g2.request_errors_max"))],
        "g3": [Measurement.measured("TTFT p50 reduction vs G2 @ 16", 31.0, gain,
                                    interval=(22.5, 38.1)),
               Measurement.measured("output throughput gain vs G2 @ 16", 34.2,
                                    Limit.at_least(29, "%", key="g3.throughput_gain_min")),
               Measurement.measured("KV read from candidate storage @ 16", 97.5,
                                    Limit.at_least(90, "%", key="g3.storage_read_fraction_min"))],
        "g4": [Measurement.measured("request errors over the soak", 3,
                                    Limit.at_most(0, key="g4.request_errors_max"),
                                    note="3 of 412,000 requests timed out in window 31"),
               Measurement.measured("TTFT p50 drift, last vs first window", 4.1,
                                    Limit.at_most(10, "%", key="g4.ttft_drift_max")),
               Measurement.error("NVMe media errors delta", "nvme smart-log: permission denied"),
               Measurement.blocked("72-hour duration", "G3 did not pass")],
    }


def answer(gate: str, item: str, text: str, value: str, note: str = "") -> ChecklistAnswer:
    """A checklist answer by the on-site engineer."""
    return ChecklistAnswer(gate=gate, item_id=f"{gate}.{item}", text=text, answer=value,
                           note=note, operator="Jana Novak", answered_at="2026-11-30T09:14:05Z")


CHECKLIST = [
    answer("g1", "serial-matches-po", "Array serial matches the purchase order", "pass",
           "PO 4500123 line 2: serial SN-AC-7781"),
    answer("g1", "cabling-photographed", "Cabling photographed", "fail",
           "port 3 cable unlabelled; photo IMG_2231"),
    answer("g1", "firmware-recorded", "Firmware recorded", "n.a.", "recorded by G1 itself"),
    answer("g3", "engine-config-reviewed", "Engine configuration reviewed", "pass"),
]


def open_session(root: Path, run_id: str, **options) -> GateSession:
    """A real GateSession on the repository's thresholds and the site above."""
    return GateSession.open(RunOptions(site=root / "site.toml",
                                       thresholds=root / "thresholds.toml",
                                       out=root / "reports", run_id=run_id, **options))


def evidence(session: GateSession, name: str, text: str) -> None:
    """Write one raw evidence file into the run and hash it into the manifest."""
    path = session.evidence_dir / name
    path.write_text(text)
    session.add_evidence(path)


def earlier_g1(root: Path) -> None:
    """A G1 run before the one under test: the retest history."""
    session = open_session(root, "2026-11-28T101500Z")
    session.record("g1", Measurement.measured("sequential read bandwidth (1 MiB)", 2.1,
                                              Limit.at_least(5.0, GB)))
    session.finish()
    session.store.close()


def build_reports(root: Path) -> dict:
    """G1–G4 reports of one run (after an earlier G1) through GateSession and write_reports."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "site.toml").write_text(SITE)
    shutil.copy(REPO / "thresholds.toml", root / "thresholds.toml")
    earlier_g1(root)
    with Store(root / "reports") as store:  # the checklist run the session's --checklist-id names
        answers = ChecklistStore(store)
        answers.begin(ChecklistRun(checklist_id="cl-1", checklist="checklist.toml",
                                   checklist_sha256="0", checklist_revision="1", site="site.toml",
                                   thresholds="thresholds.toml", gates=["g1", "g2", "g3", "g4"]))
        for a in CHECKLIST:
            answers.save("cl-1", a)
    session = open_session(root, "2026-11-30T091000Z", force=True, checklist_id="cl-1")
    session.tool_versions |= {"fio": "fio-3.33", "engine (candidate)": "vllm 0.11.0, LMCache 0.3.9"}
    session.inventory = [DutItem(role="NVMe controller", name="nvme1", model="KIOXIA KCMYXRUG15T3",
                                 serial="X3B0A017T0K8", firmware="1UET7104",
                                 detail="15.36 TB")]
    for name in ("fio-seqread.json", "fio-seqwrite.json", "fio-kvrestore.json"):
        evidence(session, name, json.dumps({"fio version": "fio-3.33", "jobs": [name]}))
    session.deviate("g1", Deviation(cause=Cause.OTHER, text=(
        "ethtool was not installed on the host; link speed not measured")))
    for m in g1_measurements():
        session.record("g1", m)
    bw = [(t, 4.7 + 0.05 * ((t * 7) % 3)) for t in range(60)]
    session.charts["g1"] = [("Sequential read bandwidth per second", time_series(
        [("sequential read", GB, bw)]))]
    arms = {"baseline": repetitions("baseline", 0.6), "candidate": repetitions("candidate", 0.4)}
    session.charts["g2"] = [("Baseline TTFT CDF", ttft_cdf({"baseline": arms["baseline"]}))]
    session.charts["g3"] = [("TTFT CDF, baseline (G2) vs candidate", ttft_cdf(arms)),
                            ("Throughput vs concurrency", throughput_by_concurrency(arms))]
    session.charts["g4"] = [("Soak signals per window", time_series(soak_panels()))]
    for gate, measurements in later_measurements().items():
        session.blocked_reason(gate)
        # G2 and G3 measure every declared figure (their verdicts are the subject); G4 not.
        for m in measurements + (the_rest(session, gate) if gate in ("g2", "g3") else []):
            session.record(gate, m)
    finished = {record.gate: (record, files) for record, files in session.finish()}
    session.store.close()
    return finished


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The four gate reports, built once for this module (no signing key: unsigned)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_DIR_ENV, str(tmp_path_factory.mktemp("no-keys")))
        patch.delenv(KEY_ENV, raising=False)
        return build_reports(tmp_path_factory.mktemp("reports"))


# ---- a small structural reader --------------------------------------------------------------

class Page(HTMLParser):
    """Tags with attributes, element text by id, and the tables (by id) as rows of cell texts."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.texts: dict[str, str] = {}
        self.style = ""
        self._table: list[str] = []
        self._cell: list[str] | None = None
        self._ids: list[tuple[str, str, list[str]]] = []
        self._in_style = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        self._in_style = tag == "style"
        if tag == "table":
            self._table.append(attrs.get("id", f"table{len(self.tables)}"))
            self.tables[self._table[-1]] = []
        elif tag == "tr" and self._table:
            self.tables[self._table[-1]].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")
        if "id" in attrs and tag in ("div", "span", "p", "section"):
            self._ids.append((tag, attrs["id"], []))

    def handle_endtag(self, tag):
        self._in_style = False
        if tag == "table" and self._table:
            self._table.pop()
        elif tag in ("td", "th") and self._cell is not None and self._table:
            self.tables[self._table[-1]][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        while self._ids and self._ids[-1][0] == tag:
            _, ident, text = self._ids.pop()
            self.texts[ident] = " ".join("".join(text).split())
            break

    def handle_data(self, data):
        if self._in_style:
            self.style += data
        if self._cell is not None:
            self._cell.append(data)
        for _, _, text in self._ids:
            text.append(data)

    def rows(self, table: str) -> list[list[str]]:
        """A table's body rows (the header row dropped)."""
        return self.tables[table][1:]


def page(files: dict) -> Page:
    """The parsed HTML report."""
    return Page(files["html"].read_text())


# ---- the tests ------------------------------------------------------------------------------

VERDICTS = {"g1": "FAIL", "g2": "PASS", "g3": "MARGINAL", "g4": "FAIL"}


@pytest.mark.parametrize("gate", ["g1", "g2", "g3", "g4"])
def test_verdict_banner_and_every_measurement_failures_first(reports, gate):
    record, files = reports[gate]
    html = page(files)
    assert record.verdict.value == VERDICTS[gate]
    assert html.texts["verdict"] == f"Verdict: {VERDICTS[gate]}"
    header = html.tables["results"][0]
    assert header == ["Measurement", "Value", "Limit", "Margin", "Outcome", "Notes"]
    rows = html.rows("results")
    assert sorted(r[0] for r in rows) == sorted(m.name for m in record.measurements)
    outcomes = {m.name: m.outcome for m in record.measurements}
    # The outcome, and under it what a rule over many inputs read of them ("pairs 7/8").
    shown = {m.name: m.outcome.value + (f" {m.coverage.what} {m.coverage.read}/"
                                        f"{m.coverage.expected}" if m.coverage else "")
             for m in record.measurements}
    assert all(r[4] == shown[r[0]] for r in rows), rows
    ranks = [SEVERITY.index(outcomes[r[0]]) for r in rows]
    assert ranks == sorted(ranks) and outcomes[rows[0][0]].value == VERDICTS[gate]


def test_values_units_limits_margins_and_intervals(reports):
    rows = {r[0]: r for r in page(reports["g1"][1]).rows("results")}
    read = rows["sequential read bandwidth (1 MiB)"]
    assert read[1:4] == ["4.71 GB/s", "x >= 5 GB/s g1.seq_read_bw_min", "-0.29 GB/s"]
    assert rows["KV-restore bandwidth (256 KiB, 4 jobs)"][1] == "5.21 GB/s CI 4.93…5.46"
    assert rows["4 KiB random read IOPS at QD32"][1] == "612,345 IO/s"
    assert rows["storage NIC link speed (ens1f0np0)"][1] == "—"
    assert rows["md RAID level"][5] == "site.toml [topology] sets no host RAID"


@pytest.mark.parametrize("gate", ["g1", "g2", "g3", "g4"])
def test_self_contained_no_script_no_external_fetch(reports, gate):
    text = reports[gate][1]["html"].read_text()
    html = page(reports[gate][1])
    names = {tag for tag, _ in html.tags}
    assert not names & {"script", "link", "iframe", "object", "embed", "img", "base"}
    assert "<script" not in text.lower() and "javascript:" not in text.lower()
    for tag, attrs in html.tags:
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        for key in ("src", "href", "xlink:href", "srcset", "action", "data"):
            assert not attrs.get(key) or attrs[key].startswith("#"), (tag, key, attrs[key])
    urls = re.findall(r"url\(\s*['\"]?([^'\")]*)", text)
    assert all(u.startswith("#") for u in urls), urls
    assert "@import" not in text and "@font-face" not in text


def test_charts_are_inline_svg(reports):
    for gate, count in (("g1", 1), ("g2", 1), ("g3", 2), ("g4", 1)):
        html = page(reports[gate][1])
        assert sum(tag == "figure" for tag, _ in html.tags) == count
        assert sum(tag == "svg" for tag, _ in html.tags) >= count


@pytest.mark.parametrize("gate", ["g1", "g4"])
def test_the_seal_verifies_and_one_altered_byte_breaks_it(reports, gate):
    files = reports[gate][1]
    text = files["html"].read_text()
    assert check_seal(text) == ""
    written = Page(text).texts[SEAL_ID]
    zeroed = re.sub(rf'(id="{SEAL_ID}">)[0-9a-f]{{64}}', r"\g<1>" + "0" * 64, text)
    assert hashlib.sha256(zeroed.encode()).hexdigest() == written
    assert files["seal"].read_text() == f"{written}  {gate}.html\n"
    index = text.index("Verdict: ") + len("Verdict: ")
    altered = text[:index] + "P" + text[index + 1:]
    assert "altered" in check_seal(altered)
    assert "altered" in check_seal(text.replace("4.71 GB/s", "4.72 GB/s", 1)) or gate != "g1"


def test_the_report_says_how_to_recompute_its_seal(reports):
    cell = {r[0]: r[1] for r in page(reports["g1"][1]).tables["traceability"]}["report SHA-256"]
    assert "replaced by zeros" in cell and "sha256sum" in cell and "kvgate verify" in cell


def test_print_css_paginates_with_report_id_and_page_x_of_y(reports):
    record, files = reports["g3"]
    css = page(files).style
    assert 'counter(page) " of " counter(pages)' in css
    assert "@bottom-right" in css and "@top-left" in css
    assert f"kvgate report {record.run_id}/g3 · revision {REPORT_REVISION}" in css
    assert "break-inside: avoid" in css and "break-after: avoid" in css
    assert "display: table-header-group" in css
    page_rule = css[css.index("@page"):css.index("@media print")]
    assert not re.search(r"(?<![-\w])size\s*:", page_rule), "one paper size would break the other"


def test_header_names_report_revision_customer_site_procedure_and_dut(reports):
    header = {r[0]: r[1] for r in page(reports["g1"][1]).tables["identity"]}
    assert header["Report"].startswith("2026-11-30T091000Z/g1 · report revision 1")
    assert "thresholds revision 2026.12-8" in header["Report"]
    assert header["Customer"] == "Acme Inference GmbH"
    assert header["Site"] == "Acme FRA2 KV array"
    assert header["Location"] == "Frankfurt FRA2, hall 3, rack R14"
    assert header["Procedure"] == "AP-7 storage acceptance, issue 3"
    assert header["Gate"] == "G1 — G1 arrival acceptance"
    assert "KIOXIA KCMYXRUG15T3, serial X3B0A017T0K8, firmware 1UET7104" in header[
        "Device under test"]
    g3 = {r[0]: r[1] for r in page(reports["g3"][1]).tables["identity"]}
    assert "G1 report of this chain" in g3["Device under test"]


def test_checklist_answers_with_operator_and_time(reports):
    rows = page(reports["g1"][1]).rows("checklist")
    assert [r[1] for r in rows] == ["pass", "fail", "n.a."]
    assert rows[1][0] == "Cabling photographed g1.cabling-photographed"
    assert rows[1][2:] == ["port 3 cable unlabelled; photo IMG_2231", "Jana Novak",
                           "2026-11-30T09:14:05Z"]
    assert len(page(reports["g3"][1]).rows("checklist")) == 1
    g2 = reports["g2"][1]["html"].read_text()
    assert "No manual checklist items were answered for this gate" in g2


def test_retests_list_earlier_records_of_the_gate(reports):
    rows = page(reports["g1"][1]).rows("retests")
    assert len(rows) == 1 and rows[0][:2] == ["2026-11-28T101500Z", "FAIL"]
    assert re.fullmatch(r"[0-9a-f]{64}", rows[0][3])
    assert "retests" not in page(reports["g2"][1]).tables


def test_every_marginal_result_gets_a_waiver_line(reports):
    rows = page(reports["g1"][1]).rows("waivers")
    assert [r[0] for r in rows] == ["KV-restore bandwidth (256 KiB, 4 jobs)"]
    assert rows[0][3:] == ["", "", ""]
    assert [r[0] for r in page(reports["g3"][1]).rows("waivers")] == [
        "TTFT p50 reduction vs G2 @ 16"]
    assert "No waiver needed" in reports["g2"][1]["html"].read_text()


def test_deviations_name_the_forced_run(reports):
    text = reports["g2"][1]["html"].read_text()
    assert "FORCED: run despite the upstream gate: G1 did not pass" in text


def test_arms_and_engine_versions_on_inference_gates(reports):
    html = page(reports["g3"][1])
    arms = {r[0]: r for r in html.rows("arms")}
    assert set(arms) == {"baseline", "candidate", "recompute"}
    # Nothing asked these servers what they are (the test records the measurements itself):
    # the Engine column says the site file's engine = and that it is only that (#25 item 15).
    assert arms["baseline"][1:4] == ["vllm (site file; the server was not asked)",
                                     "Qwen/Qwen3-32B", "endpoint: http://10.20.0.5:8000"]
    assert arms["candidate"][3].startswith("launched: vllm serve {model} --port {port}")
    assert arms["recompute"][4] == "none (recompute)"
    assert "engine (candidate) vllm 0.11.0, LMCache 0.3.9" in reports["g3"][1]["html"].read_text()
    assert "arms" not in page(reports["g1"][1]).tables
    assert set(arms) == {r[0] for r in page(reports["g2"][1]).rows("arms")}
    assert {r[0] for r in page(reports["g4"][1]).rows("arms")} == {"candidate"}  # G4 soaks it


def test_the_engine_column_is_what_the_server_said():
    from gates.core.configuration import Arm
    from gates.report import arm_row

    arm = Arm(kind="endpoint", urls=["http://h:1"], engine="vllm")
    assert arm_row("candidate", arm, "kvgate-sim (X-KVGate-Simulator header)")["engine"] == \
        "kvgate-sim (X-KVGate-Simulator header)"
    assert arm_row("candidate", arm)["engine"] == "vllm (site file; the server was not asked)"


def test_tools_traceability_evidence_and_sign_off(reports):
    record, files = reports["g2"]
    html = page(files)
    tools = {r[0]: r[1] for r in html.tables["tools"]}
    assert {"kvgate", "kvgate commit", "python", "platform", "fio"} <= set(tools)
    trace = {r[0]: r[1] for r in html.tables["traceability"]}
    assert trace["record SHA-256"].startswith(record.sha256())
    assert record.upstream.record_sha256 in trace["upstream record"]
    evidence = {r[0]: r[1] for r in html.rows("evidence")}
    assert evidence == record.evidence and len(evidence) == 3
    assert [r[0] for r in html.rows("signatures")] == ["Performed by", "Reviewed by",
                                                       "Witnessed by"]
    assert "The results apply only to the items tested" in files["html"].read_text()


def test_json_record_is_beside_the_report(reports):
    record, files = reports["g4"]
    body = json.loads(files["json"].read_text())
    assert body["record_sha256"] == record.sha256() and body["verdict"] == "FAIL"
    assert body["checklist"] == []
    g1 = json.loads(reports["g1"][1]["json"].read_text())
    assert [a["operator"] for a in g1["checklist"]] == ["Jana Novak"] * 3


def test_a_hostile_site_name_stays_text(tmp_path):
    root = tmp_path / "hostile"
    root.mkdir()
    (root / "site.toml").write_text(SITE.replace('"Acme FRA2 KV array"',
                                                 "'a\"}</style><script>x</script>'"))
    shutil.copy(REPO / "thresholds.toml", root / "thresholds.toml")
    session = open_session(root, "r1")
    for m in [Measurement.measured("bw", 6, Limit.at_least(5.0, GB)), *the_rest(session, "g1")]:
        session.record("g1", m)
    [(_, files)] = session.finish()
    session.store.close()
    text = files["html"].read_text()
    assert "<script" not in text and check_seal(text) == ""
    assert Page(text).texts["verdict"] == "Verdict: PASS"


@given(st.text())
def test_css_string_cannot_leave_its_quotes(text):
    quoted = str(css_string(text))
    inner = quoted[1:-1]
    assert quoted[0] == quoted[-1] == '"'
    assert not set(inner) & set("\"'<>{};\n\r\\") - {"\\"}
    assert all(part[:1] in "0123456789abcdef" or part == "" for part in inner.split("\\")[1:])


@pytest.mark.skipif(not (shutil.which("sed") and shutil.which("sha256sum")),
                    reason="needs sed and sha256sum")
def test_the_by_hand_recomputation_printed_in_the_report_works(reports):
    files = reports["g2"][1]
    text = files["html"].read_text()
    command = htmllib.unescape(re.search(r'<pre class="mono cmd">(.*?)</pre>', text).group(1))
    done = subprocess.run(["bash", "-c", command], cwd=files["html"].parent, capture_output=True,
                          text=True, timeout=30, check=True)
    assert done.stdout.split()[0] == Page(text).texts[SEAL_ID]


def test_each_report_names_its_record_and_says_it_is_unsigned(reports):
    for record, files in reports.values():
        text = files["html"].read_text()
        assert embedded_records(text) == [json.loads(files["json"].read_text())["record_sha256"]]
        assert f'<meta name="{RECORD_META}" content="{record.sha256()}">' in text
        signature = {r[0]: r[1] for r in page(files).tables["digital-signature"]}
        assert signature["status"].startswith("unsigned: no signing key was configured")
        assert "sig" not in files


def test_a_session_signs_with_the_key_the_variable_names(tmp_path, monkeypatch):
    private, _, key = new_key(tmp_path / "keys")
    monkeypatch.setenv(KEY_ENV, str(private))
    root = tmp_path / "signed"
    root.mkdir()
    (root / "site.toml").write_text(SITE)
    shutil.copy(REPO / "thresholds.toml", root / "thresholds.toml")
    session = open_session(root, "r1")
    session.record("g1", Measurement.measured("bw", 6, Limit.at_least(5.0, GB)))
    [(record, files)] = session.finish()
    session.store.close()
    signed = json.loads(files["sig"].read_text())
    assert signed["statement"]["sha256"] == record.sha256()
    assert signed["fingerprint"] == key.fingerprint
    html = page(files)
    signature = {r[0]: r[1] for r in html.tables["digital-signature"]}
    assert signature["fingerprint"] == grouped(key.fingerprint)
    assert signature["public key"] == key.text
    performed = html.rows("signatures")[0]
    assert performed[0] == "Performed by" and grouped(key.fingerprint) in performed[-1]
