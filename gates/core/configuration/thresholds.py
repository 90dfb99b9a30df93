"""The shape of thresholds.toml: limits per gate and the decision rule. Unknown keys are errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, PositiveInt, field_validator, model_validator

from ..quantities import Duration, Percent, Rate, format_duration
from ..statistics import looks_problem
from .cross_checks import KeyedError, soak_problem
from .strict import Strict


@dataclass(frozen=True)
class Relative:
    """A relative rule of G2-G4: a limits profile may move it the stricter way only.

    Profiles exist to replace the array's absolute G1 figures on a machine that is not the
    array (the demo); the rules that compare the site with itself (stability, gains, drift,
    errors) and the decision rule they are judged by hold wherever kvgate runs.
    """

    stricter: Literal["higher", "lower"]
    order: tuple[str, ...] = ()  # a choice: its values from the loosest to the strictest

    def relaxes(self, own: Any, profile: Any) -> bool:
        """Whether the profile's value is looser than the file's own."""
        if self.order:
            own, profile = self.order.index(own), self.order.index(profile)
        return profile < own if self.stricter == "higher" else profile > own


FLOOR, CEILING = Relative("higher"), Relative("lower")


class Meta(Strict):
    revision: str = Field(min_length=1)
    title: str = ""


class Decision(Strict):
    statistic: Annotated[Literal["point", "lower_confidence_bound"], Relative(
        "higher", ("point", "lower_confidence_bound"))] = "point"
    confidence: Annotated[float, FLOOR] = Field(default=0.95, gt=0.5, lt=1.0)
    # A Limit's guard band is a fraction below 1 of its bound; 100 % would make all MARGINAL.
    marginal_band: Annotated[Percent, FLOOR] = Field(
        default=0.0, ge=0.0, lt=100.0,
        description="a share of the bound: at 100 % every pass would be MARGINAL")


class G1Limits(Strict):
    seq_read_bw_min: Rate = Field(gt=0, description="a floor of 0 B/s passes every array")
    seq_write_bw_min: Rate = Field(gt=0, description="a floor of 0 B/s passes every array")
    kv_restore_bw_min: Rate = Field(gt=0, description="a floor of 0 B/s passes every array")
    randread_4k_qd1_p99_max: Duration = Field(gt=0, description="no I/O completes in no time")
    randread_4k_iops_min: float = Field(gt=0)
    steady_state_spread_max: Percent = 20.0
    steady_state_slope_max: Percent = 10.0
    steady_state_required: bool = True
    # Several [fio] hosts (a shared array): the KV-restore aggregate of every host together
    # (unset: reported, held against nothing), the straggler spread (fastest - slowest host,
    # % of the fastest), and one host's restore rate under a neighbour's declared writes, as a %
    # of its rate alone.
    hosts_aggregate_bw_min: Rate | None = Field(default=None, gt=0)
    hosts_spread_max: Percent = 25.0
    neighbour_restore_min: Percent = 70.0
    # Configuration checks (G1 arrival): new drives, the ordered capacity, healthy media.
    capacity_tolerance: Percent = 2.0
    # NVMe SMART Percentage Used is one byte; a drive reports 255 for 255 % and beyond.
    smart_percent_used_max: Percent = Field(default=10.0, le=255.0, description=(
        "NVMe SMART percent_used is one byte: drives report at most 255 %"))
    smart_media_errors_max: int = Field(default=0, ge=0)
    # Used only for a drive that reports no warning threshold (WCTEMP = 0), e.g. many targets.
    temperature_max: float = Field(default=70.0, gt=0, lt=200)


def _timeable(seconds: float, what: str) -> float:
    """A reference read of fio's: 0 s (not read) or long enough to time what it reads; fio's
    start and the file's open take ~0.1 s, so a shorter read times those instead."""
    if 0 < seconds < 0.2:
        raise ValueError(f"{seconds:g}s is too short to time {what}: 0s (not read) or at least "
                         "0.2s")
    return seconds


class G2Limits(Strict):
    cv_max: Annotated[Percent, CEILING] = 5.0
    request_errors_max: Annotated[int, CEILING] = Field(default=0, ge=0)
    concurrency: list[PositiveInt] = Field(default=[8, 16], min_length=1)
    # CPU other processes may use during a baseline repetition before the baseline counts as
    # possibly starved (a slow baseline inflates every G3 gain): a deviation, with the figure.
    other_cpu_max: Annotated[Percent, CEILING] = Field(default=25.0, ge=0.0, le=100.0,
                                                      description="a share of all cores")
    repetitions: Annotated[int, FLOOR] = Field(default=3, ge=2, description=(
        "the run-to-run coefficient of variation (g2.cv_max) is a sample standard deviation, "
        "which one repetition does not have"))
    # The stability plan (docs/g2-stability.md): a level's CVs are looked at after
    # `repetitions` and after every repetition added until they are decided or this many ran.
    repetitions_max: int = Field(default=8, ge=2, le=50, description=(
        "the repetition budget per level: the last look of G2's stability plan"))
    # P(PASS | true CV at cv_max), and P(FAIL) there, at most, over all the plan's looks.
    cv_risk: Annotated[Percent, CEILING] = Field(default=5.0, gt=0.0, lt=50.0, description=(
        "the chance, at most, that a CV exactly at g2.cv_max passes (or fails)"))
    # The machine as a control: a fixed CPU workload timed between repetitions. A stability
    # failure stands only where the readings' CV is credibly under this; else INCONCLUSIVE.
    cpu_speed_steady_cv: Percent = Field(default=5.0, gt=0.0, le=100.0, description=(
        "the CV of the CPU reference's readings (machine speed) over a level's repetitions"))
    device_speed_steady_cv: Percent = Field(default=10.0, gt=0.0, le=100.0, description=(
        "the CV of the KV device reference's read speeds over a level's repetitions"))
    # What G3's looks table and baseline-shift note hold the controls' range against (not G2).
    cpu_speed_variation_max: Percent = Field(default=10.0, gt=0.0, le=100.0, description=(
        "(slowest - fastest) / fastest reading of the CPU reference"))
    # And the KV device: G1's KV-restore job, this long, read between repetitions on the
    # target (gates.storage.devref); 0 s does not read it (the record says so).
    device_reference: Duration = Field(default=0.5, ge=0.0, le=60.0, description=(
        "0s reads no KV device reference; at most 1 minute between two repetitions"))
    device_speed_variation_max: Percent = Field(default=20.0, gt=0.0, le=100.0, description=(
        "(fastest - slowest) / slowest read speed of the KV device reference"))

    @model_validator(mode="after")
    def _budget_covers_the_first_look(self) -> G2Limits:
        if self.repetitions_max < self.repetitions:
            raise ValueError(f"g2.repetitions_max {self.repetitions_max} is below "
                             f"g2.repetitions {self.repetitions}: the first look needs those")
        return self

    @field_validator("device_reference")
    @classmethod
    def _reference_long_enough(cls, seconds: float) -> float:
        return _timeable(seconds, "the device")


class G3Limits(Strict):
    # A reduction is a share of the baseline's TTFT; 100 % would be a TTFT of zero.
    ttft_p50_reduction_min: Annotated[Percent, FLOOR] = Field(
        default=25.0, lt=100.0, description="a reduction of 100 % would be a TTFT of zero")
    throughput_gain_min: Annotated[Percent, FLOOR] = 29.0
    # Above it a gain is flagged for review: raising it flags less.
    throughput_gain_claimed_max: Annotated[Percent, CEILING] = 40.0
    storage_read_fraction_min: Annotated[Percent, FLOOR] = Field(
        default=90.0, le=100.0, description="a share of the expected KV bytes")
    # The storage side's bytes during the probe as a share of the engine's own: a floor, and a
    # ceiling above which other I/O on the devices makes the figure unfit (MARGINAL).
    storage_side_band_min: Annotated[Percent, FLOOR] = 90.0
    storage_side_band_max: Annotated[Percent, CEILING] = Field(
        default=150.0, gt=100.0,
        description="at or below 100 % the engine's own reads would count as other I/O")
    correctness_tokens: Annotated[PositiveInt, FLOOR] = 16
    # Largest |logprob| difference (nats) of an output token after a restore vs recompute, where
    # the engine sends logprobs (vLLM): equal greedy ids from a KV that is not quite the stored
    # one still move the logprobs. The CPU build gives 0.0000 (same kernels, bf16); a GPU's
    # chunked prefill vs one prefill differs in the last digits, far below 0.1.
    correctness_logprob_gap_max: Annotated[float, CEILING] = Field(default=0.1, ge=0.0,
                                                                   allow_inf_nan=False)
    # A divergence whose first differing token (after the first) had the two arms' chosen
    # tokens within this many nats, every earlier token within gap_max, is a near-tie flip of
    # greedy argmax (numerics), not corrupted KV: bf16 logprobs move in steps of 2^-7 ≈ 0.0078
    # near 0 (vLLM's CPU build flipped at gaps 0.0000 and 0.0078, #29); two steps allowed.
    # At most 1 nat: two tokens e times apart in probability are no tie.
    correctness_tie_logprob_max: Annotated[float, CEILING] = Field(default=0.02, ge=0.0, le=1.0,
                                                                   allow_inf_nan=False)
    # The share of probed contexts a measured near-tie may excuse (gates.inference.near_tie),
    # rounded down; more is INCONCLUSIVE. vLLM's CPU build on the tiny random-weight model, the
    # flattest distribution kvgate runs, diverged at near-ties in 4 of 17 contexts (24 %, #29,
    # tests/data/vllm) with its KV files read back byte-identical; corrupted KV is excused only
    # where the candidate chose recompute's own runner-up of a tie, so a bound just above what
    # numerics gave costs little, and "most contexts tied" is never numerics.
    correctness_tie_share_max: Annotated[Percent, CEILING] = Field(
        default=25.0, ge=0.0, le=50.0, description="at most half: most contexts tied is not "
        "numerics")
    # The paired comparison (gates.core.paired): baseline and candidate repetitions in ABBA
    # pairs, looked at after these pair counts (the last is the pair budget per level), while
    # comparison_budget lasts; each look's rank is chosen so that the whole plan's false-accept
    # risk, counted exactly (gates.core.spending), is at most (1 - confidence) / 2.
    pair_looks: list[PositiveInt] = Field(default=[7, 14, 84], min_length=1, max_length=20)
    comparison_budget: Duration = Field(default=4500.0, gt=0, description=(
        "the time G3 may spend on pairs, all levels"))
    # G3's own baseline repetitions against G2's record: moved further than this, a deviation.
    baseline_shift_max: Annotated[Percent, CEILING] = Field(default=10.0, gt=0.0, le=100.0)
    # Each arm's storage, read once before the pairs (G1's KV-restore job, this long, in the
    # arm's kv_dir): the KV model bounds the gain it explains (gates.engines.fairness); 0 s
    # reads none, and a gain above the claimed band then stands as a deviation unexplained.
    arm_storage_reference: Duration = Field(default=2.0, ge=0.0, le=60.0, description=(
        "0s reads no arm's storage; at most 1 minute an arm"))

    @field_validator("arm_storage_reference")
    @classmethod
    def _arm_reference_long_enough(cls, seconds: float) -> float:
        return _timeable(seconds, "the storage")

    @model_validator(mode="after")
    def _band_in_order(self) -> G3Limits:
        if self.throughput_gain_min > self.throughput_gain_claimed_max:
            raise ValueError(f"throughput_gain_min ({self.throughput_gain_min:g} %) is above "
                             f"throughput_gain_claimed_max ({self.throughput_gain_claimed_max:g}"
                             " %)")
        if self.storage_side_band_min >= self.storage_side_band_max:
            raise ValueError(f"storage_side_band_min ({self.storage_side_band_min:g} %) is not "
                             f"below storage_side_band_max ({self.storage_side_band_max:g} %): "
                             "no probe could pass")
        return self


class G4Limits(Strict):
    duration: Duration = Field(default=72 * 3600.0, gt=0)
    window: Duration = Field(default=300.0, gt=0)
    # Left out of the throughput and TTFT rules (errors still count): a fresh engine whose
    # sessions start together is not yet at its operating point.
    warmup_windows: int = Field(default=1, ge=0)
    request_errors_max: Annotated[int, CEILING] = Field(default=0, ge=0)
    verify_errors_max: Annotated[int, CEILING] = Field(default=0, ge=0)
    throughput_floor: Annotated[Percent, FLOOR] = Field(default=90.0, le=100.0, description=(
        "a share of the soak's first span's throughput (after the warm-up) that every later "
        "span's median window must reach"))
    ttft_drift_max: Annotated[Percent, CEILING] = 10.0
    gap_max: Annotated[Duration, CEILING] = 1800.0

    @model_validator(mode="after")
    def _window_fits(self) -> G4Limits:
        if problem := soak_problem(self.duration, self.window, self.warmup_windows):
            key, text = problem
            raise KeyedError(key, text.format(
                duration=f'duration = "{format_duration(self.duration)}"',
                window=f'window = "{format_duration(self.window)}"',
                warmup=f"warmup_windows = {self.warmup_windows}"),
                f'"{format_duration(getattr(self, key))}"')
        return self


class Thresholds(Strict):
    meta: Meta
    decision: Decision = Decision()
    g1: G1Limits
    g2: G2Limits = G2Limits()
    g3: G3Limits = G3Limits()
    g4: G4Limits = G4Limits()
    # Set by the loader, not by the file: which [profiles.NAME] was applied.
    profile: str = Field(default="", exclude=True)
    profile_description: str = Field(default="", exclude=True)

    @model_validator(mode="after")
    def _looks_can_decide(self) -> Thresholds:
        # Needs both tables: the risk per look comes from [decision] confidence.
        if problem := looks_problem(self.g3.pair_looks, (1 - self.decision.confidence) / 2):
            raise ValueError(f"g3.pair_looks: {problem}")
        return self


def _relative_rules() -> dict[str, list[tuple[str, Relative]]]:
    tables = {name: Thresholds.model_fields[name].annotation for name in ("decision", "g2", "g3",
                                                                          "g4")}
    return {name: [(key, rule) for key, field in model.model_fields.items()
                   for rule in field.metadata if isinstance(rule, Relative)]
            for name, model in tables.items() if isinstance(model, type)
            and issubclass(model, BaseModel)}


# Every relative rule, by table: what a limits profile may only tighten.
RELATIVE = _relative_rules()


def relaxations(own: Thresholds, profiled: Thresholds, profile: str) -> list[str]:
    """Each relative rule the profile relaxes, named with both values ([] = none).

    own: the file's own limits; profiled: the same file with [profiles.NAME] applied.
    """
    problems = []
    for table, rules in RELATIVE.items():
        mine, theirs = getattr(own, table), getattr(profiled, table)
        written = mine.model_dump(mode="json"), theirs.model_dump(mode="json")
        for key, rule in rules:
            if rule.relaxes(getattr(mine, key), getattr(theirs, key)):
                way = "at most" if rule.stricter == "lower" else "at least"
                problems.append(
                    f"key 'profiles.{profile}.{table}.{key}': profile '{profile}' sets "
                    f"{json.dumps(written[1][key])}, looser than the file's own {table}.{key} "
                    f"= {json.dumps(written[0][key])}: a limits profile may tighten G2-G4's "
                    f"relative rules and the decision rule, never relax them (write {way} "
                    f"{json.dumps(written[0][key])}, or leave the key out)")
    return problems
