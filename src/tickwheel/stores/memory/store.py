"""`MemoryStore`: the reference behaviour of the `Store` protocol, on the core delay heap.

The class is assembled from one part per concept, each a subclass of `heaps.MemoryHeaps` (the
timers and the heaps that order them): adding, one timer by id (changing), claiming and settling
(leasing), schedules (stored_schedules), queue settings, host limits, listing and counting,
and the bulk calls on a queue (purging).
"""

from __future__ import annotations

from tickwheel.stores.memory.adding import MemoryAdding
from tickwheel.stores.memory.changing import MemoryChanging
from tickwheel.stores.memory.host_limits import MemoryHostLimits
from tickwheel.stores.memory.leasing import MemoryLeasing
from tickwheel.stores.memory.listing import MemoryListing
from tickwheel.stores.memory.purging import MemoryPurging
from tickwheel.stores.memory.stored_schedules import MemorySchedules


class MemoryStore(
    MemoryAdding,
    MemoryChanging,
    MemoryLeasing,
    MemorySchedules,
    MemoryHostLimits,
    MemoryListing,
    MemoryPurging,
):
    """Timers in this process only: lost on exit. For tests, and as the model the others follow."""
