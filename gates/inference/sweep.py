"""One point of a working-set sweep: G3's paired probe at one KV working set, summarised. Pure.

The pairs are G3's (baseline and candidate in ABBA order, whole repetitions as the unit) but
few, and no look decides anything: a sweep has no PASS. Each figure is the median pair ratio
with the widest sign-test interval the pairs allow, never wider than G3's confidence: at n
pairs [d_(1), d_(n)] holds the true median with probability 1 - 2 x 0.5^n (3 pairs: 75 %,
5: 93.75 %), stated beside it. "Clears" means that interval lies wholly past G3's limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pydantic import BaseModel

from ..core.configuration import Decision, G3Limits
from ..core.statistics import LookPlan, log_ratios, sequential
from ..core.verdicts import Outcome
from ..proof import ChainWord, ProofContext, judge_chain
from .comparison import METRICS, Pair, figures, limits_of
from .g2g3 import level_chain


class SweepFigure(BaseModel):
    """A gain at one working set: median pair ratio in %, its interval and that's level."""

    point: float
    lo: float
    hi: float
    level: float  # two-sided confidence of [lo, hi]
    limit: float  # G3's limit for the figure, %
    clears: bool  # G3's decision rule at this interval: PASS (the whole interval past it)


class SweepPoint(BaseModel):
    """What the sweep measured at one working set (or why it could not)."""

    asked: int  # bytes as [sweep] sizes wrote them (0: the default series)
    contexts: int
    working_set: int  # bytes: contexts x context_tokens x KV bytes per token
    concurrency: int
    baseline_ttft_p50: list[float] = []  # s, one per pair
    candidate_ttft_p50: list[float] = []
    baseline_throughput: list[float] = []  # tok/s, one per pair
    candidate_throughput: list[float] = []
    ttft_reduction: SweepFigure | None = None
    throughput_gain: SweepFigure | None = None
    proof: str = ""  # the evidence chain's outcome: PASS (storage read), FAIL, ERROR
    proof_verdict: ChainWord | None = None  # the chain's own word (ERROR or INCONCLUSIVE)
    proof_note: str = ""
    seconds: float = 0.0
    set_aside: int = 0  # pairs measured again because the load generator was unfit in them
    server: str = ""  # what the arms' server said it is (GET /v1/models, its version)
    simulated: bool = False  # it said it is kvgate's simulator
    error: str = ""

    @property
    def clears(self) -> bool:
        """Both gains' intervals past G3's limits."""
        return bool(self.ttft_reduction and self.ttft_reduction.clears
                    and self.throughput_gain and self.throughput_gain.clears)

    @property
    def proven(self) -> bool:
        """The evidence chain shows the KV came from the storage at this working set."""
        return self.proof == Outcome.PASS.value

    @property
    def proof_word(self) -> str:
        """The proof as one word for the terminal and the page: storage read, INCONCLUSIVE,
        ERROR or FAIL (a signal disagreed)."""
        if self.proven:
            return "storage read"
        return str(self.proof_verdict or self.proof or "not judged")


def sweep_plan(pairs: int, decision: Decision) -> LookPlan:
    """One look at all the pairs, at the widest interval they allow (rank 1 at few pairs)."""
    return LookPlan(looks=(pairs,), alpha=max(0.5**pairs, (1 - decision.confidence) / 2))


def sweep_figure(id: str, baseline: Sequence[float], candidate: Sequence[float],
                 limits: G3Limits, decision: Decision) -> SweepFigure:
    """One gain from the pairs' figures (baseline_i, candidate_i), id a G3 gain's
    (g3.ttft_p50_reduction, g3.throughput_gain); ValueError when a figure is missing."""
    metric = next(m for i, m, _ in METRICS if i == id)
    limit = limits_of(0, limits, decision)[id]
    d = log_ratios(baseline, candidate)
    final = sequential(d, metric, limit, sweep_plan(len(d), decision), decision.statistic,
                       spent=True).final
    assert final is not None  # one look, made at every pair
    return SweepFigure(point=final.point, lo=final.lo, hi=final.hi, level=final.level,
                       limit=limit.lo if limit.lo is not None else 0.0,
                       clears=final.outcome == "PASS")


def sweep_point(asked: int, contexts: int, working_set: int, concurrency: int,
                pairs: Sequence[Pair], limits: G3Limits, decision: Decision,
                proof: ProofContext, kv_bytes_per_token: int | None,
                seconds: float = 0.0) -> SweepPoint:
    """The point of one working set from its pairs (ValueError: a pair has no figure)."""
    base, cand = [b for b, _ in pairs], [c for _, c in pairs]
    ttft, tput = (figures(pairs, id) for id, _, _ in METRICS)
    point = SweepPoint(
        asked=asked, contexts=contexts, working_set=working_set, concurrency=concurrency,
        baseline_ttft_p50=ttft[0], candidate_ttft_p50=ttft[1], baseline_throughput=tput[0],
        candidate_throughput=tput[1], seconds=seconds)
    if errors := sum(r.errors for r in (*base, *cand)):
        texts = "; ".join(r.error_text for r in (*base, *cand) if r.error_text)
        return point.model_copy(update={"error": f"{errors} failed requests: {texts}"})
    found = {id: sweep_figure(id, *lists, limits, decision)
             for (id, _, _), lists in zip(METRICS, (ttft, tput), strict=True)}
    chain = judge_chain(level_chain(cand, [], proof, kv_bytes_per_token))
    return point.model_copy(update={
        "ttft_reduction": found["g3.ttft_p50_reduction"],
        "throughput_gain": found["g3.throughput_gain"],
        "proof": chain.outcome.value, "proof_verdict": chain.word, "proof_note": chain.reason})


def _from_up(points: Sequence[SweepPoint], holds: Callable[[SweepPoint], bool]
             ) -> SweepPoint | None:
    """The smallest point from which ``holds`` is true of every larger one. A point that could
    not be measured ends the run like one where it fails: "from here up, every size" cannot
    stand on a size nobody measured (the page names it, and why)."""
    found = None
    for p in reversed(points):
        if p.error or not holds(p):
            break
        found = p
    return found


def break_even(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The smallest working set from which every larger point was measured and clears both
    limits."""
    return _from_up(points, lambda p: p.clears)


def proof_from(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The smallest working set from which every larger point was measured and the evidence
    chain proves storage reads at each (below it memory could hold the KV, the chain
    disagreed, or a size could not be measured)."""
    return _from_up(points, lambda p: p.proven)
