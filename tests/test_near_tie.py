"""G3's near-tie is measured, not assumed (#43 case 2).

A divergence is numerics only where ONE distribution shows the tie: at the first differing
token the recompute arm's top-1 and top-2 are within correctness_tie_logprob_max and the
candidate chose that runner-up (or the candidate's own top-2 are that close and recompute chose
its runner-up). No top-k, no excuse; and ties may excuse at most a declared share of contexts.
"""

from gates.core.configuration import G3Limits
from gates.core.verdicts import Limit, Outcome
from gates.inference import Repetition, correctness
from gates.inference.correctness import divergence
from gates.inference.near_tie import near_tie

TOKENS, GAP_MAX, TIE_MAX, SHARE = 16, 0.1, 0.02, 25.0  # thresholds.toml [g3] as shipped


def _arm(name, outputs, logprobs=None, top=None):
    return Repetition(arm=name, concurrency=1, repetition=0, ttfts=[1.0], output_throughput=1.0,
                      sent=len(outputs), errors=0, outputs=outputs, logprobs=logprobs or {},
                      top_logprobs=top or {})


def _context(k, at=None, top_r=None, top_c=None, chosen_c=None):
    """Context k's output of both arms: 16 ids equal up to ``at`` (None: equal throughout),
    equal per-token logprobs (the candidate's at ``at``: chosen_c if given), and at ``at``
    the given top-2 of each arm (ids, logprobs)."""
    ids = [1000 * k + i for i in range(TOKENS)]
    other = ids if at is None else ids[:at] + [9000 + k] + [i + 1 for i in ids[at + 1:]]
    lps = [-7.0 - 0.001 * i for i in range(TOKENS)]
    lps_c = list(lps)
    tops_r = [[(t, x), (t + 500, x - 1.0)] for t, x in zip(ids, lps, strict=True)]
    tops_c = [[(t, x), (t + 500, x - 1.0)] for t, x in zip(other, lps, strict=True)]
    if at is not None:
        tops_r[at], tops_c[at] = top_r or [], top_c or []
        lps_c[at] = lps[at] if chosen_c is None else chosen_c
    return {"ids": ids, "other": other, "lps": lps, "lps_c": lps_c, "top_r": tops_r,
            "top_c": tops_c}


def _arms(contexts, with_top=True):
    """(candidate, recompute) from {rid: _context(...)}."""
    def each(key):
        return {rid: c[key] for rid, c in contexts.items()}
    return (_arm("candidate", each("other"), each("lps_c"), each("top_c") if with_top else {}),
            _arm("recompute", each("ids"), each("lps"), each("top_r") if with_top else {}))


def _tie(k, at=8, gap=0.0078):
    """A genuine near-tie: recompute's top-1 (its own choice) and top-2 (the candidate's
    choice) ``gap`` nats apart; the candidate's chosen logprob is another 0.05 lower, so the
    two arms' chosen tokens are NOT within the tolerance of each other."""
    lp = -7.0 - 0.001 * at
    return _context(k, at, top_r=[(1000 * k + at, lp), (9000 + k, lp - gap)],
                    top_c=[(9000 + k, lp - 0.05), (1000 * k + at, lp - 0.06)],
                    chosen_c=lp - 0.05)


def _judge(cand, rec, share=SHARE):
    return correctness(cand, rec, TOKENS, GAP_MAX, TIE_MAX, share)


def test_the_issue_s_case_corrupted_kv_diverging_at_token_2_with_equal_logprobs_fails():
    """The measured case: every context matched recompute at the first output token and
    diverged from the second, the chosen tokens' logprobs equal. Without top-k (logprobs: 1,
    as before) or with a top-k that shows no tie, it is a mismatch, never a near-tie."""
    lp = -7.001
    contexts = {f"probe-ctx-{k:04d}": _context(k, 1, top_r=[(1000 * k + 1, lp),
                                                             (4242, lp - 0.004)],
                                               top_c=[(9000 + k, lp), (77, lp - 0.3)])
                for k in range(9)}
    for with_top in (False, True):
        m = _judge(*_arms(contexts, with_top))
        assert m.outcome is Outcome.FAIL and m.value == 9, (with_top, m.note)
        assert "the restored KV is not the KV that was stored" in m.note
        assert "near-tie, numerics" not in m.note


def test_a_divergence_without_top_k_is_a_mismatch_and_says_why():
    contexts = {"probe-ctx-0000": _tie(0), "probe-ctx-0001": _context(1),
                "probe-ctx-0002": _context(2), "probe-ctx-0003": _context(3)}
    cand, rec = _arms(contexts, with_top=False)
    m = _judge(cand, rec)
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note
    assert "no top-k logprobs at output token 8" in m.note


def test_a_measured_near_tie_is_numerics_and_reported():
    contexts = {f"probe-ctx-{k:04d}": _context(k) for k in range(1, 4)}
    contexts["probe-ctx-0000"] = _tie(0)
    m = _judge(*_arms(contexts))
    assert m.outcome is Outcome.PASS and m.value == 0, m.note
    assert (m.at, m.limit, m.unit) == (TOKENS, Limit.at_most(0, "contexts"), "contexts")
    assert "3 of 4 probed contexts matched token for token" in m.note
    assert "1 diverged at a near-tie, numerics and not a mismatch: probe-ctx-0000: first " \
        "differs at output token 8: 9000 vs 8" in m.note
    assert "recompute's top-1 and top-2 0.0078 nats apart (<= 0.02), the candidate chose " \
        "the runner-up" in m.note
    assert "at most 1 of 4 contexts (25 %)" in m.note  # the bound, said where it is used


def test_the_symmetric_tie_the_candidate_s_own_top_2_is_measured_too():
    lp = -7.008
    tie = _context(0, 8, top_r=[(8, lp), (31, lp - 0.5)],  # recompute: no tie
                   top_c=[(9000, lp - 0.01), (8, lp - 0.02)])  # the candidate's: 0.01 apart
    contexts = {"probe-ctx-0000": tie, **{f"probe-ctx-{k:04d}": _context(k)
                                          for k in range(1, 4)}}
    m = _judge(*_arms(contexts))
    assert m.outcome is Outcome.PASS and m.value == 0, m.note
    assert "the candidate's top-1 and top-2 0.0100 nats apart (<= 0.02), recompute chose " \
        "the runner-up" in m.note


def test_a_tie_that_is_not_between_the_two_chosen_tokens_is_a_mismatch():
    """recompute's top-1/top-2 within the tolerance, but the candidate chose a third token:
    not the flip of a near-tie."""
    lp = -7.008
    odd = _context(0, 8, top_r=[(8, lp), (555, lp - 0.001)], top_c=[(9000, lp), (8, lp - 0.4)])
    contexts = {"probe-ctx-0000": odd, **{f"probe-ctx-{k:04d}": _context(k)
                                          for k in range(1, 4)}}
    m = _judge(*_arms(contexts))
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note
    # Nor a real gap between top-1 and top-2, nor a tie at the first token, nor drift before.
    lp = -7.008
    wide = _context(0, 8, top_r=[(8, lp), (9000, lp - 0.03)], top_c=[(9000, lp), (8, lp - 0.4)])
    for why, case in (("a real gap between top-1 and top-2", wide),
                      ("the first token", _tie(0, at=0))):
        m = _judge(*_arms({**contexts, "probe-ctx-0000": case}))
        assert m.outcome is Outcome.FAIL and m.value == 1, (why, m.note)
    drift = _tie(0)
    drift["lps_c"][3] -= 0.3  # a logprob before the divergence moved: not the stored KV
    m = _judge(*_arms({**contexts, "probe-ctx-0000": drift}))
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note


def test_more_ties_than_the_bound_is_not_a_pass():
    """Ties may excuse at most the declared share of probed contexts: beyond it the outputs
    cannot tell numerics from corruption, and the measurement is INCONCLUSIVE (an ERROR)."""
    contexts = {f"probe-ctx-{k:04d}": _tie(k) if k < 3 else _context(k) for k in range(8)}
    m = _judge(*_arms(contexts))
    assert m.outcome is Outcome.ERROR, m.note
    assert m.note.startswith("INCONCLUSIVE: 3 of 8 probed contexts diverged at a near-tie, "
                             "more than the 2 (25 %) a tie may excuse"), m.note
    # Still the declared measurement at its token count, against its limit.
    assert (m.at, m.limit, m.unit) == (TOKENS, Limit.at_most(0, "contexts"), "contexts")
    assert m.name == "Outputs differing from recompute (first 16 tokens, concurrency 1)"
    # Two of eight are within it.
    contexts["probe-ctx-0002"] = _context(2)
    assert _judge(*_arms(contexts)).outcome is Outcome.PASS
    # A real mismatch beside too many ties is a FAIL, which says the ties too.
    contexts = {f"probe-ctx-{k:04d}": _tie(k) if k < 3 else _context(k) for k in range(8)}
    contexts["probe-ctx-0007"] = _context(7, 0)
    m = _judge(*_arms(contexts))
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note
    # Said where the ties are, before the rule, not after it (and never "numerics" there).
    assert "; 3 diverged at a near-tie, more than ties may excuse, so none is excused: " \
        in m.note and "numerics and not a mismatch" not in m.note, m.note
    assert m.note.endswith("; any other divergence is a mismatch)"), m.note


def test_every_context_tied_never_passes():
    """The issue's 9 of 9 'near-ties', measured this time: still not a PASS."""
    contexts = {f"probe-ctx-{k:04d}": _tie(k, at=1) for k in range(9)}
    assert _judge(*_arms(contexts)).outcome is Outcome.ERROR


def test_without_the_bound_no_tie_is_excused():
    contexts = {"probe-ctx-0000": _tie(0), **{f"probe-ctx-{k:04d}": _context(k)
                                              for k in range(1, 4)}}
    cand, rec = _arms(contexts)
    assert correctness(cand, rec, TOKENS, GAP_MAX, TIE_MAX).outcome is Outcome.FAIL


def test_the_bound_is_a_declared_threshold():
    assert G3Limits().correctness_tie_share_max == SHARE


# Tolerances a float holds exactly (binary fractions), so a difference can sit ON the bound.
EXACT_GAP, EXACT_TIE = 0.25, 0.125


def _others(contexts, start=1, end=4):
    return {**contexts, **{f"probe-ctx-{k:04d}": _context(k) for k in range(start, end)}}


def test_a_tie_exactly_at_the_tolerance_is_excused():
    """'Within tie_max' includes tie_max: recompute's top-1 and top-2 exactly that far apart."""
    tie = _context(0, 8, top_r=[(8, -7.0), (9000, -7.0 - EXACT_TIE)],
                   top_c=[(9000, -7.0), (8, -7.5)])
    m = correctness(*_arms(_others({"probe-ctx-0000": tie})), TOKENS, GAP_MAX, EXACT_TIE, SHARE)
    assert m.outcome is Outcome.PASS and m.value == 0, m.note
    assert "recompute's top-1 and top-2 0.1250 nats apart (<= 0.125)" in m.note


def test_a_logprob_exactly_at_the_gap_bound_is_agreement():
    """gap_max is how far two logprobs may lie apart and still agree: exactly that far is
    neither a divergence of equal ids nor drift that keeps a later tie from being measured."""
    tie = _tie(0)
    tie["lps"][3], tie["lps_c"][3] = -7.0, -7.0 - EXACT_GAP
    same = _context(1)
    same["lps"][5], same["lps_c"][5] = -7.0, -7.0 - EXACT_GAP
    contexts = _others({"probe-ctx-0000": tie, "probe-ctx-0001": same}, start=2)
    m = correctness(*_arms(contexts), TOKENS, EXACT_GAP, TIE_MAX, SHARE)
    assert m.outcome is Outcome.PASS and m.value == 0, m.note
    assert "3 of 4 probed contexts matched token for token" in m.note
    assert "1 diverged at a near-tie" in m.note


def test_equal_ids_with_a_logprob_gap_are_a_mismatch_never_a_tie():
    """The same greedy ids whose logprobs moved: not a near-tie (no token flipped), said as the
    gap alone, with no near-tie reason attached."""
    moved = _context(0)
    moved["lps_c"][5] -= 0.3
    m = _judge(*_arms(_others({"probe-ctx-0000": moved})))
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note
    assert m.note.startswith("probe-ctx-0000: first differs at output token 5: 5 vs 5, logprob "
                             "gap 0.3000: the restored KV is not the KV that was stored (the "
                             "rule: "), m.note


def test_without_the_tolerances_a_divergence_is_said_with_no_tie_reason():
    m = correctness(*_arms(_others({"probe-ctx-0000": _tie(0)})), TOKENS)
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note
    assert m.note == ("probe-ctx-0000: first differs at output token 8: 9000 vs 8, logprob gap "
                      "0.0500: the restored KV is not the KV that was stored")


def test_each_mismatch_is_named_and_why_no_tie_excuses_it():
    """Every reason a divergence is not a near-tie, in the words the note gives, and the
    mismatches joined in one sentence."""
    lp = -7.008
    drift = _tie(1)
    drift["lps_c"][3] -= 0.3
    # A top-3 sent: the note shows the top-2 the rule reads.
    wide = _context(2, 8, top_r=[(2008, lp), (9002, lp - 0.03), (77, lp - 0.04)],
                    top_c=[(9002, lp), (2008, lp - 0.4), (78, lp - 0.5)])
    contexts = {"probe-ctx-0000": _tie(0, at=0), "probe-ctx-0001": drift,
                "probe-ctx-0002": wide, "probe-ctx-0003": _context(3)}
    m = _judge(*_arms(contexts))
    assert m.outcome is Outcome.FAIL and m.value == 3, m.note
    assert m.note.startswith(
        "probe-ctx-0000: first differs at output token 0: 9000 vs 0, logprob gap 0.0500 (at "
        "the first output token, which no near-tie excuses); "
        "probe-ctx-0001: first differs at output token 8: 9001 vs 1008, logprob gap 0.0500 "
        "(a logprob before it moved 0.3000 nats (more than 0.1): not the KV that was stored)"
        "; probe-ctx-0002: first differs at output token 8: 9002 vs 2008, logprob gap 0.0000 "
        "(neither arm's "
        "top-2 is a near-tie between the two choices (recompute's top-2 at output token 8: "
        "2008 -7.0080, 9002 -7.0380; the candidate's top-2 at output token 8: 9002 -7.0080, "
        "2008 -7.4080)): the restored KV is not the KV that was stored (the rule: "), m.note
    assert m.note.endswith("; any other divergence is a mismatch)"), m.note  # the rule closed


def test_a_top_k_that_stops_before_the_divergence_measures_no_tie():
    """An engine whose top-k list ends at the token before the first difference sent none
    there: nothing is excused."""
    tie = _tie(0)
    tie["top_r"], tie["top_c"] = tie["top_r"][:8], tie["top_c"][:8]
    m = _judge(*_arms(_others({"probe-ctx-0000": tie})))
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note
    assert "(no top-k logprobs at output token 8: a tie cannot be measured)" in m.note


def test_a_context_one_arm_never_asked_has_no_divergence_and_no_tie():
    """Read directly: the rules' inputs for a request an arm's probe lacks."""
    cand, rec = _arms({"probe-ctx-0000": _context(0)})
    absent = _arm("none", {})
    assert near_tie("probe-ctx-0000", absent, rec, TOKENS, GAP_MAX, TIE_MAX) == (False, "")
    assert near_tie("probe-ctx-0000", cand, absent, TOKENS, GAP_MAX, TIE_MAX) == (False, "")
    assert divergence("probe-ctx-0000", absent, rec, TOKENS) == \
        "probe-ctx-0000: no output token ids (the server did not return them)"
    assert divergence("probe-ctx-0000", cand, absent, TOKENS) == \
        "probe-ctx-0000: first differs at output token 0: 0 vs end"


def test_every_tie_is_named_in_the_note():
    contexts = {f"probe-ctx-{k:04d}": _tie(k) if k < 2 else _context(k) for k in range(8)}
    m = _judge(*_arms(contexts))
    assert m.outcome is Outcome.PASS, m.note
    why = "recompute's top-1 and top-2 0.0078 nats apart (<= 0.02), the candidate chose the " \
        "runner-up"
    assert (f"2 diverged at a near-tie, numerics and not a mismatch: probe-ctx-0000: first "
            f"differs at output token 8: 9000 vs 8, logprob gap 0.0500: {why}; probe-ctx-0001: "
            f"first differs at output token 8: 9001 vs 1008, logprob gap 0.0500: {why} (ties "
            f"may excuse at most 2 of 8 contexts (25 %))") in m.note, m.note


def _ended(k, at, arm):
    """Context k with one arm's stream (and its logprobs and top-k) ended after ``at`` tokens,
    the ids before equal."""
    c = _context(k)
    keys = ("other", "lps_c", "top_c") if arm == "candidate" else ("ids", "lps", "top_r")
    for key in keys:
        c[key] = c[key][:at]
    return c


def test_a_stream_that_ended_early_is_a_mismatch_never_a_tie():
    """Fewer tokens than the other arm, all equal so far: the outputs differ where one ended,
    said as 'end', with no logprob gap (there is none to take) and no near-tie reason."""
    for arm, said in (("candidate", "end vs 10"), ("recompute", "10 vs end")):
        contexts = _others({"probe-ctx-0000": _ended(0, 10, arm)})
        m = _judge(*_arms(contexts))
        assert m.outcome is Outcome.FAIL and m.value == 1, (arm, m.note)
        assert m.note.startswith(f"probe-ctx-0000: first differs at output token 10: {said}: "
                                 "the restored KV is not the KV that was stored (the rule: "), \
            m.note


def test_the_largest_logprob_gap_is_said_over_every_context_and_only_the_first_tokens():
    """The note's largest gap: across all contexts (not the last one's), over the compared
    tokens only, and with the bound where one is set."""
    long = {f"probe-ctx-{k:04d}": _context(k) for k in range(2)}
    for c in long.values():  # 20 tokens sent, 16 compared: a gap past them is not judged
        c["ids"] = c["other"] = c["ids"] + [7, 7, 7, 7]
        c["lps"], c["lps_c"] = c["lps"] + [-7.0] * 4, c["lps_c"] + [-7.0, -7.0, -9.0, -7.0]
    long["probe-ctx-0000"]["lps_c"][2] -= 0.05
    long["probe-ctx-0001"]["lps_c"][2] -= 0.01
    cand, rec = _arms(long, with_top=False)
    head = "no mismatch: 2 of 2 probed contexts matched token for token; largest logprob gap " \
        "0.0500 over the first 16 tokens, up to a divergence"
    assert correctness(cand, rec, TOKENS).note == head
    assert correctness(cand, rec, TOKENS, GAP_MAX).note == head + " (at most 0.1)"
    # Without logprobs nothing is said of them.
    bare = _arm("candidate", cand.outputs), _arm("recompute", rec.outputs)
    assert correctness(*bare, TOKENS).note == \
        "no mismatch: 2 of 2 probed contexts matched token for token"


def test_only_the_first_tokens_decide_where_a_divergence_starts():
    """Ids that differ only past the compared tokens do not make a logprob gap within them a
    near-tie candidate: it is the gap alone."""
    moved = _context(0)
    moved["ids"] = moved["ids"] + [7, 7]
    moved["other"] = moved["other"] + [7, 8]
    moved["lps"], moved["lps_c"] = moved["lps"] + [-7.0] * 2, moved["lps_c"] + [-7.0] * 2
    moved["top_r"] = moved["top_r"] + [[(7, -7.0), (8, -7.001)]] * 2
    moved["top_c"] = moved["top_c"] + [[(8, -7.0), (7, -7.001)]] * 2
    moved["lps_c"][3] -= 0.3
    m = _judge(*_arms(_others({"probe-ctx-0000": moved})))
    assert m.outcome is Outcome.FAIL and m.value == 1, m.note
    assert m.note.startswith("probe-ctx-0000: first differs at output token 3: 3 vs 3, logprob "
                             "gap 0.3000: the restored KV is not the KV that was stored (the "
                             "rule: "), m.note
