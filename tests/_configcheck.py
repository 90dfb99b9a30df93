"""`kvgate config check` on the shipped files with some of their text replaced, and what a
refusal must say: the tests of `config check`'s refusals (test_config_refusals,
test_config_late) share these."""

from __future__ import annotations

from pathlib import Path

from _edits import edited

from gates.cli import main

BAD_INPUT = 2  # EXIT_CODES[Outcome.ERROR]: "2 error or bad input"
REPO = Path(__file__).resolve().parent.parent


def check(tmp_path: Path, capsys, site: list[tuple[str, str]] = (),
          thresholds: list[tuple[str, str]] = (), site_text: str | None = None
          ) -> tuple[int, str, Path, Path]:
    """`kvgate config check` on the shipped files with the (old, new) texts replaced (each
    must be there: _edits.edited); site_text replaces the whole site file."""
    paths = []
    for name, edits, text in (("site.toml", site, site_text), ("thresholds.toml", thresholds,
                                                                None)):
        text = text if text is not None else (REPO / name).read_text()
        for old, new in edits:
            text = edited(text, old, new, where=name)
        (tmp_path / name).write_text(text)
        paths.append(tmp_path / name)
    capsys.readouterr()
    code = main(["config", "check", "--site", str(paths[0]), "--thresholds", str(paths[1])])
    return code, capsys.readouterr().err, paths[0], paths[1]


def refused(code: int, err: str, file: Path, *parts: str) -> None:
    """Exit 2, the file named, no traceback, and every part said."""
    assert code == BAD_INPUT, err
    assert f"configuration error: {file}:" in err, err
    assert "Traceback" not in err, err
    for part in parts:
        assert part in err, f"{part!r} not in: {err}"
