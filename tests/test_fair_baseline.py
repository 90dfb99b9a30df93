"""Issue #43 case 5: a crippled baseline reads as a great array.

Before the fix a gain far above the claimed band was a note on the measurement ("check that the
baseline was configured fairly"): no deviation, so neither the summary nor its recommendation
said a word, and a candidate 20x faster than its baseline tier PASSed at +340 % with that note
alone. Now G3 measures both arms' storage (the same short KV-restore fio job in each arm's
kv_dir), states the most gain the KV model allows from the two bandwidths, and a gain above the
claimed band and beyond that bound is a blocking deviation that only a signed waiver clears.
"""

import pytest
from _chain import SITE, add_gate, full_chain

from gates.cli import main
from gates.core.configuration import Decision, G3Limits
from gates.core.verdicts import Cause, Effect
from gates.engines import gain_bound, unexplained_gains
from gates.engines.fairness import ArmStorage, GainBound
from gates.inference import Repetition, g3_measurements
from gates.report import build_summary, write_summary
from gates.report.summary import ACCEPT, NOT_READY
from gates.store import Store

KV_BYTES = 256 * 1024  # a 256-token context at 1,024 B a token (the e2e sites')
PAIRS = 7


def storage(base_bps, cand_bps=1.0e9, base_dir="/t/kv-baseline", error=""):
    return {"baseline": ArmStorage(arm="baseline", directory=base_dir, bytes_per_s=base_bps,
                                   error=error),
            "candidate": ArmStorage(arm="candidate", directory="/t/kv-candidate",
                                    bytes_per_s=cand_bps)}


def gains(speedup):
    """G3's throughput-gain measurements (the real rule) of a candidate `speedup` times faster
    in TTFT, 4.4x in throughput (+340 %: the issue's run)."""
    base = [Repetition(arm="baseline", concurrency=8, repetition=i, ttfts=[10.0, 10.0, 10.0],
                       output_throughput=100.0 + i, sent=3, errors=0) for i in range(PAIRS)]
    cand = [Repetition(arm="candidate", concurrency=8, repetition=i,
                       ttfts=[10.0 / speedup] * 3, output_throughput=440.0 + 4 * i, sent=3,
                       errors=0) for i in range(PAIRS)]
    out = g3_measurements({8: list(zip(base, cand, strict=True))}, [], G3Limits(), Decision())
    return [m for m in out if m.id == "g3.throughput_gain"]


def test_the_bound_is_the_kv_model_s_gain_from_both_arms_bandwidth():
    bound = gain_bound(storage(0.5e9), KV_BYTES)
    # Restore time = KV bytes / bandwidth, nothing else in TTFT, no decode time: the ideal case,
    # so the most a 2x faster storage can give is +100 %.
    assert bound.gain_pct == pytest.approx(100.0)
    assert "baseline 0.5 GB/s in /t/kv-baseline" in bound.basis
    assert "candidate 1 GB/s in /t/kv-candidate" in bound.basis


def test_a_20x_faster_candidate_over_a_baseline_on_the_same_storage_is_a_blocking_deviation():
    [gain] = gains(20.0)
    assert gain.outcome.value == "PASS" and gain.value > 300  # what the issue saw: PASS
    [found] = unexplained_gains([gain], G3Limits(), gain_bound(storage(0.98e9), KV_BYTES))
    assert found.cause is Cause.GAIN_BEYOND_STORAGE and found.effect is Effect.BLOCKING
    text = found.text
    assert text.startswith("gain beyond the arms' storage at concurrency 8: output throughput "
                           "+3"), text
    assert "above the claimed band (+29…+40 %, g3.throughput_gain_claimed_max)" in text
    assert "above the +2 % the KV model allows at most" in text, text
    assert "baseline 0.98 GB/s in /t/kv-baseline" in text


def test_the_deviation_tells_the_reader_why_it_matters_and_how_to_clear_it():
    [gain] = gains(20.0)
    for bound in (gain_bound(storage(0.98e9), KV_BYTES), gain_bound({}, KV_BYTES)):
        [found] = unexplained_gains([gain], G3Limits(), bound)
        assert found.text.endswith(
            ". A baseline slower than its own storage (an engine throttled or misconfigured) "
            "makes any array look great: re-run with a fairly configured baseline, or a named "
            "person waives it (kvgate waive)"), found.text


def test_a_gain_the_arms_storage_explains_is_no_deviation():
    [gain] = gains(20.0)
    # The baseline's tier really is 20x slower: +1,900 % at most, +340 % is within it.
    assert unexplained_gains([gain], G3Limits(), gain_bound(storage(0.05e9), KV_BYTES)) == []


def test_a_gain_inside_the_claimed_band_is_no_deviation_whatever_the_storage():
    in_band = gains(20.0)[0].model_copy(update={"value": 35.0, "interval": (30.0, 40.0)})
    assert unexplained_gains([in_band], G3Limits(), gain_bound(storage(1e9), KV_BYTES)) == []


def test_without_a_measured_baseline_storage_nothing_explains_a_gain_above_the_band():
    [gain] = gains(20.0)
    recompute = storage(None, base_dir="")
    [found] = unexplained_gains([gain], G3Limits(), gain_bound(recompute, KV_BYTES))
    assert found.cause is Cause.GAIN_BEYOND_STORAGE and found.effect is Effect.BLOCKING
    text = found.text
    assert "no prediction can be made: the baseline arm names no kv_dir" in text, text
    failed = storage(None, error="fio exited 1: O_DIRECT not supported")
    [text] = [d.text for d in unexplained_gains([gain], G3Limits(), gain_bound(failed, KV_BYTES))]
    assert "the baseline's storage could not be measured: fio exited 1: O_DIRECT" in text, text
    [text] = [d.text for d in unexplained_gains([gain], G3Limits(), gain_bound({}, KV_BYTES))]
    assert "the arms' storage was not measured" in text, text


IDEAL = ("the same KV-restore read in each; the ideal case: restore time = KV bytes / "
         "bandwidth, nothing else in TTFT, no decode time")


def test_each_bound_says_what_it_stands_on_word_for_word():
    assert gain_bound(storage(0.5e9), KV_BYTES).basis == (
        f"candidate 1 GB/s in /t/kv-candidate, baseline 0.5 GB/s in /t/kv-baseline, {IDEAL}")
    assert gain_bound(storage(None, base_dir=""), KV_BYTES).basis == (
        "the baseline arm names no kv_dir: it recomputes (or reads a tier kvgate cannot see), "
        "and no read bandwidth bounds a gain over recompute (that needs the engine's prefill "
        "rate, which G3 does not measure)")
    unread = storage(0.5e9, cand_bps=None)
    assert gain_bound(unread, KV_BYTES) == GainBound(
        gain_pct=None, basis="the candidate's storage could not be measured: no reading")


@pytest.mark.parametrize("arm", ["baseline", "candidate"])
def test_one_arm_not_measured_is_no_bound(arm):
    one = {k: v for k, v in storage(0.5e9).items() if k != arm}
    assert gain_bound(one, KV_BYTES) == GainBound(
        gain_pct=None, basis="the arms' storage was not measured")


def test_an_arm_reading_says_where_and_what_it_read_or_why_not():
    assert ArmStorage(arm="baseline").line() == "baseline: no kv_dir"
    assert ArmStorage(arm="baseline", directory="/t/b", error="EIO").line() == (
        "baseline in /t/b: not read (EIO)")
    assert ArmStorage(arm="candidate", directory="/t/c", bytes_per_s=2e9).line() == (
        "candidate 2 GB/s in /t/c")


def test_a_gain_at_the_bound_is_explained_and_one_above_it_is_not():
    [gain] = gains(20.0)
    at = GainBound(gain_pct=gain.value, basis="b")
    assert unexplained_gains([gain], G3Limits(), at) == []
    above = GainBound(gain_pct=gain.value - 0.5, basis="b")
    assert len(unexplained_gains([gain], G3Limits(), above)) == 1


def test_every_level_is_judged_each_with_its_interval_or_none():
    [gain] = gains(20.0)
    in_band = gain.model_copy(update={"at": 4, "value": 35.0, "interval": (30.0, 40.0)})
    no_value = gain.model_copy(update={"at": 2, "value": None})
    explained = gain.model_copy(update={"at": 16, "value": 50.0, "interval": None})
    bare = gain.model_copy(update={"at": 32, "interval": None})
    bound = GainBound(gain_pct=60.0, basis="b")
    found = unexplained_gains([no_value, in_band, explained, gain, bare], G3Limits(), bound)
    assert [d.cause for d in found] == [Cause.GAIN_BEYOND_STORAGE] * 2
    lo, hi = gain.interval
    assert found[0].text.startswith(
        f"gain beyond the arms' storage at concurrency 8: output throughput {gain.value:+.0f} % "
        f"[{lo:+.0f}, {hi:+.0f} %] is above the claimed band"), found[0].text
    assert found[1].text.startswith(
        f"gain beyond the arms' storage at concurrency 32: output throughput {gain.value:+.0f} % "
        "is above the claimed band"), found[1].text
    assert "above the +60 % the KV model allows at most from the arms' measured storage (b)" \
        in found[1].text


def test_the_deviation_keeps_an_all_pass_chain_from_accept_until_a_signed_waiver(tmp_path, key):
    [gain] = gains(20.0)
    [found] = unexplained_gains([gain], G3Limits(), gain_bound(storage(0.98e9), KV_BYTES))
    out = tmp_path / "out"
    with Store(out) as store:
        full_chain(store, "r1", gates=("g1",))
        below = store.record("r1", "g1")
        for gate in ("g2", "g3", "g4"):
            below = add_gate(store, "r1", gate, cites=below,
                             deviations=[found] if gate == "g3" else [])
        summary = build_summary(store, SITE, "r1")
        write_summary(store, SITE, "r1")
    assert summary.recommendation.status == NOT_READY
    [reason] = summary.recommendation.reasons
    assert reason.startswith("open deviation (G3, run r1): gain beyond the arms' storage")
    assert main(["waive", "r1", "gain beyond the arms' storage", "--reason",
                 "the baseline is the buyer's own throttled tier", "--by", "J. Reviewer",
                 "--out", str(out)]) == 0
    with Store(out) as store:
        assert build_summary(store, SITE, "r1").recommendation.status == ACCEPT


def test_an_arm_storage_reading_too_short_to_time_the_storage_is_refused():
    assert G3Limits(arm_storage_reference=0.0).arm_storage_reference == 0.0  # not read
    with pytest.raises(ValueError, match="too short to time the storage"):
        G3Limits(arm_storage_reference=0.1)
