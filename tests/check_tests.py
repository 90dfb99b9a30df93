"""Static checks that every test can fail. Not a pytest module; tests/test_mutants.py runs them.

1. Every test_* function asserts something: an ``assert``, a ``pytest.raises`` / ``pytest.fail``,
   or a call to a module helper that does.
2. No assert is a tautology: an assert of a constant (``assert True``, ``assert 1``), or a
   comparison of a plain expression with itself (``assert x == x``; ``f(a) == f(a)`` asks
   whether f is deterministic and is allowed).

Whether the assertions catch broken behaviour is mutation testing's job (tests/mutation.py).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _asserts(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assert):
            return True
        # pytest.raises / pytest.fail, and pytester's or a mock's assert_* methods
        if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                and (sub.func.attr in ("raises", "fail") or sub.func.attr.startswith("assert_"))):
            return True
    return False


def _calls(node: ast.AST) -> set[str]:
    return {sub.func.id for sub in ast.walk(node)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)}


def _asserting_helpers(tree: ast.Module) -> set[str]:
    """Module functions that assert, and those imported from the tests' own helper modules
    (tests/_*.py) that do."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)
                 and not n.name.startswith("test_")}
    found = {name for name, fn in functions.items() if _asserts(fn)}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("_"):
            source = TESTS / f"{node.module}.py"
            if source.is_file():
                theirs = _asserting_helpers(ast.parse(source.read_text()))
                found |= {a.asname or a.name for a in node.names if a.name in theirs}
    while more := {name for name, fn in functions.items()
                   if name not in found and _calls(fn) & found}:
        found |= more  # a helper that calls one that asserts
    return found


def assert_free_tests(path: Path) -> list[str]:
    """Names of test functions in path that assert nothing, directly or through a helper."""
    tree = ast.parse(path.read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    helpers = _asserting_helpers(tree)
    return [name for name, fn in functions.items()
            if name.startswith("test_") and not _asserts(fn) and not (_calls(fn) & helpers)]


def _tautology(test: ast.expr) -> bool:
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(_tautology(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
            test.ops[0], ast.Eq | ast.Is | ast.GtE | ast.LtE):
        # f() == f() checks that f is deterministic; x == x, a.b is a.b can only hold
        same = ast.dump(test.left) == ast.dump(test.comparators[0])
        return same and not any(isinstance(n, ast.Call) for n in ast.walk(test.left))
    return False


def tautologies(path: Path) -> list[str]:
    """'line N: the assert' for every assert in path that cannot fail."""
    tree = ast.parse(path.read_text())
    return [f"line {n.lineno}: assert {ast.unparse(n.test)}" for n in ast.walk(tree)
            if isinstance(n, ast.Assert) and _tautology(n.test)]


def problems() -> list[str]:
    found = []
    for path in sorted(TESTS.glob("test_*.py")):
        found += [f"{path.name}::{name} asserts nothing" for name in assert_free_tests(path)]
        found += [f"{path.name} {line}: a tautology" for line in tautologies(path)]
    return found


if __name__ == "__main__":
    for problem in problems():
        print(problem)
    sys.exit(1 if problems() else 0)
