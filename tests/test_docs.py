"""The user guide builds, its generated reference is current, and every command, example file
and flag that the help texts and the docs name exists (#47)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gates.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", REPO / "examples" / "README.md", REPO / "bench" / "README.md",
        *sorted((REPO / "docs").rglob("*.md"))]


def test_the_guide_builds_strict(tmp_path):
    # mkdocs.yml says strict: a broken link, a missing anchor or image, or a page left out of
    # the nav is an error. mkdocs comes with the test extras (pyproject.toml).
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(REPO / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "site-file" / "index.html").is_file()


def test_the_key_reference_is_what_the_models_give():
    done = subprocess.run([sys.executable, str(REPO / "docs" / "gen_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr


def test_the_key_reference_lists_every_key_with_its_unit_and_default():
    text = (REPO / "docs" / "reference" / "site-file.md").read_text()
    for row in ('| `runtime` | time | `"30s"` |', '| `prefer` | one of "", "llamacpp", "vllm"',
                "| `file_size` | size | required | > 0 |"):
        assert row in text, row
    limits = (REPO / "docs" / "reference" / "thresholds-file.md").read_text()
    assert '| `comparison_budget` | time | `"75m"` | > 0 |' in limits


# ---- every command and example a help text or a doc names exists ----------------------------

def parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) for kvgate and every subcommand, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, (*path, name))


COMMANDS = dict(parsers(build_parser()))


def help_texts() -> dict[str, str]:
    """Every --help text of kvgate, by command."""
    return {" ".join(("kvgate", *path)): p.format_help() for path, p in COMMANDS.items()}


def commands_of(text: str, kind: str) -> list[list[str]]:
    """The `kvgate …` commands a text gives to be typed, as their words up to a comment: in
    markdown, code spans that begin with kvgate and command lines of sh blocks; in a help text,
    its example lines and `spans`; in the Makefile, its recipes."""
    if kind == "md":
        shells = re.findall(r"^```(?:sh|bash|shell|console)\n(.*?)^```", text, re.S | re.M)
        lines = [m.group(1) for block in shells for m in re.finditer(
            r"(?:^|&&|;|\|\||\$ )\s*(?:\S*/)?kvgate ([^\n]*)", block, re.M)]
        prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
        lines += re.findall(r"`kvgate ([^`\n]+)`", prose)
    elif kind == "help":
        lines = re.findall(r"^\s+kvgate (\S[^\n]*)", text, re.M)
        lines += re.findall(r"`kvgate ([^`\n]+)`", text)
    else:
        lines = re.findall(r"^\t.*?\$\(BIN\)/kvgate ([^\n]*)", text, re.M)  # recipes
    return [[w.strip("`\"'),;") for w in line.split("#")[0].split()] for line in lines]


def problem(words: list[str]) -> str:
    """Why `kvgate <words>` names no command or flag kvgate has ("" if it does)."""
    path: tuple[str, ...] = ()
    for word in words:
        if (*path, word) in COMMANDS:
            path = (*path, word)
            continue
        if not word.startswith("-") and COMMANDS[path]._subparsers is not None and \
                any(isinstance(a, argparse._SubParsersAction) and a.required
                    for a in COMMANDS[path]._actions):
            return f"{' '.join(('kvgate', *path))} has no command {word!r}"
        break
    if not path:
        return ""
    known = {s for a in COMMANDS[path]._actions for s in a.option_strings}
    flags = [w.split("=")[0] for w in words if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", w)]
    if "--" in words:  # after a bare -- everything is pytest's
        flags = [f for f in flags if words.index(f) < words.index("--")] if flags else []
    unknown = [f for f in flags if f not in known]
    return f"kvgate {' '.join(path)} has no option {unknown[0]}" if unknown else ""


def sources() -> dict[str, tuple[str, str]]:
    """Every doc and help text: name → (text, kind)."""
    found = {str(p.relative_to(REPO)): (p.read_text(), "md") for p in DOCS}
    found |= {name: (text, "help") for name, text in help_texts().items()}
    found["Makefile"] = ((REPO / "Makefile").read_text(), "make")
    return found


def test_every_kvgate_command_the_docs_and_help_name_exists():
    wrong = [f"{name}: `kvgate {' '.join(words)}`: {why}"
             for name, (text, kind) in sources().items() for words in commands_of(text, kind)
             if (why := problem(words))]
    assert not wrong, "\n".join(wrong)


def test_every_example_file_the_docs_and_help_name_exists():
    named = {(name, path.rstrip(".,:;)`'\"")) for name, (text, _) in sources().items()
             for path in re.findall(r"examples/[\w.-]+(?:/[\w.-]+)*", text)}
    missing = sorted(f"{name}: {path}" for name, path in named if not (REPO / path).exists())
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("words, expected", [
    (["config", "check", "--site", "x"], ""), (["run", "all", "--engine", "vllm"], ""),
    (["config", "chek"], "kvgate config has no command 'chek'"),
    (["run", "g1", "--sight", "x"], "kvgate run has no option --sight"),
    (["frobnicate"], "kvgate has no command 'frobnicate'")])
def test_the_walker_tells_a_command_that_exists_from_one_that_does_not(words, expected):
    assert problem(words) == expected
