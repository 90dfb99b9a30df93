"""#45 item 4, the parts that need no engine: what a sweep measures, compared on resume
(gates.sweep.measures.changed), and a size's evidence tag after an attempt stopped mid-size
(attempt_tag): a resumed size never writes (nor lists) an evidence name twice.
"""

from pathlib import Path

from _configcheck import REPO

from gates.core.configuration import load_site
from gates.sweep.measures import attempt_tag, changed, measured

SHA = "a" * 64


def _site(tmp_path: Path, old: str = "", new: str = ""):
    text = (REPO / "site.toml").read_text()
    path = tmp_path / f"site-{abs(hash(new))}.toml"
    path.write_text(text.replace(old, new) if old else text)
    return load_site(path, REPO)[0]


def test_a_resume_on_another_site_target_or_arm_is_refused_naming_both_values(tmp_path):
    began = measured(_site(tmp_path), SHA)
    assert changed("R", began, measured(_site(tmp_path), SHA)) == ""
    moved = _site(tmp_path, 'name = "embedded default (local disk)"', 'name = "another site"')
    said = changed("R", began, measured(moved, SHA))
    assert 'site.name = "embedded default (local disk)" then, "another site" now' in said
    capped = _site(tmp_path, '"--kv-dir", "{kv_dir}",',
                   '"--kv-dir", "{kv_dir}", "--read-limit", "1MB/s",')
    said = changed("R", began, measured(capped, SHA))
    assert "arms.baseline.command = [" in said and "--read-limit" in said
    assert "thresholds (SHA-256)" in changed("R", began, measured(_site(tmp_path), "b" * 64))


def test_a_plan_written_before_kvgate_kept_what_it_measures_is_not_refused(tmp_path):
    assert changed("R", {}, measured(_site(tmp_path), SHA)) == ""


def test_a_size_stopped_mid_way_is_measured_again_under_names_of_its_own():
    assert attempt_tag(5, []) == "-5ctx"
    assert attempt_tag(5, ["evidence/sweep-arm-baseline-15ctx-c2-r1.log"]) == "-5ctx"
    first = ["evidence/sweep-arm-baseline-5ctx-c2-r1.log", "sweep-5ctx-devref-1.json"]
    assert attempt_tag(5, first) == "-5ctx-try2"
    assert attempt_tag(5, [*first, "evidence/sweep-arm-candidate-5ctx-try2-c2-r1.log"]) == \
        "-5ctx-try3"
