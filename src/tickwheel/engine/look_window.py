"""`LookWindow`: how much of the store's due-queue index a worker's next look reads.

A look reads every due queue at least every `FULL_LOOK_S`, and after a look that failed or
was cut at its limit; the looks between read only the entries from `LOOK_SLACK_MS` before the
last look on. A queue that came due since is in that
window (its entry rose past the last look's horizon, or its timer was added due about now), and
the queues seen before (hung ones resting by the thousand) are not read again and again: on
Redis, whose one thread answers every worker, a look at a thousand queues' heads over 16 shards
took it about as long as a thousand claims.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FULL_LOOK_S = 1.0
"""A look reads every due queue at least this often (and after a look that failed or was cut
at its limit, or a change of the queues paused): a queue whose entry was earlier than a window
is found by then."""
LOOK_SLACK_MS = 250
"""A look between full ones reads from this long before the last look's time: a timer due
about then, added while that look ran, is still found."""


class LookWindow:
    """The `since_ms` of each look of one worker."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._full_at_s = 0.0
        self._last_ms: int | None = None
        self._paused: object = None

    def since_ms(self, now_ms: int, paused: object) -> int | None:
        """The `since_ms` of a look at the store's `now_ms` (None: a full look), the queues
        paused being `paused` (a new object whenever they change)."""
        now_s = self._clock()
        last_ms, self._last_ms = self._last_ms, now_ms
        if last_ms is not None and now_s < self._full_at_s and paused is self._paused:
            return last_ms - LOOK_SLACK_MS
        self._full_at_s = now_s + FULL_LOOK_S
        self._paused = paused
        return None

    def read_all_next(self) -> None:
        """The look just taken failed, or listed as many queues as it asked for (more may be
        due before its window): the next one reads everything."""
        self._last_ms = None
