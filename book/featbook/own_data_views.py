"""Chapter 08's sentences that depend on its run ("FeAT on your own data"), kept out of the
notebook so that each branch is tested on fabricated numbers (tests/test_own_data_chapter.py)."""
from __future__ import annotations

from featbook import prose


def penalty_choice(by_held_out: float, by_against: float, test_acc: dict) -> str:
    """Which penalty weight each rule of "Choosing the penalty weight" picks, with the test
    accuracy of that head (``test_acc``: weight -> accuracy; the test set never chooses): the
    weights as powers of ten (10³), never in code's e-notation."""
    def chosen(weight: float) -> str:
        return f"{prose.power(weight, plain_below=1)} (test {prose.percent(test_acc[weight])})"

    if by_held_out == by_against:
        return (f"Here both rules pick {chosen(by_held_out)}: the held-out examples did not mislead in this run, "
                "which you cannot count on")
    return (f"In this run, choosing on all held-out examples picks {chosen(by_held_out)}; choosing on those "
            f"against the shortcut picks {chosen(by_against)}")
