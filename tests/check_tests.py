"""Do the tests of core/ and proof/ catch broken behaviour? Run: make mutants

Not a pytest module (pytest does not collect it). Two checks:

1. Static: every test_* function in the checked modules asserts something: an ``assert``, a
   ``pytest.raises`` / ``pytest.fail``, or a call to a module helper that does.
2. Mutants: each entry of MUTANTS breaks one behaviour in a throw-away copy of the package;
   the matching test module must then fail (pytest exit status 1). The unmutated copy must
   pass. The working tree is never touched.

Exit status 0 when every test asserts, every mutant is caught and the baseline passes.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Every test module a mutant names, and only those, is run on the copy.
TESTS = sorted({"test_units.py", "test_verdict.py", "test_config.py", "test_steady.py",
                "test_paired.py", "test_evidence.py", "test_proof_rules.py", "test_tiers.py",
                "test_g2g3.py"})

# (module under gates/, text to replace, replacement, test module that must catch it)
MUTANTS: list[tuple[str, str, str, str]] = [
    # _units
    ("core/units.py", '"gib": 1024**3', '"gib": 1000**3', "test_units.py"),
    ("core/units.py", '"gbit/s": 1e9 / 8', '"gbit/s": 1e9', "test_units.py"),
    ("core/units.py", 'key = unit[0].lower() + "bit/s"', "key = unit.lower()", "test_units.py"),
    ("core/units.py", '"h": 3600.0', '"h": 60.0', "test_units.py"),
    ("core/units.py", "total += float(number)", "total = float(number)", "test_units.py"),
    ("core/units.py", "        raise UnitError(f\"unknown size unit",
     "        raise ValueError(f\"unknown size unit", "test_units.py"),
    ("core/units.py", "if unit not in DURATION_UNITS:", "if False:", "test_units.py"),
    ("core/units.py", "seconds >= factor and seconds % factor == 0", "seconds >= factor",
     "test_units.py"),
    ("core/units.py", "return int((Decimal(number) * factor).to_integral_value(ROUND_HALF_UP))",
     "return int(float(number) * factor)", "test_units.py"),
    ("core/units.py", "not math.isfinite(number) or number < 0", "not math.isfinite(number)",
     "test_units.py"),
    ("core/units.py", 'return f"{gb} GB/s" if', 'return f"{float(gb):.4g} GB/s" if False or',
     "test_units.py"),
    # _verdict
    ("core/verdict.py", "value < self.lo or", "value <= self.lo or", "test_verdict.py"),
    ("core/verdict.py", "return Outcome.PASS if counted else Outcome.ERROR", "return Outcome.PASS",
     "test_verdict.py"),
    ("core/verdict.py", "for worst in (Outcome.FAIL, Outcome.ERROR,",
     "for worst in (Outcome.ERROR, Outcome.FAIL,", "test_verdict.py"),
    ("core/verdict.py", "if math.isnan(value):", "if False:", "test_verdict.py"),
    ("core/verdict.py", "< self.marginal * abs(bound)", "< 0 * abs(bound)", "test_verdict.py"),
    ("core/verdict.py", "if interval is not None and not all(", "if False and not all(",
     "test_verdict.py"),
    ("core/verdict.py", "x {'>=' if self.lo_inclusive else '>'}",
     "x {'>' if self.lo_inclusive else '>='}", "test_verdict.py"),
    ("core/verdict.py", '(f" (relative to {self.relative_to})" if self.relative_to else "")', '""',
     "test_verdict.py"),
    ("core/verdict.py", "key=lambda m: SEVERITY.index(m.outcome)",
     "key=lambda m: -SEVERITY.index(m.outcome)", "test_verdict.py"),
    ("core/verdict.py", "self.lo > self.hi\n", "self.lo > self.hi * 2\n", "test_verdict.py"),
    ("core/verdict.py", "math.isnan(b)", "False", "test_verdict.py"),
    ("core/verdict.py", "gaps.append(value - self.lo)", "gaps.append(self.lo - value)",
     "test_verdict.py"),
    ("core/verdict.py", "map(Outcome, outcomes)", "outcomes", "test_verdict.py"),
    ("core/verdict.py", 'f"{x:.0f}" if 1e4 <= abs(x) < 1e16 else ', "", "test_verdict.py"),
    # _record
    ("core/record.py", "json.dumps(kept, sort_keys=True", "json.dumps(kept, sort_keys=False",
     "test_verdict.py"),
    ("core/record.py", "for m in self.measurements])", "for m in self.measurements[:1]])",
     "test_verdict.py"),
    ("core/record.py", "json.loads(self.model_dump_json())", 'self.model_dump(mode="json")',
     "test_verdict.py"),
    # _config and _settings
    ("core/config.py", "cutoff=0.6", "cutoff=1.0", "test_config.py"),
    ("core/config.py", "site.resolve_paths((base or path.parent).resolve())",
     "site.resolve_paths(Path.cwd())", "test_config.py"),
    ("core/config.py", "    for name, override in overrides.items():",
     "    for name, override in []:", "test_config.py"),
    ("core/config.py", "merged[key] = _merge(merged[key], value)", "merged[key] = value",
     "test_config.py"),
    ("core/config.py", "self.file = str(file)", 'self.file = "?"', "test_config.py"),
    ("core/config.py", "except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError)",
     "except (UnicodeDecodeError,)", "test_config.py"),
    ("core/config.py", """hint = f" — did you mean '{close[0]}'?" if close else ""\n""",
     'hint = ""\n', "test_config.py"),
    ("core/config.py", "for k in LOADER_FIELDS.get(model, ()) if k in data]",
     "for k in LOADER_FIELDS.get(model, ()) if False]", "test_config.py"),
    ("core/config.py", 'f"[{part}]" if isinstance(part, int) else', "", "test_config.py"),
    ("core/settings.py", "if self.runtime < ss.ramp + ss.window + 1:", "if False:",
     "test_config.py"),
    ("core/strict.py", 'extra="forbid"', 'extra="ignore"', "test_config.py"),
    ("core/settings.py", "if value < ROUNDS:", "if False:", "test_config.py"),
    ("core/thresholds.py", "default=0.0, ge=0.0, lt=100.0,", "default=0.0,",
     "test_config.py"),
    ("core/thresholds.py", "if self.throughput_gain_min > self.throughput_gain_claimed_max:",
     "if False:", "test_config.py"),
    # _steady
    ("core/steady.py", "tail = data[len(data) - size * rounds:]", "tail = data[:size * rounds]",
     "test_steady.py"),
    ("core/steady.py", "* (len(rounds) - 1) / mean", "* len(rounds) / mean", "test_steady.py"),
    ("core/steady.py", "(max(rounds) - min(rounds)) / mean",
     "(max(rounds) - min(rounds)) / max(rounds)", "test_steady.py"),
    ("core/steady.py", "data[-1] == 0", "data[-1] == -1", "test_steady.py"),
    ("core/steady.py", "return sxy / sxx if sxx else 0.0", "return sxy / sxx / 2 if sxx else 0.0",
     "test_steady.py"),
    ("core/steady.py", "mean_x = (n - 1) / 2", "mean_x = n / 2", "test_steady.py"),
    ("core/steady.py", "if mean <= 0:", "if mean < 0:", "test_steady.py"),
    # core/paired: G3's sign-test interval and its looks
    ("core/paired.py", "while k + 1 <= n // 2 and binomial_tail(n, k) <= tail:",
     "while k + 1 <= n // 2 and binomial_tail(n, k) <= 2 * tail:", "test_paired.py"),
    ("core/paired.py", "return statistics.median(xs), xs[k - 1], xs[len(xs) - k]",
     "return statistics.median(xs), xs[k], xs[len(xs) - k - 1]", "test_paired.py"),
    ("core/paired.py", 'return 100 * (1 - ratio) if metric == "reduction" else',
     'return 100 * (ratio - 1) if metric == "reduction" else', "test_paired.py"),
    ("core/paired.py", "if not (math.isfinite(v) and v > 0)]", "if False]", "test_paired.py"),
    ("core/paired.py", "elif not any(limit.contains(v) for v in ends) and not",
     "elif not", "test_paired.py"),
    # proof/evidence: the chain's verdict
    ("proof/evidence.py", "ok = value >= lo and (hi is None or value <= hi)",
     "ok = value >= lo", "test_evidence.py"),
    ("proof/evidence.py", "    if unsure:\n", "    if False:\n", "test_evidence.py"),
    ("proof/evidence.py", "if not any(s.kind is Kind.STORAGE for s in agreeing):",
     "if False:", "test_evidence.py"),
    ("proof/evidence.py", "if all(s.caveat for s in engine) and not any(",
     "if False and not any(", "test_evidence.py"),
    # proof/chainrows, tiers: floors, ceilings and unknown labels
    ("proof/chainrows.py", "    if value > ceiling:\n", "    if False:\n", "test_proof_rules.py"),
    ("proof/chainrows.py", "return value is not None and not (math.isfinite(value) and value >= 0)",
     "return False", "test_evidence.py"),
    ("proof/chainrows.py", "GPU_HIT_MAX = 1.0", "GPU_HIT_MAX = 100.0", "test_g2g3.py"),
    ("proof/tiers.py", '    return "unknown"', '    return "storage"', "test_tiers.py"),
    ("proof/tiers.py", "if pattern.fullmatch(value):", "if pattern.match(value):",
     "test_tiers.py"),
]


# ---- static check ----------------------------------------------------------------------

def _asserts(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assert):
            return True
        if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                and sub.func.attr in ("raises", "fail")):
            return True
    return False


def _calls(node: ast.AST) -> set[str]:
    return {sub.func.id for sub in ast.walk(node)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)}


def assert_free_tests(path: Path) -> list[str]:
    """Names of test functions in path that assert nothing, directly or through a helper."""
    tree = ast.parse(path.read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    helpers = {name for name, fn in functions.items()
               if not name.startswith("test_") and _asserts(fn)}
    return [name for name, fn in functions.items()
            if name.startswith("test_") and not _asserts(fn) and not (_calls(fn) & helpers)]


# ---- mutants ---------------------------------------------------------------------------

def _copy(dest: Path) -> None:
    shutil.copytree(REPO / "gates", dest / "gates",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # The whole of tests/: the modules share helpers (_chain, _expositions) and conftest.
    shutil.copytree(REPO / "tests", dest / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "thresholds.toml", "site.toml", "checklist.toml"):
        shutil.copy(REPO / name, dest / name)


def run_tests(mutant: tuple[str, str, str, str] | None, test: str) -> tuple[int, str]:
    """pytest's exit status on a copy of the package with mutant applied."""
    with tempfile.TemporaryDirectory(prefix="kvgate-mutant-") as tmp:
        root = Path(tmp)
        _copy(root)
        if mutant:
            module, old, new, _ = mutant
            path = root / "gates" / module
            text = path.read_text()
            if text.count(old) != 1:
                return -1, f"mutation text found {text.count(old)} times in {module}"
            path.write_text(text.replace(old, new))
        env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "pytest", f"tests/{test}", "-x", "-q", "-p", "no:randomly",
             "-p", "no:cacheprovider", "--rootdir", str(root), "-c", str(root / "pyproject.toml")],
            cwd=root, env=env, capture_output=True, text=True, timeout=300)
        lines = (done.stdout + done.stderr).strip().splitlines()
        return done.returncode, lines[-1] if lines else ""


def main() -> int:
    problems = []
    for name in TESTS:
        for test in assert_free_tests(REPO / "tests" / name):
            problems.append(f"{name}::{test} asserts nothing")

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        baseline = {t: pool.submit(run_tests, None, t) for t in TESTS}
        mutants = [(m, pool.submit(run_tests, m, m[3])) for m in MUTANTS]
        for test, future in baseline.items():
            status, last = future.result()
            if status != 0:
                problems.append(f"baseline {test} does not pass ({status}): {last}")
        for (module, old, new, test), future in mutants:
            status, last = future.result()
            label = f"{module}: {old.strip()!r} -> {new.strip()!r}"
            if status == 1:
                print(f"caught    {label}  [{test}: {last}]")
            else:
                why = "survived" if status == 0 else f"not a clean failure ({status}: {last})"
                problems.append(f"{label}: {why}")

    for problem in problems:
        print("PROBLEM  ", problem)
    killed = sum(1 for _, f in mutants if f.result()[0] == 1)
    print(f"{len(MUTANTS)} mutants, {killed} killed: kill rate {100 * killed / len(MUTANTS):.1f} %;"
          f" {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
