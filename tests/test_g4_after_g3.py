"""#45 item 6: G4 after a G3 that was interrupted before its repetitions were written says so,
as `kvgate verify` sees it (the record lists no repetitions file, so nothing it lists is
missing): never "missing or altered". A repetitions file the record lists and that is gone, or
was changed, is named as exactly that, as verify names it.
"""

import json

import pytest
from _chain import add_gate, open_run

from gates.core.verdicts import Measurement
from gates.report.verification import check_record
from gates.soak.setup import G3_FILE, SetupError, operating_point
from gates.store import Store


def _g3(store, reps: list | None):
    """A G3 record; reps: the candidate repetitions it wrote and lists (None: none written)."""
    open_run(store, "g3-run")
    if reps is not None:
        path = store.run_dir("g3-run") / "evidence" / G3_FILE
        path.write_text(json.dumps(reps))
        store.add_evidence("g3-run", path)
    stopped = [Measurement.error("TTFT p50 reduction", "check did not measure: interrupted")]
    add_gate(store, "g3-run", "g3", stopped)
    return store.record("g3-run", "g3")[0]


def test_g4_after_a_g3_interrupted_before_its_repetitions_says_so(tmp_path):
    with Store(tmp_path) as store:
        g3 = _g3(store, None)
        assert check_record(tmp_path / "g3-run" / "g3.json") == []  # verify: intact
        with pytest.raises(SetupError) as refused:
            operating_point(store, g3)
    said = str(refused.value)
    assert "wrote no candidate repetitions" in said and "interrupted" in said, said
    assert "altered" not in said and "missing" not in said, said


@pytest.mark.parametrize("edit, says", [("unlink", "missing"), ("write", "altered")])
def test_g4_names_a_listed_repetitions_file_as_verify_does(tmp_path, edit, says):
    rep = {"arm": "candidate", "concurrency": 8, "repetition": 0, "ttfts": [1.0],
           "output_throughput": 10.0, "sent": 1, "errors": 0}
    with Store(tmp_path) as store:
        g3 = _g3(store, [rep])
        path = tmp_path / "g3-run" / "evidence" / G3_FILE
        path.unlink() if edit == "unlink" else path.write_text("[]")
        with pytest.raises(SetupError) as refused:
            operating_point(store, g3)
    assert says in str(refused.value)
    assert any(says in p for p in check_record(tmp_path / "g3-run" / "g3.json"))


def test_a_g3_record_with_its_repetitions_gives_the_operating_point(tmp_path):
    rep = {"arm": "candidate", "concurrency": 8, "repetition": 0, "ttfts": [1.0],
           "output_throughput": 10.0, "sent": 1, "errors": 0}
    with Store(tmp_path) as store:
        assert operating_point(store, _g3(store, [rep])).concurrency == 8
