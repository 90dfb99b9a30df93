"""G3's correctness rule on outputs recorded from a real vLLM (#29): near-tie flips are
numerics, a real mismatch still FAILs. The data: tests/data/vllm/README.md."""

import json

from conftest import REPO

from gates.core import Outcome
from gates.inference import Repetition, correctness

RECORDED = json.loads((REPO / "tests/data/vllm/correctness-probes.json").read_text())
TOKENS, GAP_MAX, TIE_MAX = 16, 0.1, 0.02  # thresholds.toml [decision] as shipped


def arm(name: str, probes: dict) -> Repetition:
    return Repetition(arm=name, concurrency=1, repetition=0, ttfts=[1.0], output_throughput=1.0,
                      sent=len(probes), errors=0,
                      outputs={rid: p["ids"] for rid, p in probes.items()},
                      logprobs={rid: p["logprobs"] for rid, p in probes.items()})


def recorded(candidate: dict | None = None) -> tuple[Repetition, Repetition]:
    return (arm("candidate", candidate or RECORDED["candidate"]),
            arm("recompute", RECORDED["recompute"]))


def test_the_recorded_near_tie_flips_are_numerics_and_g3_correctness_passes():
    m = correctness(*recorded(), TOKENS, GAP_MAX, TIE_MAX)
    assert m.outcome is Outcome.PASS and m.value == 0, m.note
    assert m.note.startswith("no mismatch: 13 of 17 probed contexts matched token for token")
    assert "4 diverged at a near-tie, numerics and not a mismatch" in m.note
    # The three, as the run saw them, and a fourth this run had.
    for said in ("probe-ctx-0009: first differs at output token 14: 1172 vs 2469, logprob gap "
                 "0.0000 <= 0.02", "probe-ctx-0013: first differs at output token 8: 5489 vs "
                 "2619, logprob gap 0.0078", "probe-ctx-0014: first differs at output token 9: "
                 "4970 vs 2762", "probe-ctx-0016: first differs at output token 5"):
        assert said in m.note, said
    # The largest gap is taken before each divergence, where both arms scored the same token.
    gap = float(m.note.split("largest logprob gap ")[1].split()[0])
    assert gap <= GAP_MAX, m.note


def _corrupted(rid: str, at: int, shift: float) -> dict:
    """The recorded candidate with context rid's output replaced from token ``at`` on: other
    ids, each logprob ``shift`` nats lower, as a KV that is not the stored one would give."""
    probes = json.loads(json.dumps(RECORDED["candidate"]))
    probe = probes[rid]
    probe["ids"] = probe["ids"][:at] + [(i + 7) % 8192 for i in probe["ids"][at:]]
    probe["logprobs"] = probe["logprobs"][:at] + [x - shift for x in probe["logprobs"][at:]]
    return probes


def test_a_real_mismatch_in_the_recorded_outputs_still_fails():
    for at, shift, why in ((4, 0.5, "a real gap at the flip"), (0, 0.0, "the first token")):
        m = correctness(*recorded(_corrupted("probe-ctx-0003", at, shift)), TOKENS, GAP_MAX,
                        TIE_MAX)
        assert m.outcome is Outcome.FAIL and m.value == 1, (why, m.note)
        assert m.note.startswith(f"probe-ctx-0003: first differs at output token {at}"), why
        assert "the restored KV is not the KV that was stored" in m.note
        assert "4 diverged at a near-tie" in m.note  # the recorded ties stay numerics


def test_the_rule_is_said_even_when_nothing_diverged():
    """A report whose contexts all matched still says how a divergence would have been judged."""
    same = RECORDED["recompute"]
    m = correctness(arm("candidate", same), arm("recompute", same), TOKENS, GAP_MAX, TIE_MAX)
    assert m.outcome is Outcome.PASS and m.value == 0, m.note
    assert "17 of 17 probed contexts matched" in m.note
    assert "(the rule: a divergence is numerical when it starts after the first output token, " \
        "every earlier token's logprobs agree within 0.1 nats" in m.note
    assert "0.02 nats" in m.note and "near-tie, numerics" not in m.note
