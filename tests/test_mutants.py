"""The mutant list of `make mutants` (tests/check_tests.py) stays true to the code it breaks.

The mutation run itself takes minutes and is not part of `make test`; this keeps its list from
rotting as the code moves: every mutant's text is in its module exactly once, and the test
module meant to catch it exists and asserts something in every test.
"""

from __future__ import annotations

from pathlib import Path

import check_tests
import pytest

GATES = Path(__file__).resolve().parent.parent / "gates"


@pytest.mark.parametrize("mutant", check_tests.MUTANTS, ids=lambda m: f"{m[0]}:{m[1][:40]}")
def test_each_mutant_breaks_code_that_exists(mutant):
    module, old, new, test = mutant
    path = GATES / module
    assert path.is_file(), f"{module}: no such module under gates/"
    found = path.read_text().count(old)
    assert found == 1, f"{module}: the mutant's text is there {found} times: {old!r}"
    assert old != new and test in check_tests.TESTS


@pytest.mark.parametrize("test", check_tests.TESTS)
def test_every_test_the_mutants_rely_on_asserts_something(test):
    path = Path(__file__).resolve().parent / test
    assert path.is_file(), f"{test}: named by a mutant but missing"
    assert check_tests.assert_free_tests(path) == []


def test_the_mutants_cover_the_core_and_the_proof():
    rooms = {m[0].split("/")[0] for m in check_tests.MUTANTS}
    assert rooms == {"core", "proof"}
