"""The comparison's folder (gates.report.comparison_page) and `kvgate verify` of it
(gates.report.comparison_check), on chains of records in a real store and its run folders.

An intact, signed comparison verifies; one edited and rehashed (a ranking swapped, an interval
narrowed, a verdict changed), one whose page was edited, one whose cited record is gone, and
one with a file added are each named. The page's print to PDF is tested in test_browser.
"""

import json
import subprocess
import sys

import pytest
from _chain import SITE, add_gate
from test_compare import chain, gains
from test_verify import sign_records

from gates.commands.compare import text_lines
from gates.model import SHIPPED_CATALOG, load_catalog
from gates.report import compare, examine, new_key, write_comparison, write_summary
from gates.report.comparison_page import COMPARISON_HASH_KEY, comparison_digest
from gates.report.signing import load_signer
from gates.store import Store


@pytest.fixture
def reports(tmp_path):
    """A reports folder with a fast and a slow candidate's chains."""
    with Store(tmp_path) as store:
        chain(store, "run-fast", gains(60.0, 45.0))
        chain(store, "run-slow", gains(30.0, 31.0))
    return tmp_path


@pytest.fixture
def signer(tmp_path_factory):
    return load_signer(new_key(tmp_path_factory.mktemp("performer") / "k")[0])


def written(reports, signer=None):
    """The comparison of the two candidates, written (signed when signer is given)."""
    with Store.reading(reports) as store:
        c = compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")],
                    load_catalog(SHIPPED_CATALOG))
    return write_comparison(reports, c, signer)


def rewrite(path, edit):
    """comparison.json edited and its own SHA-256 recomputed: what a careful forger does."""
    body = json.loads(path.read_text())
    edit(body)
    body[COMPARISON_HASH_KEY] = comparison_digest(body)
    path.write_text(json.dumps(body, sort_keys=True, indent=2) + "\n")


def test_a_signed_comparison_verifies_intact_by_its_signer(reports, signer):
    for run_id in ("run-fast", "run-slow"):  # what it cites is verified with it (#45)
        sign_records(reports / run_id, signer)
    files = written(reports, signer)
    assert sorted(p.name for p in files["json"].parent.iterdir()) == [
        "comparison.html", "comparison.json", "comparison.json.sig"]
    found = examine(files["json"].parent)
    assert found.problems == []
    code, lines = found.judge({signer.public.fingerprint}, given=True)
    assert code == 0 and "signed by" in lines[0][1] and "intact" in lines[0][1]
    html = files["html"].read_text()
    assert "1</td><td>FX300</td>" in html and "Comparison SHA-256" in html
    assert json.loads(files["json"].read_text())["signer"]["fingerprint"] == \
        signer.public.fingerprint


def test_an_unsigned_comparison_is_intact_but_unsigned(reports):
    found = examine(written(reports)["json"].parent)
    assert found.problems == []
    code, lines = found.judge(set(), given=False)
    assert code == 4 and lines[0][0] == "UNSIGNED"


def _swap_first_ranking(body):
    first = body["rankings"][0]["ranked"]
    first[0]["estimate"], first[1]["estimate"] = first[1]["estimate"], first[0]["estimate"]


def _narrow(body):
    for col in body["columns"]:
        for g in col["gains"]:
            g["estimate"]["lo"] = g["estimate"]["point"] - 0.1


def _verdict(body):
    body["columns"][0]["verdicts"]["g4"] = "PASS" if body["columns"][0]["verdicts"]["g4"] \
        != "PASS" else "FAIL"


@pytest.mark.parametrize("edit, says", [
    (_swap_first_ranking, "its rankings are not the ones its candidates' intervals give"),
    (_narrow, "its G3 gains are not those of the G3 record it cites"),
    (_verdict, "FX100: it shows G4 FAIL, but the record it cites says PASS"),
    (lambda b: b.update(risk="No risk at all."), "it states the risk 'No risk at all.'"),
])
def test_a_comparison_edited_and_rehashed_is_named(reports, signer, edit, says):
    files = written(reports, signer)
    rewrite(files["json"], edit)
    problems = examine(files["json"].parent).problems
    assert any(says in p for p in problems), problems
    assert any("signature invalid" in p for p in problems), problems


def test_an_edited_page_a_missing_record_and_an_added_file_are_named(reports, signer):
    files = written(reports, signer)
    folder = files["json"].parent
    files["html"].write_text(files["html"].read_text().replace("FX300", "FX999"))
    (reports / "run-fast" / "g3.json").unlink()
    (folder / "notes.txt").write_text("added")
    problems = examine(folder).problems
    assert any(p.startswith("comparison.html: the report was altered") for p in problems)
    assert any("cites g3 of run run-fast, which is not here" in p for p in problems)
    assert any(p.startswith("notes.txt: unlisted") for p in problems)


def test_a_second_comparison_in_the_same_second_is_refused_not_mixed(reports):
    with Store.reading(reports) as store:
        c = compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")])
    write_comparison(reports, c, None)
    with pytest.raises(FileExistsError):
        write_comparison(reports, c, None)


def test_compare_writes_the_folder_verify_checks_it_and_bundle_packs_it(reports, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys")
    private, public, _ = new_key(keys / "performer")
    env = {"KVGATE_SIGNING_KEY": str(private), "KVGATE_KEY_DIR": str(keys)}
    with Store(reports) as store:  # each run's summary, as a real run folder holds it
        for run_id in ("run-fast", "run-slow"):
            write_summary(store, SITE, run_id, signer=None)
    run = lambda *a: subprocess.run([sys.executable, "-m", "gates.cli", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120,
                                    env={**__import__("os").environ, **env})
    done = run("compare", "run-slow=FX100", "run-fast=FX300", "--out", str(reports))
    assert done.returncode == 0, done.stderr
    folder = next(reports.glob("compare-*"))
    assert f"comparison: {folder / 'comparison.html'}" in done.stdout
    checked = run("verify", "--key", str(public), str(folder))
    # The comparison is signed, but the records it cites (tests/_chain.py) are not: verify
    # re-verifies them with it (#45), so it is intact but UNSIGNED, naming those records.
    assert checked.returncode == 4 and "ALTERED" not in checked.stdout, checked.stdout
    unsigned = next(line for line in checked.stdout.splitlines() if line.startswith("UNSIGNED"))
    assert "../run-fast/g3.json" in unsigned and "comparison.json" not in unsigned
    bundled = run("bundle", folder.name, "--out", str(reports))
    assert bundled.returncode == 0, bundled.stderr
    archive = reports / f"{folder.name}.bundle.tar.gz"
    assert "run(s) compare-" in bundled.stdout and "run-fast, run-slow" in bundled.stdout
    whole = run("verify", "--key", str(public), str(archive))
    # The chains' records here are written unsigned (tests/_chain.py): intact, but UNSIGNED.
    assert whole.returncode == 4 and "ALTERED" not in whole.stdout, whole.stdout
    unsigned = next(line for line in whole.stdout.splitlines() if line.startswith("UNSIGNED"))
    assert "run-fast/g3.json" in unsigned and "comparison.json" not in unsigned
    (reports / "run-slow" / "g1.json").unlink()
    broken = run("verify", "--key", str(public), str(folder))
    assert broken.returncode == 1 and "cites g1 of run run-slow, which is not here" in \
        broken.stdout


def test_a_g4_only_run_citing_another_runs_chain_verifies(reports, signer):
    # The column of run-b stands on run-fast's G1 -> G3: its cited records are found there.
    with Store(reports) as store:
        store.begin_run("run-b", "acceptance site")
        add_gate(store, "run-b", "g4", cites=store.record("run-fast", "g3"))
        c = compare(store, [("run-b", "B"), ("run-slow", "S")])
    files = write_comparison(reports, c, signer)
    assert examine(files["json"].parent).problems == []
    runs = {r.run_id for r in c.columns[0].records}
    assert runs == {"run-b", "run-fast"}


def test_g1_figures_carry_their_limit_and_what_g1_said_of_the_ceiling(tmp_path):
    from _chain import PASSING, open_run
    ceiling = "92 % of the 5.65 GB/s ceiling (site [topology] 2 x 25 Gb/s)"
    g1 = [x.model_copy(update={"note": ceiling}) if x.id == "g1.seq_read_bw" else x
          for x in PASSING["g1"]]
    with Store(tmp_path) as store:
        open_run(store, "run-a")
        cites = add_gate(store, "run-a", "g1", g1)
        for gate in ("g2", "g3", "g4"):
            cites = add_gate(store, "run-a", gate, gains(60.0, 45.0) if gate == "g3" else None,
                             cites)
        chain(store, "run-b", gains(30.0, 31.0))
        c = compare(store, [("run-a", "A"), ("run-b", "B")])
    seq = next(f for f in c.columns[0].g1 if f.id == "g1.seq_read_bw")
    assert seq.note == ceiling and seq.limit == "x >= 4 GB/s"
    assert ceiling in write_comparison(tmp_path, c, None)["html"].read_text()


def test_capacity_needed_gives_each_arrays_count_and_price_and_verify_recomputes_it(reports):
    with Store.reading(reports) as store:
        c = compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")],
                    load_catalog(SHIPPED_CATALOG), capacity_needed=1_000 * 10**12)
    fx100, fx300 = c.columns
    for col in (fx100, fx300):  # ceil(1000 TB / its capacity) arrays, each at its price
        assert col.arrays_needed == -(-1000 // int(col.capacity_tb))
        assert col.price_for_capacity == col.arrays_needed * col.price
    assert "FX300: 6 x 184.3 TB arrays hold the site's 1,000 TB, for ¥5,544,000" in \
        text_lines(c)
    files = write_comparison(reports, c, None)
    assert "To hold the working set" in files["html"].read_text()
    assert examine(files["json"].parent).problems == []
    rewrite(files["json"], lambda b: b["columns"][0].update(arrays_needed=1))
    assert any("FX100: its prices are not the ones its price, capacity and gains give" in p
               for p in examine(files["json"].parent).problems)


@pytest.mark.parametrize("given, says", [
    ("300", "has no unit"), ("0TB", "not a capacity"), ("-5TB", ""),
    ("2000000TB", "not a capacity"), ("nanTB", ""), ("12 parsecs", "unknown size unit")])
def test_a_capacity_that_is_no_capacity_is_refused_by_the_command(reports, given, says):
    done = subprocess.run([sys.executable, "-m", "gates.cli", "compare", "run-slow=FX100",
                           "run-fast=FX300", "--out", str(reports), "--capacity", given],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--capacity" in done.stderr and says in done.stderr
    assert "Traceback" not in done.stderr and not list(reports.glob("compare-*"))


def test_a_write_that_fails_half_way_leaves_no_half_comparison(reports, monkeypatch):
    import gates.report.comparison_page as page
    real = page.write_new

    def full_disk(path, text):
        if path.name == "comparison.html":
            raise OSError(28, "No space left on device")
        return real(path, text)

    monkeypatch.setattr(page, "write_new", full_disk)
    with pytest.raises(OSError, match="No space left"):
        written(reports)
    assert [p.name for p in reports.iterdir() if "compare" in p.name] == []


# ---- a candidate's working-set sweep: its break-even, cited by its hash ---------------------

def swept(reports):
    """A sweep of run-fast's tier, written as `kvgate sweep` writes it, and its folder."""
    from test_sweep_check import RUN, point

    from gates.report import SweepRecord, write_sweep
    from gates.store import sha256_file

    evidence = reports / RUN / "evidence"
    evidence.mkdir(parents=True)
    (evidence / "sweep-arm.log").write_text("engine log\n")
    record = SweepRecord(run_id=RUN, created="2026-12-05T12:00:00+00:00", site="s",
                         engine="e", simulated=True, workload_hash="w", thresholds_revision="r",
                         thresholds_sha256="t", concurrency=8, pairs=3, context_bytes=1000,
                         points=[point(9, [2.0, 2.1, 2.2], [1.9, 2.0, 2.1], proof="ERROR"),
                                 point(17, [4.0, 4.1, 4.2], [1.0, 1.1, 1.2])],
                         break_even=17000, proof_from=17000, sizes_planned=2,
                         evidence={"evidence/sweep-arm.log":
                                   sha256_file(evidence / "sweep-arm.log")})
    return RUN, write_sweep(reports, record, signer=None)["json"].parent


def test_a_candidates_sweep_gives_its_break_even_and_verify_holds_it_to_the_sweep(reports):
    from gates.report import CompareError
    from gates.report.sweep_check import sweep_digest

    run, sweep = swept(reports)
    with Store.reading(reports) as store:
        c = compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")], sweeps={"FX300": run})
        with pytest.raises(CompareError, match="--sweep names the array 'FX200', which is none"):
            compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")],
                    sweeps={"FX200": run})
    fast, slow = c.columns[1], c.columns[0]
    assert slow.sweep is None and fast.sweep.id == sweep.name
    assert (fast.sweep.break_even, fast.sweep.proof_from, fast.sweep.simulated) == \
        (17000, 17000, True)
    assert any(line == f"FX300: sweep {sweep.name}: both gains clear G3's limits from "
               "16.6 KiB of KV up" for line in text_lines(c)), text_lines(c)
    folder = write_comparison(reports, c, None)["json"].parent
    html = (folder / "comparison.html").read_text()
    assert 'id="sweeps"' in html and "no sweep named" in html and fast.sweep.sweep_sha256 in html
    assert examine(folder).problems == []
    # the sweep edited and rehashed by a careful forger: the comparison no longer stands on it
    body = json.loads((sweep / "sweep.json").read_text())
    body["break_even"] = 9000
    body["sweep_sha256"] = sweep_digest(body)
    (sweep / "sweep.json").write_text(json.dumps(body, sort_keys=True, indent=2) + "\n")
    assert any(f"FX300: it states its sweep {sweep.name} as it is not" in p
               for p in examine(folder).problems)
    # and one altered without its hash is refused by compare, naming it
    body["break_even"] = 17000
    (sweep / "sweep.json").write_text(json.dumps(body, sort_keys=True, indent=2) + "\n")
    with Store.reading(reports) as store, pytest.raises(CompareError, match="was altered"):
        compare(store, [("run-slow", "FX100"), ("run-fast", "FX300")], sweeps={"FX300": run})


def test_the_command_names_a_sweep_per_array_and_bundle_packs_it(reports):
    run, sweep = swept(reports)
    cli = lambda *a: subprocess.run([sys.executable, "-m", "gates.cli", *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=120)
    done = cli("compare", "run-slow=FX100", "run-fast=FX300", "--out", str(reports),
               "--sweep", f"{sweep.name}=FX300")
    assert done.returncode == 0, done.stderr
    assert f"FX300: sweep {sweep.name}: both gains clear" in done.stdout
    folder = next(reports.glob("compare-*"))
    packed = cli("bundle", folder.name, "--out", str(reports))
    assert packed.returncode == 0, packed.stderr
    assert f"{run}, " in packed.stdout and sweep.name in packed.stdout
    twice = cli("compare", "run-slow=FX100", "run-fast=FX300", "--out", str(reports),
                "--sweep", f"{run}=FX300", "--sweep", f"{run}=FX300")
    assert twice.returncode == 2 and "names one array twice" in twice.stderr
    bad = cli("compare", "run-slow=FX100", "run-fast=FX300", "--out", str(reports),
              "--sweep", "FX300")
    assert bad.returncode == 2 and "write SWEEP=ARRAY" in bad.stderr and \
        "Traceback" not in bad.stderr
