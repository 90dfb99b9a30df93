"""examples/: every ready site file loads, has the three arms, is listed in the README, and names
only proof signals (its comments, the README table) that its engine adapter reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gates.core.configuration import load_site, validate_arms
from gates.inference import ArmProcess
from gates.proof.adapters import ADAPTERS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FILES = sorted(EXAMPLES.glob("*.toml"))
KEY = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*=")


def test_there_are_examples():
    assert len(FILES) >= 4, f"expected the ready site files in {EXAMPLES}"


@pytest.fixture(params=FILES, ids=[f.name for f in FILES])
def example(request):
    path = request.param
    site, _ = load_site(path)
    return path, site


def test_loads_with_the_three_arms(example):
    path, site = example
    assert {"baseline", "candidate", "recompute"} <= set(site.arms), path.name
    assert validate_arms(site.arms, ("baseline", "candidate")) == []
    assert validate_arms(site.arms, ("baseline", "candidate", "recompute")) == []


def test_names_known_engine_adapters(example):
    path, site = example
    for name, arm in site.arms.items():
        assert arm.engine in ADAPTERS, f"{path.name} arms.{name}: engine {arm.engine!r}"
    assert site.arms["candidate"].engine != "kvgate-sim", path.name


def test_kv_dirs_are_where_kvgate_may_empty_them(example):
    path, site = example
    for name, arm in site.arms.items():
        if arm.kind == "endpoint":
            # kvgate empties kv_dir before every run: never under an engine someone else runs.
            assert arm.kv_dir is None, f"{path.name} arms.{name} is an endpoint with a kv_dir"
            continue
        if arm.kv_dir is None:
            continue
        roots = [site.target.directory] + ([arm.kv_root] if arm.kv_root else [])
        assert any(r in arm.kv_dir.parents for r in roots), f"{path.name} arms.{name}"
    candidate = site.arms["candidate"]
    if candidate.kv_dir is not None:
        assert site.target.directory in candidate.kv_dir.parents, "candidate KV off the array"


def test_json_arguments_render_to_valid_json(example, tmp_path):
    path, site = example
    for name, arm in site.arms.items():
        if arm.kind != "launch":
            continue
        process = ArmProcess(name, arm, tmp_path / "arm.log", run_id="r1")
        process.port = 8000
        argv, env = process.command()
        for text in [*argv, *env.values()]:
            if text.startswith("{"):
                json.loads(text)  # doubled braces came out single, placeholders filled in
        assert not any("{" in a and "}" in a and not a.startswith("{") for a in argv), argv


def test_storage_arms_launch_the_same_command(example):
    path, site = example
    base, cand = site.arms["baseline"], site.arms["candidate"]
    assert base.kind == cand.kind
    if base.kind == "launch":
        assert base.command == cand.command, f"{path.name}: only kv_dir may differ"
        assert base.env == cand.env, f"{path.name}: only kv_dir may differ"
    assert base.engine == cand.engine and base.model == cand.model


def test_every_key_has_a_comment(example):
    path, _ = example
    bare = [f"{n}: {line}" for n, line in enumerate(path.read_text().splitlines(), 1)
            if KEY.match(line) and "#" not in line]
    assert not bare, f"{path.name}: keys without a comment:\n" + "\n".join(bare)


def test_readme_lists_every_file():
    readme = (EXAMPLES / "README.md").read_text()
    for path in FILES:
        assert f"]({path.name})" in readme, f"README.md does not list {path.name}"


# ---- proof signals named in the examples are ones an adapter reads -------------------------

SERIES = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?")
LABEL = re.compile(r'(\w+)="([^"]*)"')
SIGNAL = re.compile(r"^#\s+signal\s+(\S+)", re.M)


def read_by(adapter: str, claim: str) -> bool:
    """Whether one of the adapter's rules matches the series `name{label="value",...}`."""
    found = SERIES.fullmatch(claim)
    assert found, f"{claim!r} is not a series"
    name, labels = found[1], dict(LABEL.findall(found[2] or ""))
    # A rule that filters a label needs the claim to name a value it takes; labels the rule does
    # not filter are added up by it, so any value is read.
    return any(re.fullmatch(r.pattern, name) and
               all(k in labels and re.fullmatch(v, labels[k]) for k, v in r.labels.items())
               for rules in ADAPTERS[adapter].values() for r in rules)


def test_the_signals_an_example_names_are_read_by_its_adapter(example):
    path, site = example
    claims = SIGNAL.findall(path.read_text())
    assert claims, f"{path.name}: name the proof signals in '#   signal NAME' comment lines"
    engine = site.arms["candidate"].engine
    wrong = [c for c in claims if not read_by(engine, c)]
    assert not wrong, f"{path.name}: the {engine!r} adapter reads none of {wrong}"


def test_the_readme_tables_signals_are_read_by_the_named_adapter():
    rows = [line.split(" | ") for line in (EXAMPLES / "README.md").read_text().splitlines()
            if line.startswith("| ") and "](" in line]
    assert len(rows) == len(FILES)
    for row in rows:
        adapter, signals = row[2].strip("` "), row[3]
        assert adapter in ADAPTERS, row[1]
        claims = re.findall(r"`([^`]+)`", signals)
        assert claims, f"README.md row {row[1]}: no proof signal named"
        wrong = [c for c in claims if not read_by(adapter, c)]
        assert not wrong, f"README.md row {row[1]}: the {adapter!r} adapter reads none of {wrong}"
