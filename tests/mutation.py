"""Mutation testing of the decision code with mutmut 3. Run: make mutants (or CHANGED=main).

Not a pytest module (pytest collects test_*.py only). mutmut (pyproject.toml [tool.mutmut])
mutates every function of the decision modules in a copy under mutants/, runs only the tests
that cover each function, and remembers what it did: a second run re-tests only the functions
that changed. `--changed REF` limits the run to the decision modules changed since REF (git),
minutes instead of the full run's two to three hours on 2 cores.

Then the report: per module, mutants killed and survived; every survivor must be killed by a
test or named in tests/data/mutation/equivalent.toml with why it cannot change a verdict.
Exit status 1 while any survivor is neither, or an entry there names a mutant that no longer
survives (a stale excuse); 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EQUIVALENT = REPO / "tests" / "data" / "mutation" / "equivalent.toml"
MUTMUT = [sys.executable, "-m", "mutmut"]


def decision_modules() -> list[str]:
    """The modules [tool.mutmut] only_mutate names, as paths from the repository root."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    return list(config["only_mutate"])


def module_of(mutant: str) -> str:
    """gates.core.verdict.xǁLimitǁat_least__mutmut_1 -> gates/core/verdict.py."""
    dotted = mutant.split(".x")[0] if ".x" in mutant else mutant.rsplit(".", 1)[0]
    return dotted.replace(".", "/") + ".py"


def changed_globs(ref: str) -> list[str]:
    """mutmut name patterns for the decision modules that differ from ref (committed or not)."""
    out = subprocess.run(["git", "diff", "--name-only", ref, "--"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.split()
    return [p.removesuffix(".py").replace("/", ".") + ".*"
            for p in decision_modules() if p in out]


def unmapped(stats: Path = REPO / "mutants" / "mutmut-stats.json") -> list[str]:
    """Decision modules mutmut's saved test map knows no function of.

    mutmut maps tests to the functions they call only when it collects its stats, and after a
    first run only for new tests: a module added to only_mutate later has no entry, and every
    mutant of it is "no tests" without one test having run. Such a map must be rebuilt."""
    if not stats.is_file():
        return []
    known = json.loads(stats.read_text()).get("tests_by_mangled_function_name", {})
    prefixes = {m.removesuffix(".py").replace("/", ".") + "." for m in decision_modules()}
    return sorted(p for p in prefixes if not any(name.startswith(p) for name in known))


def results() -> dict[str, str]:
    """Every mutant mutmut knows of, with its status (killed, survived, no tests, timeout...)."""
    out = subprocess.run([*MUTMUT, "results", "--all", "true"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            found[name] = status.strip()
    return found


def equivalents() -> dict[str, str]:
    """Named equivalent mutants: name -> why it cannot change what a rule decides."""
    if not EQUIVALENT.is_file():
        return {}
    return {name: entry["why"] for name, entry in tomllib.loads(EQUIVALENT.read_text()).items()}


def report(found: dict[str, str], named: dict[str, str]) -> int:
    per: dict[str, Counter] = {}
    for name, status in found.items():
        per.setdefault(module_of(name), Counter())[status] += 1
    print(f"{'module':40} {'mutants':>8} {'killed':>7} {'survived':>9} {'other':>6} {'score':>7}")
    total = Counter()
    for module in sorted(per):
        c = per[module]
        total += c
        n, k, s = sum(c.values()), c["killed"], c["survived"]
        print(f"{module:40} {n:8d} {k:7d} {s:9d} {n - k - s:6d} {100 * k / n:6.1f}%")
    n, k = sum(total.values()), total["killed"]
    print(f"{'all':40} {n:8d} {k:7d} {total['survived']:9d} {n - k - total['survived']:6d} "
          f"{100 * k / max(n, 1):6.1f}%")
    survivors = sorted(name for name, status in found.items() if status != "killed")
    open_ = [name for name in survivors if name not in named]
    stale = sorted(name for name in named if found.get(name) == "killed")
    print(f"\n{len(survivors)} not killed, {len(survivors) - len(open_)} of them named "
          f"equivalent in {EQUIVALENT.relative_to(REPO)}")
    for name in open_:
        print(f"NOT KILLED  {name} ({found[name]}): `mutmut show {name}`")
    for name in stale:
        print(f"STALE       {name} is killed now: remove it from {EQUIVALENT.name}")
    return 1 if open_ or stale else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changed", metavar="REF",
                        help="only the decision modules changed since this git ref")
    parser.add_argument("--report-only", action="store_true", help="do not run mutmut")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once")
    args = parser.parse_args(argv)
    if not args.report_only:
        if missing := unmapped():
            print(f"mutmut's test map knows nothing of {', '.join(missing)}: rebuilding it")
            (REPO / "mutants" / "mutmut-stats.json").unlink()
        names = changed_globs(args.changed) if args.changed else []
        if args.changed and not names:
            print(f"no decision module changed since {args.changed}")
            return 0
        run = subprocess.run([*MUTMUT, "run", "--max-children", str(args.jobs), *names],
                             cwd=REPO)
        if run.returncode != 0:
            print(f"mutmut run exited {run.returncode}", file=sys.stderr)
            return 2
    return report(results(), equivalents())


if __name__ == "__main__":
    sys.exit(main())
