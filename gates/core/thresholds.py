"""The shape of thresholds.toml: limits per gate and the decision rule. Unknown keys are errors."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from .paired import looks_problem
from .strict import Strict
from .units import Duration, Percent, Rate


class Meta(Strict):
    revision: str = Field(min_length=1)
    title: str = ""


class Decision(Strict):
    statistic: Literal["point", "lower_confidence_bound"] = "point"
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    # A Limit's guard band is a fraction below 1 of its bound; 100 % would make all MARGINAL.
    marginal_band: Percent = Field(default=0.0, ge=0.0, lt=100.0, description=(
        "a share of the bound: at 100 % every pass would be MARGINAL"))


class G1Limits(Strict):
    seq_read_bw_min: Rate
    seq_write_bw_min: Rate
    kv_restore_bw_min: Rate
    randread_4k_qd1_p99_max: Duration = Field(gt=0, description="no I/O completes in no time")
    randread_4k_iops_min: float = Field(gt=0)
    steady_state_spread_max: Percent = 20.0
    steady_state_slope_max: Percent = 10.0
    steady_state_required: bool = True
    # Configuration checks (G1 arrival): new drives, the ordered capacity, healthy media.
    capacity_tolerance: Percent = 2.0
    # NVMe SMART Percentage Used is one byte; a drive reports 255 for 255 % and beyond.
    smart_percent_used_max: Percent = Field(default=10.0, le=255.0, description=(
        "NVMe SMART percent_used is one byte: drives report at most 255 %"))
    smart_media_errors_max: int = Field(default=0, ge=0)
    # Used only for a drive that reports no warning threshold (WCTEMP = 0), e.g. many targets.
    temperature_max: float = Field(default=70.0, gt=0, lt=200)


class G2Limits(Strict):
    cv_max: Percent = 5.0
    request_errors_max: int = Field(default=0, ge=0)
    concurrency: list[PositiveInt] = Field(default=[8, 16], min_length=1)
    # CPU other processes may use during a baseline repetition before the baseline counts as
    # possibly starved (a slow baseline inflates every G3 gain): a deviation, with the figure.
    other_cpu_max: Percent = Field(default=25.0, ge=0.0, le=100.0, description=(
        "a share of all cores"))
    repetitions: PositiveInt = 3
    # The machine as a control: a fixed CPU workload timed between repetitions. A stability
    # failure while the machine's own speed moved more than this is INCONCLUSIVE (ERROR).
    cpu_speed_variation_max: Percent = Field(default=10.0, gt=0.0, le=100.0, description=(
        "(slowest - fastest) / fastest reading of the CPU reference"))


class G3Limits(Strict):
    # A reduction is a share of the baseline's TTFT; 100 % would be a TTFT of zero.
    ttft_p50_reduction_min: Percent = Field(default=25.0, lt=100.0, description=(
        "a reduction of 100 % would be a TTFT of zero"))
    throughput_gain_min: Percent = 29.0
    throughput_gain_claimed_max: Percent = 40.0
    storage_read_fraction_min: Percent = Field(default=90.0, le=100.0, description=(
        "a share of the expected KV bytes"))
    # The storage side's bytes during the probe as a share of the engine's own: a floor, and a
    # ceiling above which other I/O on the devices makes the figure unfit (MARGINAL).
    storage_side_band_min: Percent = 90.0
    storage_side_band_max: Percent = Field(default=150.0, gt=100.0, description=(
        "at or below 100 % the engine's own reads would count as other I/O"))
    correctness_tokens: PositiveInt = 16
    # Largest |logprob| difference (nats) of an output token after a restore vs recompute, where
    # the engine sends logprobs (vLLM): equal greedy ids from a KV that is not quite the stored
    # one still move the logprobs. The CPU build gives 0.0000 (same kernels, bf16); a GPU's
    # chunked prefill vs one prefill differs in the last digits, far below 0.1.
    correctness_logprob_gap_max: float = Field(default=0.1, ge=0.0, allow_inf_nan=False)
    # The paired comparison (gates.core.paired): baseline and candidate repetitions in ABBA
    # pairs, looked at after these pair counts (the last is the pair budget per level), while
    # comparison_budget lasts; each look holds its interval at (1 - confidence) / 2 / looks
    # per side, so the whole plan's false-accept risk is at most (1 - confidence) / 2.
    pair_looks: list[PositiveInt] = Field(default=[7, 14, 28], min_length=1, max_length=20)
    comparison_budget: Duration = Field(default=1800.0, gt=0, description=(
        "the time G3 may spend on pairs, all levels"))
    # G3's own baseline repetitions against G2's record: moved further than this, a deviation.
    baseline_shift_max: Percent = Field(default=10.0, gt=0.0, le=100.0)

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
    request_errors_max: int = Field(default=0, ge=0)
    verify_errors_max: int = Field(default=0, ge=0)
    throughput_floor: Percent = Field(default=90.0, le=100.0, description=(
        "a share of G3's throughput that every span's median window must reach"))
    ttft_drift_max: Percent = 10.0
    gap_max: Duration = 1800.0

    @model_validator(mode="after")
    def _window_fits(self) -> G4Limits:
        if self.window > self.duration:
            raise ValueError(f"window ({self.window:g}s) is longer than the soak duration "
                             f"({self.duration:g}s)")
        if self.warmup_windows > 0 and self.warmup_windows + 2 > self.duration / self.window:
            raise ValueError(f"warmup_windows ({self.warmup_windows}) leaves fewer than two "
                             f"windows of the {self.duration:g}s soak ({self.window:g}s windows) "
                             "to judge")
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
