"""Short garbage-collector pauses for a process that fires timers on the millisecond."""

from __future__ import annotations

import gc

# young objects are collected every 20,000 net allocations instead of CPython's 700, and the
# old generation after 20 x 100 of those collections: a worker holding thousands of leases
# otherwise pauses for tens of milliseconds in full collections
GC_THRESHOLDS = (20_000, 20, 100)


def steady_gc() -> None:
    """Freeze what startup made and collect the young generation less often.

    A worker holds thousands of claimed timers; under CPython's default thresholds they reach
    the old generation, whose full collections paused firing for 30 to 160 ms at a time.
    `tickwheel serve` and `tickwheel worker` call this once they have started.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
