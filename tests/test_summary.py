"""Procurement summary: the chain from the store, figures from the records, the recommendation."""

import json
from html.parser import HTMLParser
from pathlib import Path

import jsonschema
import pytest
from _chain import SIMULATED, SITE, add_gate, full_chain, m, open_run

from gates.core.verdicts import G1, GATE_TITLES, GATES, SHORTENED, Limit
from gates.report import KEY_DIR_ENV, KEY_ENV, build_summary, grouped, new_key, write_summary
from gates.report.chain import ChainLink
from gates.report.figures import ABSENT, key_figures
from gates.report.sealing import check_seal, embedded_records
from gates.report.signing import load_signer
from gates.report.summary import ACCEPT, NOT_READY, Summary, recommend, summary_digest
from gates.store import Store

CATALOG = Path(__file__).resolve().parent.parent / "catalog" / "arrays.toml"


@pytest.fixture(autouse=True)
def no_key(tmp_path, monkeypatch):
    """No signing key on this machine unless a test makes one."""
    monkeypatch.setenv(KEY_DIR_ENV, str(tmp_path / "keys"))
    monkeypatch.delenv(KEY_ENV, raising=False)


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "reports") as opened:
        yield opened


class Page(HTMLParser):
    """Tags, attributes and text of a page, by element id where one is set."""

    def __init__(self, html):
        super().__init__()
        self.tags, self.hrefs, self.text, self.ids, self._open = [], [], [], {}, []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self.hrefs += [attrs["href"]] if "href" in attrs else []
        self._open.append(attrs.get("id"))
        if attrs.get("id"):
            self.ids[attrs["id"]] = ""

    def handle_endtag(self, tag):
        if self._open:
            self._open.pop()

    def handle_data(self, data):
        self.text.append(data)
        for element in filter(None, self._open):
            self.ids[element] += data


def link(gate, verdict="PASS", **kw):
    """A chain row with a record, as the summary builds it."""
    kw = {"link_ok": None if gate == "g1" else True} | kw
    return ChainLink(gate=gate, title=GATE_TITLES[gate], source="this run", run_id="r1",
                     verdict=verdict, record_sha256="a" * 64, **kw)


# ---- the recommendation, as a pure function -------------------------------------------------

def test_all_four_gates_passing_for_real_is_accept():
    found = recommend([link(g) for g in GATES])
    assert found.status == ACCEPT and found.reasons == [] and found.text == "ACCEPT"


def test_a_failed_gate_is_named():
    found = recommend([link(g, "FAIL" if g == "g3" else "PASS") for g in GATES])
    assert found.status == NOT_READY
    assert found.text == "NOT READY FOR SIGN-OFF: did not pass (FAIL): G3"


@pytest.mark.parametrize(("marks", "reason"), [
    ({"limits_profile": "demo"}, 'limits profile "demo", not the ordered array\'s limits'),
    ({"simulated": True}, "simulated engine"),
    ({"shortened": True}, "shortened rehearsal"),
    ({"forced": True}, "forced past the upstream gate"),
])
def test_any_rehearsal_keeps_an_all_pass_chain_from_sign_off(marks, reason):
    found = recommend([link(g, **(marks if g == "g4" else {})) for g in GATES])
    assert found.status == NOT_READY
    assert found.reasons == [f"{reason}: G4"]


def test_missing_gates_and_a_broken_link_are_reasons():
    chain = [link("g1"), link("g2", link_ok=False, link_note="cites G1 run r0")]
    found = recommend(chain)
    assert found.reasons == ["chain link does not verify (cites G1 run r0): G2",
                             "no record: G3, G4"]


def test_one_reason_lists_every_gate_it_applies_to():
    found = recommend([link(g, limits_profile="demo") for g in GATES])
    assert found.reasons == ['limits profile "demo", not the ordered array\'s limits: '
                             "G1, G2, G3, G4"]


# ---- key figures ----------------------------------------------------------------------------

def test_key_figures_come_from_the_record_one_row_per_concurrency(store):
    open_run(store, "r1")
    record, _ = add_gate(store, "r1", "g2")
    rows = key_figures("g2", record)
    assert [(r.label, r.name, r.value) for r in rows] == [
        ("TTFT p50", "Baseline TTFT p50 @ concurrency 8", 2.0),
        ("TTFT p50", "Baseline TTFT p50 @ concurrency 16", 3.5),
        ("Output throughput", "Baseline output throughput @ concurrency 8", 400),
        ("Output throughput", "Baseline output throughput @ concurrency 16", 610)]
    assert rows[0].text == "2 s" and rows[0].outcome == "PASS"


def test_an_absent_figure_is_a_dash_never_a_number(store):
    open_run(store, "r1")
    record, _ = add_gate(store, "r1", "g1", measurements=[
        m("g1.seq_read_bw", 5.2, Limit.at_least(4, "GB/s")),
        G1["g1.kv_restore_bw"].error("fio failed", Limit.at_least(4, "GB/s"))])
    rows = {r.label: r for r in key_figures("g1", record)}
    assert rows["KV-restore bandwidth"].text == ABSENT
    assert rows["KV-restore bandwidth"].outcome == "ERROR"
    assert rows["QD1 random-read p99 latency"].value is None
    assert rows["QD1 random-read p99 latency"].outcome == "not measured"
    assert [r.text for r in key_figures("g4", None)] == [ABSENT] * 5


# ---- the chain from the store ---------------------------------------------------------------

def test_a_full_real_chain_is_accept_and_summary_json_is_valid(store):
    made = full_chain(store, "r1")
    paths = write_summary(store, SITE, "r1")
    body = json.loads(paths["json"].read_text())
    jsonschema.validate(body, Summary.model_json_schema(mode="serialization"))
    summary = Summary.model_validate(body)
    assert summary.recommendation.status == ACCEPT
    assert body["summary_sha256"] == summary_digest(body)
    assert [(c.gate, c.run_id, c.record_sha256, c.report) for c in summary.chain] == [
        (g, "r1", made[g][1], f"{g}.html") for g in GATES]
    assert [c.link_ok for c in summary.chain] == [None, True, True, True]
    figures = {f.label: f.value for c in summary.chain for f in c.key_figures}
    assert figures["KV-restore bandwidth"] == 4.8
    assert figures["Throughput floor"] == 95
    assert summary.banners == [] and summary.deviations == []


def test_the_chain_follows_citations_across_runs(store):
    below = full_chain(store, "a", gates=("g1", "g2", "g3"))
    open_run(store, "b")
    add_gate(store, "b", "g4", cites=below["g3"])
    summary = build_summary(store, SITE, "b")
    assert [(c.gate, c.source, c.run_id) for c in summary.chain] == [
        ("g1", "cited by G2", "a"), ("g2", "cited by G3", "a"), ("g3", "cited by G4", "a"),
        ("g4", "this run", "b")]
    assert summary.chain[2].report == "../a/g3.html"
    seen_from_a = build_summary(store, SITE, "a")
    assert (seen_from_a.chain[3].source, seen_from_a.chain[3].run_id) == (
        "latest for the site", "b")


def test_a_record_citing_another_upstream_breaks_the_link(store):
    made = full_chain(store, "a", gates=("g1",))
    open_run(store, "b")
    g1_again = add_gate(store, "b", "g1")
    add_gate(store, "b", "g2", cites=made["g1"])  # stands on run a's G1, not b's
    summary = build_summary(store, SITE, "b")
    assert summary.chain[1].link_ok is False
    assert "not the G1 record shown (run b)" in summary.chain[1].link_note
    assert summary.chain[0].record_sha256 == g1_again[1]
    assert any(r.startswith("chain link does not verify") for r in
               summary.recommendation.reasons)


def test_a_demo_rehearsal_is_not_ready_and_says_so(store):
    g1 = full_chain(store, "r1", gates=("g1",), limits_profile="demo")["g1"]
    g2 = add_gate(store, "r1", "g2", cites=g1, limits_profile="demo", deviations=SIMULATED)
    g3 = add_gate(store, "r1", "g3", cites=g2, limits_profile="demo", deviations=SIMULATED)
    add_gate(store, "r1", "g4", cites=g3, limits_profile="demo", deviations=[
        *SIMULATED, f"{SHORTENED} (ran 120 s of the 259200 s in thresholds.toml)"])
    summary = build_summary(store, SITE, "r1", profile_description="DEMO limits for a local disk")
    assert summary.recommendation.status == NOT_READY
    assert summary.recommendation.reasons[1:] == ["simulated engine: G2, G3, G4",
                                                  "shortened rehearsal: G4"]
    assert [b.split(":")[0] for b in summary.banners] == [
        "Limits profile demo", "Simulated engine — not valid for procurement",
        "Shortened rehearsal"]
    assert [d.gate for d in summary.deviations] == ["g2", "g3", "g4", "g4"]


def test_a_site_with_no_records_has_every_gate_missing(store):
    open_run(store, "r1")
    summary = build_summary(store, SITE, "r1")
    assert summary.recommendation.reasons == ["no record: G1, G2, G3, G4"]
    assert all(c.verdict == "NO RECORD" and c.report == "" for c in summary.chain)


# ---- cost -----------------------------------------------------------------------------------

def test_no_array_named_means_no_cost_model(store):
    full_chain(store, "r1")
    cost = build_summary(store, SITE, "r1").cost
    assert not cost.configured and cost.figures == []
    assert cost.note.startswith("no cost model configured")


def test_an_unknown_array_is_named_not_priced(store):
    full_chain(store, "r1")
    cost = build_summary(store, SITE, "r1", array="FX999", catalog=CATALOG).cost
    assert not cost.configured and "'FX999' is not in the catalogue" in cost.note


def test_cost_divides_the_catalogue_price_by_what_the_gates_measured(store):
    full_chain(store, "r1")
    cost = build_summary(store, SITE, "r1", array="FX100", catalog=CATALOG).cost
    rows = {f.label: f.value for f in cost.figures}
    assert rows["Array price"] == 371200
    assert rows["Price per GB/s of KV-restore bandwidth"] == pytest.approx(371200 / 4.8)
    # The lowest measured TTFT p50 reduction (52 % at concurrency 16), never the best one.
    assert rows["Price per percentage point of TTFT p50 reduction"] == pytest.approx(
        371200 / 52)
    assert cost.currency == "CNY"


def test_the_model_prediction_is_shown_beside_the_measurement(store):
    open_run(store, "r1")
    g1 = add_gate(store, "r1", "g1", facts={"pre-flight predicted TTFT reduction": "37.0 %"})
    add_gate(store, "r1", "g2", cites=g1)
    model = build_summary(store, SITE, "r1").cost.model
    assert model == {"G1 pre-flight predicted TTFT reduction": "37.0 %"}


# ---- the page -------------------------------------------------------------------------------

def test_the_page_is_static_sealed_and_structured(store):
    g1 = full_chain(store, "r1", gates=("g1",), limits_profile="demo")["g1"]
    g2 = add_gate(store, "r1", "g2", cites=g1, limits_profile="demo", deviations=SIMULATED)
    g3 = add_gate(store, "r1", "g3", cites=g2, limits_profile="demo", deviations=SIMULATED)
    add_gate(store, "r1", "g4", cites=g3, deviations=[*SIMULATED, "window 20 s instead of 300 s"])
    html = write_summary(store, SITE, "r1")["html"].read_text()
    page = Page(html)
    assert check_seal(html) == ""
    assert "script" not in page.tags and "iframe" not in page.tags
    assert page.hrefs == ["g1.html", "g2.html", "g3.html", "g4.html"]
    assert "://" not in html
    assert page.ids["recommendation"] == "Recommendation: NOT READY FOR SIGN-OFF"
    assert "simulated engine: G2, G3, G4" in page.ids["reasons"]
    assert page.tags.count("tr") >= 4 + 3 + 1
    text = " ".join(page.text)
    for words in ("Simulated engine — not valid for procurement", "Limits profile demo",
                  "window 20 s instead of 300 s", "Buyer", "Vendor", "Witness",
                  "The results apply only to the items tested", "no cost model configured",
                  "4.8 GB/s", "Baseline TTFT p50 @ concurrency 16"):
        assert words in text, words
    assert 'counter(page) " of " counter(pages)' in html


def test_site_names_cannot_break_out_of_the_page_css(store):
    open_run(store, "r1")
    html = write_summary(store, 'evil"}</style><script>x</script>', "r1")["html"].read_text()
    assert "script" not in Page(html).tags


def test_a_summary_is_never_overwritten(store):
    full_chain(store, "r1")
    write_summary(store, SITE, "r1")
    with pytest.raises(FileExistsError):
        write_summary(store, SITE, "r1")


def test_the_summary_shows_its_signer_and_each_records(store, tmp_path):
    full_chain(store, "r1")
    unsigned = write_summary(store, SITE, "r1", signer=None)
    body = json.loads(unsigned["json"].read_text())
    page = Page(unsigned["html"].read_text())
    assert body["signer"] is None and "sig" not in unsigned
    assert page.ids["signer"].startswith("Unsigned")
    assert [c["signer"] for c in body["chain"]] == ["unsigned"] * 4
    assert embedded_records(unsigned["html"].read_text()) == [body["summary_sha256"]]
    signer = load_signer(new_key(tmp_path / "k")[0])
    full_chain(store, "r2")
    signed = write_summary(store, SITE, "r2", signer=signer)
    body = json.loads(signed["json"].read_text())
    assert body["signer"]["fingerprint"] == signer.public.fingerprint
    assert signed["sig"].is_file()
    assert grouped(signer.public.fingerprint) in Page(signed["html"].read_text()).ids["signer"]
    jsonschema.validate(body, Summary.model_json_schema(mode="serialization"))
