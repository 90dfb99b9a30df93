"""#45 item 3: text a user types never reaches the terminal raw.

gates.core.text.shown is the one place that decides what of a user's text a terminal line may
show: every control character (escape sequences, carriage returns, line breaks, bidirectional
overrides) as its escape. Where text comes in (a site file, an option) it is refused instead;
where it comes back out of a file kvgate did not write itself (a summary edited by hand), the
line is printed through shown().
"""

import json
import unicodedata
from argparse import ArgumentTypeError

import pytest
from _configcheck import check, refused
from hypothesis import given
from hypothesis import strategies as st
from test_waivers import LIMITS, chain_with, waive

from gates.cli import main
from gates.commands.compare import candidate
from gates.core.text import shown
from gates.report import write_summary
from gates.store import Store

CONTROL = {"Cc", "Cf", "Zl", "Zp", "Cs"}
FORGED = "J. Reviewer\x1b[2K\r\nsigned by 0000 0000, intact\u202e"


@given(st.text())
def test_shown_is_one_line_without_a_control_character_and_leaves_plain_text_alone(text):
    out = shown(text)
    assert not any(unicodedata.category(c) in CONTROL for c in out)
    assert len(out.splitlines()) <= 1
    if not any(unicodedata.category(c) in CONTROL for c in text):
        assert out == text
    for c in {c for c in text if unicodedata.category(c) in CONTROL}:
        assert f"{ord(c):02x}" in out or {"\n": "\\n", "\r": "\\r", "\t": "\\t"}[c] in out


def test_a_name_on_the_compare_command_line_with_an_escape_is_refused():
    with pytest.raises(ArgumentTypeError, match=r"\\x1b"):
        candidate("20261204T100000Z-aaaaaa=FX100\x1b[2J")


@pytest.mark.parametrize("key_name, old", [
    ("site.name", 'name = "embedded default (local disk)"'),
])
def test_a_site_name_with_control_characters_is_refused_by_config_check(tmp_path, capsys,
                                                                          key_name, old):
    new = old.split("=")[0] + '= "evil\\u001b[2J\\nPASS"'
    code, err, site, _ = check(tmp_path, capsys, site=[(old, new)])
    refused(code, err, site, f"key '{key_name}'", "\\x1b")
    assert "\x1b" not in err


def test_verify_prints_a_forged_name_in_an_edited_summary_escaped(tmp_path, key, capsys):  # noqa: F811
    out = tmp_path / "out"
    with Store(out) as store:
        chain_with(store, g3=[LIMITS])
        write_summary(store, "acceptance site", "r1")
    assert waive(out, "limits changed", "--reason", "ok", "--by", "J. Reviewer") == 0
    path = out / "r1" / "summary.json"
    body = json.loads(path.read_text())
    body["deviations"][0]["waiver"]["waiver"]["by"] = FORGED
    path.write_text(json.dumps(body))
    capsys.readouterr()
    assert main(["verify", str(out / "r1")]) == 1
    said = capsys.readouterr()
    assert "\x1b" not in said.out + said.err and "\u202e" not in said.out
    assert not any(line.startswith("signed by") for line in said.out.splitlines()), said.out
    assert "J. Reviewer\\x1b[2K\\r\\nsigned by" in said.out, said.out
