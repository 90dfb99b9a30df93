"""The rooms of gates/ (README "Where things are"): contracts, faces, and module sizes.

import-linter checks which room may import which (pyproject's [tool.importlinter]); the tests
here check what it cannot: that code outside a room imports the room's face, that a face is
only imports and `__all__`, and that no module grows past the size a reader can take in.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
GATES = REPO / "gates"
PACKAGES = {".".join(p.parent.relative_to(REPO).parts) for p in GATES.rglob("__init__.py")}
MAX_LINES = 300


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (REPO / f).rglob("*.py"))


def _package_of(path: Path) -> str:
    return ".".join(path.parent.relative_to(REPO).parts)


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = _package_of(path).split(".")
    base = parts[:len(parts) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def test_the_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


# Tests and benchmarks look inside rooms (a room's tests import its modules, as the package's
# own modules do); the suites, fixtures and other rooms come in by the face.
CONSUMERS = ("gates", "suites", "fixtures")
FACE_MAX = 40
# A wider face, with the most names it may have: none now that the core is rooms of its own.
WIDER: dict[str, int] = {}


@pytest.mark.parametrize("folder", CONSUMERS)
def test_code_outside_a_room_imports_its_face(folder):
    wrong = []
    for path in _python_files(folder):
        here = _package_of(path) if folder == "gates" else ""
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _absolute(path, node)
            if not target.startswith("gates.") or target in PACKAGES:
                continue
            room = target.rpartition(".")[0]
            # Inside a room (or below it) modules import their siblings directly.
            if here == room or here.startswith(room + "."):
                continue
            if room == "gates":  # the top-level modules: cli, plugin, session, options
                continue
            wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: from {target} import …")
    assert not wrong, "import the room's face instead:\n" + "\n".join(wrong)


@pytest.mark.parametrize("face", sorted(GATES.rglob("__init__.py")), ids=str)
def test_a_face_is_imports_and_all(face):
    tree = ast.parse(face.read_text())
    assert ast.get_docstring(tree), f"{face}: say in one line what the room is"
    imported: set[str] = set()
    declared: list[str] | None = None
    for node in tree.body[1:]:
        if isinstance(node, ast.ImportFrom):
            imported |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif (isinstance(node, ast.Assign | ast.AnnAssign) and
              getattr(node.targets[0] if isinstance(node, ast.Assign) else node.target,
                      "id", "") == "__all__"):
            declared = [e.value for e in node.value.elts]
        elif face.parent != GATES:  # the package root also holds a lazy __getattr__
            pytest.fail(f"{face}:{node.lineno}: a face holds imports and __all__ only")
    if face.parent == GATES:
        return
    imported.discard("annotations")
    assert declared is not None, f"{face}: no __all__"
    assert declared == sorted(declared), f"{face}: keep __all__ sorted"
    assert set(declared) == imported, f"{face}: __all__ and the imports differ: " \
        f"{sorted(set(declared) ^ imported)}"


def _face_names(face: Path) -> list[str]:
    for node in ast.parse(face.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "__all__":
            return [e.value for e in node.value.elts]
    return []


@functools.cache
def _imported_by_other_rooms() -> dict[str, set[str]]:
    """room -> the names code outside it (another room, a suite, a fixture) imports."""
    used: dict[str, set[str]] = {}
    for name, room in _root_rooms().items():
        used.setdefault(room, set()).add(name)
    for path in _python_files(*CONSUMERS):
        here = _package_of(path) if path.is_relative_to(GATES) else ""
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ImportFrom) and (target := _absolute(path, node)) in PACKAGES
                    and here != target and not here.startswith(target + ".")):
                used.setdefault(target, set()).update(a.name for a in node.names)
        for room, names in _attributes_of_imported_rooms(path).items():
            used.setdefault(room, set()).update(names)
    return used


def _attributes_of_imported_rooms(path: Path) -> dict[str, set[str]]:
    # `from ..engines import llamacpp` then `llamacpp.PINNED`: a name used through the face.
    tree = ast.parse(path.read_text())
    rooms = {a.asname or a.name: f"{_absolute(path, node)}.{a.name}"
             for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             for a in node.names if f"{_absolute(path, node)}.{a.name}" in PACKAGES}
    used: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in rooms):
            used.setdefault(rooms[node.value.id], set()).add(node.attr)
    return used


def _root_rooms() -> dict[str, str]:
    # The package root hands out some core names itself (PEP 562: gates/__init__.py), each
    # from the face of the core room that has it.
    for node in ast.parse((GATES / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_FROM_CORE":
            return {k.value: v.value for k, v in zip(node.value.keys, node.value.values,
                                                      strict=True)}
    return {}


def _root_names() -> list[str]:
    return list(_root_rooms())


ROOM_FACES = sorted(p for p in GATES.rglob("__init__.py") if p.parent != GATES)


@pytest.mark.parametrize("face", ROOM_FACES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_face_exports_only_what_other_rooms_import(face):
    room = _package_of(face)
    unused = sorted(set(_face_names(face)) - _imported_by_other_rooms().get(room, set()))
    assert not unused, (f"{room} exports names no other room, suite or fixture imports: "
                        f"{unused}; tests import them from their module")


@pytest.mark.parametrize("face", ROOM_FACES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_face_is_narrow(face):
    room = _package_of(face)
    most = WIDER.get(room, FACE_MAX)
    names = len(_face_names(face))
    assert names <= most, f"{room}'s face exports {names} names, more than {most}: split the room"


@pytest.mark.parametrize("module", _python_files("gates"), ids=lambda p: str(p.relative_to(REPO)))
def test_no_module_is_over_300_lines(module):
    lines = len(module.read_text().splitlines())
    assert lines <= MAX_LINES, f"{module.relative_to(REPO)} has {lines} lines: split it by feature"


def _is_protocol(cls: ast.ClassDef) -> bool:
    # A Protocol's methods are the seam's signature; the class docstring says what it is.
    return any(getattr(b, "id", getattr(b, "attr", "")) == "Protocol" for b in cls.bases)


def test_every_public_function_says_what_it_does():
    missing = []
    for path in _python_files("gates"):
        tree = ast.parse(path.read_text())
        # Module functions and the methods of module classes; closures are not public.
        members = [n for c in tree.body if isinstance(c, ast.ClassDef) and
                   not c.name.startswith("_") and not _is_protocol(c) for n in c.body]
        for node in [*tree.body, *members]:
            if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                    and not node.name.startswith("_") and not ast.get_docstring(node)
                    and not node.name.startswith("pytest_")):
                missing.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}")
    assert not missing, "one docstring line on every public function:\n" + "\n".join(missing)


def test_a_command_that_draws_no_chart_does_not_load_matplotlib():
    """matplotlib and numpy were a third of every `kvgate` command's start-up: gates.charts
    imports them when a chart is drawn, so `kvgate --help`, config check and verify start
    without them."""
    code = ("import sys, gates.cli\n"
            "print(sorted(m for m in ('matplotlib', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_name_the_package_root_hands_out_resolves():
    # `gates.gate_verdict` is loaded from the core's face on first use: a name dropped from
    # that face would only fail for the user who asks for it.
    import gates
    missing = [name for name in _root_names() if not hasattr(gates, name)]
    assert _root_names() and not missing, f"gates/__init__.py hands out {missing}"
