"""Sharing the ERM pre-training prefix between the runs of a stack.

A run with ERM pre-training length k trains k steps with the warm-up penalty weight (0: plain
ERM, the same loss whatever its own penalty weight) and then switches its penalty on. Runs that
start from the same weights therefore follow one trajectory, the *trunk*, until their own k:
configurations with 200 and 250 pre-training epochs share their first 200 steps, and the 5
penalty weights of one length share all of them. Instead of training every run from step 0,
the fast path trains the trunk once and lets each run *join* at its k with the trunk's weights
and Adam state (every run has taken exactly k Adam steps by then, so the step counts agree).

For the protocol's 30 configurations (5 weights x lengths 0, 50, ..., 250, 1000 steps) that
trains ``5 x (1000 + 950 + ... + 750) + 250 = 26,500`` run-steps instead of 30,000.

The stack's runs are laid out along its last batch dimension (the configuration axis). A
:class:`Transition` at step s gives the new layout: the configuration of each slot (:data:`TRUNK`
for the trunk) and, for each slot, the slot of the previous layout it continues (at step 0: the
configuration index in the caller's layout). Exact: each run sees the same sequence of
operations on the same values as when trained from step 0 (``tests/test_fast_ood_stage.py``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The configuration "index" of the trunk's slot.
TRUNK = -1


@dataclass(frozen=True)
class Transition:
    """The layout from step ``step`` on: ``members[i]`` is slot i's configuration (or
    :data:`TRUNK`), ``source[i]`` the slot of the previous layout it continues."""

    step: int
    members: tuple[int, ...]
    source: tuple[int, ...]

    @property
    def trunk(self) -> int | None:
        """The trunk's slot, None once every run has joined."""
        return self.members.index(TRUNK) if TRUNK in self.members else None

    def positions(self, n_configs: int) -> list[int]:
        """The slot that holds each configuration's current weights: its own once it has joined,
        the trunk's before (the run *is* the trunk until its pre-training ends)."""
        where = {c: i for i, c in enumerate(self.members)}
        return [where.get(c, self.trunk) for c in range(n_configs)]


def prefix_schedule(join_steps: Sequence[int], steps: int) -> list[Transition]:
    """The transitions of a stack whose configuration c leaves the trunk at ``join_steps[c]``
    (its pre-training length; lengths >= ``steps`` join at ``steps``, after the last step).

    All zeros (no sharing) gives one transition at step 0 that keeps the caller's layout."""
    n = len(join_steps)
    join = [min(int(k), steps) for k in join_steps]
    if any(k < 0 for k in join):
        raise ValueError(f"join_steps must be integers >= 0; got {list(join_steps)}")
    later = [c for c in range(n) if join[c] > 0]
    members = [c for c in range(n) if join[c] == 0] + ([TRUNK] if later else [])
    source = [c for c in range(n) if join[c] == 0] + ([later[0]] if later else [])
    transitions = [Transition(0, tuple(members), tuple(source))]
    for step in sorted({k for k in join if k > 0}):
        previous = transitions[-1]
        trunk = previous.trunk
        running = [(c, i) for i, c in enumerate(previous.members) if c != TRUNK]
        joiners = [c for c in range(n) if join[c] == step]
        keep_trunk = any(k > step for k in join)
        members = [c for c, _ in running] + joiners + ([TRUNK] if keep_trunk else [])
        source = [i for _, i in running] + [trunk] * len(joiners) + ([trunk] if keep_trunk else [])
        transitions.append(Transition(step, tuple(members), tuple(source)))
    return transitions


def run_steps(transitions: Sequence[Transition], steps: int) -> int:
    """Run-steps the schedule trains (slots x steps, the trunk included): the work it costs."""
    total = 0
    for t, nxt in zip(transitions, [*transitions[1:], None]):
        end = steps if nxt is None else nxt.step
        total += len(t.members) * (end - t.step)
    return total
