"""Whether a divergence of G3's greedy outputs is a near-tie flip, measured from one arm's own
distribution (#43): its top-1 and top-2 logprobs at the first differing token, by token id.

A near-tie is a property of one distribution. The two arms' CHOSEN tokens having close
logprobs says nothing: on a tiny random-weight model every chosen token sits near the same
logprob, and a candidate restoring corrupted KV matched recompute at the first token and then
diverged with equal per-token logprobs (a signed PASS before). So the rule reads the top-k the
engine sent (gates.loadgen.logprobs), and where it sent none nothing is excused.
"""

from __future__ import annotations

import math

from .repetitions import Repetition

# Said in every note of the correctness rule. LMCache's own correctness harness compares
# logprobs and top-k, not ids alone (LMCache/LMCache benchmarks/hybrid_cache_correctness/
# README.md: "selected token, log-probability, and top-k overlap ... within the numerical
# tolerances").
TIE_RULE = ("a divergence is numerical when it starts after the first output token, every "
            "earlier token's logprobs agree within {gap_max:g} nats, and at the first "
            "difference one arm's own top-1 and top-2 logprobs lie within {tie_max:g} nats of "
            "each other with the other arm's choice its runner-up (recompute's distribution, "
            "or the candidate's): greedy argmax flips between two almost equal logits when a "
            "batch changes the arithmetic. An engine that sent no top-k by token id there has "
            "no tie excused; ties excuse at most {share:g} % of the probed contexts ({allowed} "
            "of {probed}), beyond which the outputs cannot tell numerics from corruption "
            "(INCONCLUSIVE); any other divergence is a mismatch")


def allowed_ties(probed: int, share: float) -> int:
    """How many of the probed contexts a near-tie may excuse: the share, rounded down."""
    return math.floor(probed * share / 100 + 1e-9)  # 25 % of 8 is 2, not 1.9999999


def near_tie(rid: str, cand: Repetition, recompute: Repetition, tokens: int,
             gap_max: float, tie_max: float) -> tuple[bool, str]:
    """(whether context rid's divergence is a measured near-tie flip, what shows it or why not;
    "" where its ids do not differ: a logprob gap or a length, never a tie)."""
    a, b = cand.outputs.get(rid, [])[:tokens], recompute.outputs.get(rid, [])[:tokens]
    at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if at is None:
        return False, ""
    if at == 0:
        return False, "at the first output token, which no near-tie excuses"
    lp_a, lp_b = cand.logprobs.get(rid, [])[:at], recompute.logprobs.get(rid, [])[:at]
    if min(len(lp_a), len(lp_b)) < at:
        return False, f"no logprobs for the {at} tokens before it"
    drift = max(abs(x - y) for x, y in zip(lp_a, lp_b, strict=True))
    if drift > gap_max:
        return False, (f"a logprob before it moved {drift:.4f} nats (more than {gap_max:g}): "
                       "not the KV that was stored")
    sides = (("recompute's", _top(recompute, rid, at), b[at], a[at],
              "the candidate chose the runner-up"),
             ("the candidate's", _top(cand, rid, at), a[at], b[at],
              "recompute chose the runner-up"))
    if all(len(top) < 2 for _, top, *_ in sides):
        return False, f"no top-k logprobs at output token {at}: a tie cannot be measured"
    for whose, top, own, other, said in sides:
        if len(top) >= 2 and {top[0][0], top[1][0]} == {own, other}:
            gap = top[0][1] - top[1][1]
            if gap <= tie_max:
                return True, (f"{whose} top-1 and top-2 {gap:.4f} nats apart "
                              f"(<= {tie_max:g}), {said}")
    shown = "; ".join(f"{whose} top-2 at output token {at}: {_pairs(top)}"
                      for whose, top, *_ in sides if top)
    return False, f"neither arm's top-2 is a near-tie between the two choices ({shown})"


def _top(rep: Repetition, rid: str, at: int) -> list[tuple[int, float]]:
    top = rep.top_logprobs.get(rid, [])
    return top[at] if at < len(top) else []


def _pairs(top: list[tuple[int, float]]) -> str:
    return ", ".join(f"{token} {lp:.4f}" for token, lp in top[:2])
