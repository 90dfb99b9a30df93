"""G3's correctness check: the greedy outputs after a restore against recompute's.

Token ids first; where both arms send logprobs, their values too, since equal ids from a KV
that is not quite the stored one still move the logprobs. A divergence that begins at a
near-tie measured in one arm's own top-k (gates.inference.near_tie) is numerics, reported but
not counted as a mismatch, for at most a declared share of the probed contexts.
"""

from __future__ import annotations

from ..core.verdicts import G3, Coverage, Limit, Measurement
from .kv_files import KvReadBack
from .near_tie import TIE_RULE, allowed_ties, near_tie
from .repetitions import Repetition
from .units import CONTEXTS, FILES


def divergence(rid: str, cand: Repetition, recompute: Repetition, tokens: int,
               gap_max: float | None = None) -> str:
    """Where a context's output after a restore first differs from recompute's ("" = nowhere).

    With logprobs from both arms, equal ids whose logprobs differ by more than gap_max also
    differ: the same greedy token from a KV that is not quite the one stored.
    """
    a, b = cand.outputs.get(rid, [])[:tokens], recompute.outputs.get(rid, [])[:tokens]
    if not a:
        return f"{rid}: no output token ids (the server did not return them)"
    lp_a, lp_b = cand.logprobs.get(rid, [])[:tokens], recompute.logprobs.get(rid, [])[:tokens]
    # Outputs may differ in length (one stream ended early): compare what both have.
    gaps = [abs(x - y) for x, y in zip(lp_a, lp_b, strict=False)]
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if at is None and len(a) != len(b):
        at = min(len(a), len(b))
    if at is None and gap_max is not None:
        at = next((i for i, g in enumerate(gaps) if g > gap_max), None)
    if at is None:
        return ""
    gap = f", logprob gap {gaps[at]:.4f}" if at < len(gaps) else ""
    return (f"{rid}: first differs at output token {at}: "
            f"{a[at] if at < len(a) else 'end'} vs {b[at] if at < len(b) else 'end'}{gap}")


def logprob_gap(cand: Repetition, recompute: Repetition, tokens: int) -> float | None:
    """Largest |logprob| difference over the first tokens of every context, up to where its
    ids first differ (after that the arms score different tokens); None: not sent."""
    gaps = []
    for rid, lps in cand.logprobs.items():
        a, b = cand.outputs.get(rid, [])[:tokens], recompute.outputs.get(rid, [])[:tokens]
        same = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), tokens)
        gaps += [abs(x - y) for x, y in zip(lps[:same], recompute.logprobs.get(rid, [])[:same],
                                            strict=False)]
    return max(gaps) if gaps else None


def contexts_read(cand: Repetition, recompute: Repetition) -> Coverage:
    """Every context either arm's probe asked (the same seeded plan on both): compared where
    the recompute arm gave output ids to hold the candidate's against. A candidate that sent
    none where recompute did was compared (its outputs differ: nothing against something)."""
    expected = sorted(set(cand.outputs) | set(recompute.outputs))
    failed = {}
    for rid in expected:
        if rid not in cand.outputs:
            failed[rid] = "the candidate's probe has no such request"
        elif rid not in recompute.outputs:
            failed[rid] = "the recompute arm's probe has no such request"
        elif not recompute.outputs[rid]:
            failed[rid] = ("neither arm returned output token ids" if not cand.outputs[rid]
                           else "the recompute arm returned no output token ids")
    return Coverage(expected, [r for r in expected if r not in failed], failed, what=CONTEXTS)


def correctness(cand: Repetition, recompute: Repetition, tokens: int,
                gap_max: float | None = None, tie_max: float | None = None,
                tie_share_max: float | None = None) -> Measurement:
    """Greedy outputs (ids, and logprobs within gap_max) after a restore equal recompute's;
    a divergence at a measured near-tie (gates.inference.near_tie: tie_max) is numerics,
    reported, not counted, for at most tie_share_max % of the contexts; more ties than that
    are INCONCLUSIVE (an ERROR), and without all three tolerances no divergence is excused."""
    cov = contexts_read(cand, recompute)
    limit, probed = Limit.at_most(0, "contexts"), len(cov.read)
    rule = None not in (gap_max, tie_max, tie_share_max)
    found = {rid: (d, near_tie(rid, cand, recompute, tokens, gap_max, tie_max) if rule
                   else (False, ""))
             for rid in cov.expected if rid in cov.read
             if (d := divergence(rid, cand, recompute, tokens, gap_max))}
    bad = {rid: d + (f" ({why})" if why else "") for rid, (d, (tie, why)) in found.items()
           if not tie}
    ties = [f"{d}: {why}" for d, (tie, why) in found.values() if tie]
    gap = logprob_gap(cand, recompute, tokens)
    said = "" if gap is None else (f"; largest logprob gap {gap:.4f} over the first {tokens} "
                                   "tokens, up to a divergence") + (
        "" if gap_max is None else f" (at most {gap_max:g})")
    exact = probed - len(found)
    note = (f"no mismatch: {exact} of {probed} probed contexts matched token for "
            "token" + said if not bad else
            "; ".join(bad.values()) + ": the restored KV is not the KV that was stored")
    allowed = allowed_ties(probed, tie_share_max) if rule else 0
    if ties:
        note += (f"; {len(ties)} diverged at a near-tie, " + (
            "numerics and not a mismatch" if len(ties) <= allowed else
            "more than ties may excuse, so none is excused") + ": " + "; ".join(ties)
            + f" (ties may excuse at most {allowed} of {probed} contexts ({tie_share_max:g} %))")
    if rule:  # said whether or not a divergence came
        note += " (the rule: " + TIE_RULE.format(gap_max=gap_max, tie_max=tie_max,
                                                 share=tie_share_max, allowed=allowed,
                                                 probed=probed) + ")"
    declared = G3["g3.outputs_differing"]
    if len(ties) > allowed and not bad:
        return cov.judge(declared.error(
            f"INCONCLUSIVE: {len(ties)} of {probed} probed contexts diverged at a near-tie, "
            f"more than the {allowed} ({tie_share_max:g} %) a tie may excuse: outputs this "
            f"close cannot tell numerics from a restore of other KV; " + note, limit,
            at=tokens))
    # A mismatch in the contexts compared FAILs whatever the others hold; a context not
    # compared caps a clean run at ERROR: it may be the one restored wrong.
    return declared.stamp(cov.judge(Measurement.measured("", len(bad), limit, note=note)),
                          tokens)


# Why a file stored before the drop was not compared after the probe.
REMOVED = "removed by the engine before the read-back"


def files_read(reps: list[Repetition]) -> Coverage:
    """Every file the engine had written when the seed settled, per repetition: those compared
    after the probe were read, those it removed in between (an LRU tier) were not. A file not
    read back can be the one restored wrong, so it counts against the rule, never as a gap."""
    expected, read, failed = [], [], {}
    for k, r in enumerate(reps, 1):
        x = r.kv_read_back or KvReadBack()
        same = [f"repetition #{k} file {j}" for j in range(x.files)]
        gone = [f"repetition #{k} {name}" for name in x.gone] + [
            f"repetition #{k} removed file {j}" for j in range(len(x.gone), x.vanished)]
        expected += same + gone
        read += same
        failed |= dict.fromkeys(gone, REMOVED)
    return Coverage(expected, read, failed, what=FILES)


def kv_read_back(c: int, reps: list[Repetition]) -> Measurement:
    """A level's KV files as stored against as read back after each probe (SHA-256): exact,
    where the outputs are only as sensitive as the model (a random-weight one hides a lot)."""
    declared, limit = G3["g3.kv_read_back"], Limit.at_most(0, "files")
    checks = [r.kv_read_back for r in reps]
    if all(x is None for x in checks):
        return declared.not_applicable("the candidate has no KV directory kvgate can read: "
                                       "its files cannot be read back", at=c)
    if None in checks:
        return declared.error(f"{checks.count(None)} of {len(reps)} repetitions read no KV "
                              "file back", limit, at=c)
    cov = files_read(reps)
    files, size = sum(x.files for x in checks), sum(x.bytes for x in checks)
    changed = [name for x in checks for name in x.changed]
    vanished = sum(x.vanished for x in checks)
    if not files:
        return cov.judge(declared.error(
            "no KV file was left to read back after the probes (the engine wrote none, or "
            f"removed all {vanished}): nothing shows the restored bytes were the stored ones",
            limit, at=c))
    note = (f"{files} KV files ({size / 1e6:.1f} MB) over {len(reps)} repetitions hashed "
            "(SHA-256) once the seed's writes had settled and again after the probe"
            + (f"; {vanished} removed by the engine in between, not compared" if vanished else ""))
    if changed:
        note = (f"{len(changed)} of {files} KV files changed between store and restore "
                f"({changed[0]}): the storage gave back other bytes than it was given; " + note)
    # A changed file FAILs whatever the others hold; a removed one caps a clean level at ERROR.
    return declared.stamp(cov.judge(Measurement.measured("", len(changed), limit, note=note)), c)
