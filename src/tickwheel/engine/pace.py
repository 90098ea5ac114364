"""`Pace`: how many deliveries a consumer settles a second.

A consumer's claim room holds about `PACE_HOLD_S` of its work at that pace (`ClaimRoom.pace`),
so a fast consumer claims a coming burst ahead in a few round trips while a slow one leaves a
backlog in the store for the other consumers of its queue. The pace is Little's law: the
deliveries it holds at once over the time each spends in its hands (hand-over to settlement).
Waits for timers to come due are in neither, so a consumer that idles between sparse timers is
not slow; and a consumer that starts a task per delivery is as fast as its tasks settle,
however quickly its loop hands them out.
"""

from __future__ import annotations

import time

PACE_HOLD_S = 1.0
"""A consumer's room holds about this long of its own work, at its pace."""
PACE_SAMPLE = 256
"""Settlements each estimate of the pace is made from."""


class Pace:
    """Deliveries settled a second, estimated every `PACE_SAMPLE` settlements."""

    __slots__ = ("_count", "_in_hand_s", "_out", "_out_sum")

    def __init__(self) -> None:
        self._out = 0  # deliveries handed over and not settled
        self._out_sum = 0  # `_out` at each settlement of the sample
        self._in_hand_s = 0.0
        self._count = 0

    def handed(self) -> float:
        """Note a delivery handed to the consumer; return when (for `settled`)."""
        self._out += 1
        return time.monotonic()

    def settled(self, handed_at: float) -> float | None:
        """Note that the delivery handed at `handed_at` is settled; return the pace once a
        sample is complete."""
        self._out_sum += self._out
        self._out -= 1
        self._in_hand_s += time.monotonic() - handed_at
        self._count += 1
        if self._count < PACE_SAMPLE:
            return None
        pace = self._out_sum / max(self._in_hand_s, 1e-9)
        self._count, self._out_sum, self._in_hand_s = 0, 0, 0.0
        return pace
