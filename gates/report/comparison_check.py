"""`kvgate verify` of a comparison's folder (reports/compare-…/, written by `kvgate compare`).

Beyond its hash, seal and signature, a comparison must stand on the records it names and say
only what they give: each cited record is found beside it (reports/<run>/<gate>.json) as
cited, each candidate's verdicts and G3 gains are its records' own, and its differences,
rankings, risk and prices per point are the ones those figures give. A comparison edited and
rehashed (a ranking swapped, an interval narrowed) is named, signed or not.
"""

from __future__ import annotations

from pathlib import Path

from ..core.verdicts import GateRecord
from .citing import cited, read_json
from .compare import gain_of, judged
from .compare_cost import Prices, prices
from .compare_sweep import sweep_problems
from .comparison_model import GAINS, NO_RECORD, Column, Comparison
from .comparison_page import COMPARISON_HASH_KEY, comparison_digest
from .layout import COMPARISON_FILES, COMPARISON_HTML, COMPARISON_JSON
from .record_check import check_cited_records
from .sealing import check_seal
from .trust import Verification, check_signed
from .trust import rel as _name

RECORD_EXTRAS = ("decision_rule", "record_sha256")  # beside a gate record, outside its body


def is_comparison(folder: Path) -> bool:
    """Whether a folder is one `kvgate compare` wrote (it holds any of its files)."""
    return any((folder / name).exists() or (folder / name).is_symlink()
               for name in COMPARISON_FILES)


def _record(folder: Path, run_id: str, gate: str) -> GateRecord | None:
    body, _ = read_json(folder.parent / run_id / f"{gate}.json")
    if body is None:
        return None  # named by cited()
    try:
        return GateRecord.model_validate({k: v for k, v in body.items()
                                          if k not in RECORD_EXTRAS})
    except ValueError:
        return None  # a record that is no record: its own verify names it


def _own_figures(folder: Path, col: Column) -> list[str]:
    """A column's verdicts and G3 gains must be those of the records it cites."""
    problems = []
    records = {r.gate: _record(folder, r.run_id, r.gate) for r in col.records}
    for gate, verdict in col.verdicts.items():
        record = records.get(gate)
        if (verdict == NO_RECORD) != (gate not in records) or (
                record is not None and record.verdict.value != verdict):
            problems.append(f"{col.array}: it shows {gate.upper()} {verdict}, but the record it "
                            f"cites says {record.verdict.value if record else 'nothing'}")
    g3 = records.get("g3")
    if g3 is not None:
        own = [gain_of(m, col.array) for m in g3.measurements if m.id in GAINS]
        if own != col.gains:
            problems.append(f"{col.array}: its G3 gains are not those of the G3 record it cites "
                            f"(run {g3.run_id})")
    return problems


def _prices(col: Column, capacity_needed: int) -> list[str]:
    if col.price is None or col.capacity_tb is None:
        return []
    try:
        due = prices(col.price, col.capacity_tb, col.gains, capacity_needed)
    except ValueError as exc:
        return [f"{col.array}: its price is no price ({exc})"]
    stated = Prices(**{k: getattr(col, k) for k in Prices.model_fields})
    return [] if due == stated else [
        f"{col.array}: its prices are not the ones its price, capacity and gains give"]


def comparison_findings(body: dict, folder: Path) -> list[str]:
    """What a comparison.json says that its cited records and its own figures do not give."""
    try:
        c = Comparison.model_validate({k: v for k, v in body.items()
                                       if k != COMPARISON_HASH_KEY})
    except ValueError as exc:
        return [f"not a kvgate comparison ({str(exc).splitlines()[0]})"]
    problems = [p for col in c.columns for p in _own_figures(folder, col)
                + _prices(col, c.capacity_needed) + sweep_problems(folder, col)]
    diff, ranked, risk = judged(c.columns)
    if diff != c.differences:
        problems.append(f"it names the differences {c.differences}, but its candidates give "
                        f"{diff}")
    if ranked != c.rankings:
        problems.append("its rankings are not the ones its candidates' intervals give")
    if risk != c.risk:
        problems.append(f"it states the risk {c.risk!r}, but its rankings give {risk!r}")
    return problems


def _json_problems(path: Path, root: Path) -> tuple[list[str], dict | None]:
    body, problem = read_json(path, root)
    if body is None:
        return [problem], None
    me = _name(path, root)
    problems = []
    if comparison_digest(body) != body.get(COMPARISON_HASH_KEY):
        problems.append(f"{me}: the comparison was altered (its SHA-256 no longer matches "
                        f"{str(body.get(COMPARISON_HASH_KEY))[:16]}…)")
    for col in body.get("columns") or []:
        for rec in (col.get("records") or []) if isinstance(col, dict) else []:
            if isinstance(rec, dict):
                problems += cited(path, root, str(rec.get("gate")), str(rec.get("run_id", "")),
                                  str(rec.get("record_sha256")))
    return problems + [f"{me}: {p}" for p in comparison_findings(body, path.parent)], body


def _page_problems(folder: Path, root: Path) -> list[str]:
    html = folder / COMPARISON_HTML
    if not html.is_file() or html.is_symlink():
        return [f"{_name(html, root)}: missing (the page of "
                f"{_name(folder / COMPARISON_JSON, root)})"]
    try:
        problem = check_seal(html.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        problem = f"unreadable ({exc})"
    return [f"{_name(html, root)}: {problem}"] if problem else []


def _cited_paths(body: dict | None, folder: Path) -> list[Path]:
    """The record files a comparison cites that are there (cited() names the others)."""
    paths = []
    for col in (body or {}).get("columns") or []:
        for rec in (col.get("records") or []) if isinstance(col, dict) else []:
            run, gate = (str(rec.get(k, "")) for k in ("run_id", "gate")) \
                if isinstance(rec, dict) else ("", "")
            path = folder.parent / run / f"{gate}.json"
            if run and Path(run).name == run and run not in (".", "..") and path.is_file():
                paths.append(path)
    return paths


def check_comparison(folder: Path, root: Path, records_checked: bool = False) -> Verification:
    """Files checked, problems and signer of one comparison folder, names relative to root.

    The records it cites are verified with it (digest, evidence, signature), unless the caller
    verifies them itself (records_checked: a bundle checks every run in it).
    """
    path = folder / COMPARISON_JSON
    if not path.is_file() or path.is_symlink():
        return Verification([], [f"{_name(path, root)}: missing (a comparison folder holds its "
                                 "comparison.json, comparison.html and, when signed, its .sig)"])
    problems, body = _json_problems(path, root)
    problems += _page_problems(folder, root)
    problems += [f"{_name(p, root)}: unlisted (in the comparison folder, but not a file "
                 "kvgate compare writes there)" for p in sorted(folder.iterdir())
                 if p.name not in COMPARISON_FILES or p.is_dir() or p.is_symlink()]
    found = Verification([_name(path, root), _name(folder / COMPARISON_HTML, root)], problems)
    if body is not None:
        sig_problems, signer = check_signed(path, comparison_digest(body), root)
        found.problems += sig_problems
        found.signers[_name(path, root)] = signer
    if not records_checked:
        found.add(check_cited_records(_cited_paths(body, folder), root))
    return found
