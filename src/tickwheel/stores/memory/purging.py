"""A queue's bulk calls on a `MemoryStore`: purge one state, set the queue's defaults."""

from __future__ import annotations

import dataclasses

from tickwheel.model import State, occurrence_of
from tickwheel.stores.base import QueueSettings
from tickwheel.stores.memory.queue_settings import MemoryQueueSettings
from tickwheel.stores.queue_defaults import QueueDefaults


class MemoryPurging(MemoryQueueSettings):
    """The bulk calls of `MemoryStore` on one queue."""

    async def _purge(self, queue: str, state: State) -> int:
        self._open()
        self._expire_done(self._clock())
        gone = [
            timer
            for timer in self._timers.values()
            if timer.queue == queue
            and timer.state is state
            and not (state is State.SCHEDULED and occurrence_of(timer.id))
        ]
        for timer in gone:
            self._forget(timer)
        if gone and state is State.SCHEDULED:
            self._fix_head(queue)  # an emptied queue leaves the due-queue index
        return len(gone)

    async def _set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        self._open()
        settings = self._queue_settings.get(queue, QueueSettings())
        self._store_queue(queue, dataclasses.replace(settings, defaults=defaults))
        return settings.defaults is not None
