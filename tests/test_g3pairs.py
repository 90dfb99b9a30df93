"""G3's pairs (gates.inference.measured_pair, used by fixtures/g3pairs.py and kvgate sweep): a
pair in which the load generator was unfit is measured again.

The rule is the generator's own lag alone (Repetition.fit), never either arm's figures, and it
is bounded: at most REMEASURES set-aside pairs per level, none once the time budget is spent.
"""


from gates.inference import Repetition, measured_pair
from gates.inference.comparison import REMEASURES


def rep(arm: str, fit: bool, ttft: float = 1.0) -> Repetition:
    return Repetition(arm=arm, concurrency=8, repetition=0, ttfts=[ttft],
                      output_throughput=100.0, sent=1, errors=0, fit=fit)


def measuring(fits: list[tuple[bool, bool]]):
    """A measure(again) that returns the listed pairs in turn, and the agains it was asked."""
    asked: list[int] = []

    def measure(again: int):
        asked.append(again)
        b, x = fits[len(asked) - 1]
        return rep("baseline", b), rep("candidate", x, ttft=float(len(asked)))
    return measure, asked


def test_a_fit_pair_is_kept_as_measured():
    measure, asked = measuring([(True, True)])
    aside = []
    pair = measured_pair(measure, aside, lambda: False)
    assert asked == [0] and aside == [] and pair[1].ttfts == [1.0]


def test_an_unfit_pair_is_set_aside_and_measured_again():
    measure, asked = measuring([(True, False), (False, True), (True, True)])
    aside = []
    pair = measured_pair(measure, aside, lambda: False)
    assert asked == [0, 1, 2] and len(aside) == 2 and pair[1].ttfts == [3.0]
    # The set-aside pairs themselves are kept, in the order they ran, for the evidence.
    assert [(b.fit, x.fit, x.ttfts) for b, x in aside] == [(True, False, [1.0]),
                                                           (False, True, [2.0])]


def test_set_asides_are_bounded_per_level_and_by_the_time_budget():
    unfit = [(True, False)] * (REMEASURES + 2)
    measure, asked = measuring(unfit)
    aside = []
    pair = measured_pair(measure, aside, lambda: False)
    assert len(aside) == REMEASURES and not pair[1].fit  # kept: the level is INCONCLUSIVE
    assert asked == list(range(REMEASURES + 1))
    # A level that already set aside its share measures each later pair once.
    measure, asked = measuring(unfit)
    assert not measured_pair(measure, aside, lambda: False)[1].fit and asked == [0]
    measure, asked = measuring(unfit)
    assert not measured_pair(measure, [], lambda: True)[1].fit and asked == [0]
