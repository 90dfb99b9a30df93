"""`make mutants` stays true to the code it tests, and every test in the suite can fail.

The mutation run itself (mutmut over the decision code, tests/mutation.py) takes a quarter of
an hour and is not part of `make test`; this keeps its configuration from rotting as the code
moves, and runs the static checks of tests/check_tests.py over every test module.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import check_tests
import mutation
import pytest

REPO = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
# The decision code #43 names (and the modules its rules moved to): what decides a verdict
# must be under mutation. gates/engines holds G3's fair-baseline rule.
DECISION_ROOMS = {"gates/core/verdicts", "gates/core/statistics", "gates/core/configuration",
                  "gates/proof", "gates/inference", "gates/engines", "gates/soak"}


@pytest.mark.parametrize("module", CONFIG["only_mutate"])
def test_each_mutated_module_exists(module):
    assert (REPO / module).is_file(), f"[tool.mutmut] only_mutate: {module}: no such module"


@pytest.mark.parametrize("test", CONFIG["pytest_add_cli_args_test_selection"])
def test_each_selected_test_module_exists_and_runs_no_subprocess(test):
    path = REPO / test
    assert path.is_file(), f"[tool.mutmut] test selection: {test}: no such file"
    # a subprocess imports the unmutated package: its verdict says nothing about a mutant
    assert "subprocess" not in path.read_text(), test


def test_the_decision_rooms_are_all_under_mutation():
    assert {str(Path(m).parent) for m in CONFIG["only_mutate"]} == DECISION_ROOMS


def test_a_mutant_name_maps_to_its_module():
    assert mutation.module_of("gates.core.verdicts.verdict.xǁLimitǁat_least__mutmut_1") == \
        "gates/core/verdicts/verdict.py"
    assert mutation.module_of("gates.soak.rules.x_window_rule__mutmut_12") == "gates/soak/rules.py"


def test_every_named_equivalent_says_why():
    for name, why in mutation.equivalents().items():
        assert why.strip(), f"{name}: an equivalent mutant needs its reason"
        assert mutation.module_of(name) in CONFIG["only_mutate"], name


def test_every_test_asserts_something_and_none_is_a_tautology():
    assert check_tests.problems() == []


def test_the_static_check_finds_what_it_claims_to(tmp_path):
    bad = tmp_path / "test_bad.py"
    bad.write_text("def test_silent():\n    x = 1\n\n\ndef test_same():\n    a = 2\n"
                   "    assert a == a\n\n\ndef test_fine():\n    assert f() == f()\n")
    assert check_tests.assert_free_tests(bad) == ["test_silent"]
    assert check_tests.tautologies(bad) == ["line 7: assert a == a"]


def test_a_module_the_saved_test_map_knows_nothing_of_is_found(tmp_path):
    """A decision module added to only_mutate after mutmut saved its map has no test there:
    make mutants rebuilds the map rather than call all its mutants untested."""
    stats = tmp_path / "mutmut-stats.json"
    known = {f"{m.removesuffix('.py').replace('/', '.')}.x_f": [] for m in CONFIG["only_mutate"]}
    stats.write_text(json.dumps({"tests_by_mangled_function_name": known}))
    assert mutation.unmapped(stats) == []
    del known["gates.soak.load_rules.x_f"]
    stats.write_text(json.dumps({"tests_by_mangled_function_name": known}))
    assert mutation.unmapped(stats) == ["gates.soak.load_rules."]
    assert mutation.unmapped(tmp_path / "none.json") == []
