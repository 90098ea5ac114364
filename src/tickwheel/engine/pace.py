"""`Pace`: how many deliveries a consumer's own code gets through a second.

A consumer's claim room holds about `PACE_HOLD_S` of its work at that pace (`ClaimRoom.pace`),
so a fast consumer claims a coming burst ahead in a few round trips while a slow one leaves a
backlog in the store for the other consumers of its queue. The time counted is the time a
delivery spends in the consumer's hands (from its hand-over to the loop asking for the next),
not waits for timers to come due, so a consumer that idles between sparse timers is not slow.
"""

from __future__ import annotations

PACE_HOLD_S = 1.0
"""A consumer's room holds about this long of its own work, at its pace."""
PACE_SAMPLE = 256
"""Deliveries each estimate of the pace is made from."""


class Pace:
    """Deliveries a second, estimated from the time each `PACE_SAMPLE` spent in hand."""

    __slots__ = ("_count", "_in_hand_s")

    def __init__(self) -> None:
        self._in_hand_s = 0.0
        self._count = 0

    def handled(self, in_hand_s: float) -> float | None:
        """Note a delivery held `in_hand_s`; return the pace once a sample is complete."""
        self._in_hand_s += in_hand_s
        self._count += 1
        if self._count < PACE_SAMPLE:
            return None
        pace = self._count / max(self._in_hand_s, 1e-9)
        self._count, self._in_hand_s = 0, 0.0
        return pace
