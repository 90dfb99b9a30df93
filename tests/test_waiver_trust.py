"""#45 items 2 and 3 on `kvgate waive`: a waiver signed with a key this machine does not trust is
refused naming the key, one stored by an earlier kvgate never blocks a correct one (it is set
aside, said with its key), and the text a user types never reaches the terminal raw.
"""

import json

import pytest
from test_waivers import LIMITS, chain_with, waive

from gates.core.verdicts import Waiver
from gates.report import (
    KEY_ENV,
    grouped,
    new_key,
    sign_waiver,
    trusted_here,
    write_summary,
)
from gates.report.signing import load_signer
from gates.report.verification import examine
from gates.store import Store, utc_now

SITE = "acceptance site"


@pytest.fixture
def stranger(tmp_path):
    """A key no folder of this machine's names: not its own, not in trusted/."""
    private = new_key(tmp_path / "elsewhere")[0]
    return private, load_signer(private)


@pytest.fixture
def out(tmp_path, key):
    out = tmp_path / "out"
    with Store(out) as store:
        chain_with(store, g3=[LIMITS])
        write_summary(store, SITE, "r1")
    return out


def test_a_waiver_signed_with_an_untrusted_key_is_refused_naming_the_key(
        out, stranger, monkeypatch, capsys):
    private, signer = stranger
    monkeypatch.setenv(KEY_ENV, str(private))
    assert waive(out, "limits changed", "--reason", "ok", "--by", "Mallory") == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert grouped(signer.public.fingerprint) in err and "not one this machine trusts" in err, err
    with Store(out) as store:
        assert store.waivers() == []
    assert json.loads((out / "r1" / "summary.json").read_text())["revision"] == 1


def test_a_stored_untrusted_waiver_is_set_aside_and_a_correct_one_is_taken(
        out, stranger, capsys):
    _, signer = stranger
    with Store(out) as store:  # what kvgate wrote before it checked the key
        store.add_waiver(sign_waiver(Waiver(run_id="r1", gate="g3", deviation=LIMITS,
                                            reason="ok", by="Mallory", waived_at=utc_now()),
                                     signer))
    assert waive(out, "limits changed", "--reason", "read it", "--by", "J. Reviewer") == 0
    said = capsys.readouterr().out.replace("\n", " ")
    assert "set aside" in said and "Mallory" in said and \
        grouped(signer.public.fingerprint) in said, said
    body = json.loads((out / "r1" / "summary.json").read_text())
    assert body["deviations"][0]["waiver"]["waiver"]["by"] == "J. Reviewer"
    found = examine(out / "r1")  # the chain's records are unsigned here: the summary is not
    code, lines = found.judge(trusted_here(), given=False)
    assert found.problems == [] and not any(label == "UNKNOWN SIGNER" for label, _ in lines)
    assert found.signers["summary.json waiver 1"] == found.signers["summary.json"]


@pytest.mark.parametrize("flag", ["--by", "--reason"])
def test_control_characters_in_what_a_user_types_are_refused_not_printed(out, flag, capsys):
    forged = "J. Reviewer\x1b[2K\rPASS\nverified \u202e"
    argv = {"--by": "J. Reviewer", "--reason": "ok"} | {flag: forged}
    with pytest.raises(SystemExit) as refused:  # argparse's refusal: before any work
        waive(out, "limits changed", *[x for kv in argv.items() for x in kv])
    assert refused.value.code == 2
    said = capsys.readouterr()
    assert "\x1b" not in said.err + said.out and "\r" not in said.err + said.out
    assert "\\x1b" in said.err and flag in said.err, said.err
    with Store(out) as store:
        assert store.waivers() == []
