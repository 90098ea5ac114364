"""What an operator sets on the queues of a `MemoryStore`: pause and limit."""

from __future__ import annotations

import dataclasses

from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.memory.heaps import MemoryHeaps


class MemoryQueueSettings(MemoryHeaps):
    """The queue-settings calls of `MemoryStore`."""

    async def queue_settings(self) -> dict[str, QueueSettings]:
        self._open()
        return dict(self._queue_settings)

    async def _set_queue(self, queue: str, settings: QueueSettings) -> None:
        self._open()
        self._store_queue(queue, settings)

    async def _pause_queue(self, queue: str, paused: bool) -> bool:
        self._open()
        settings = self._queue_settings.get(queue, QueueSettings())
        self._store_queue(queue, dataclasses.replace(settings, paused=paused))
        return settings.paused != paused

    async def _set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        self._open()
        settings = self._queue_settings.get(queue, QueueSettings())
        self._store_queue(queue, dataclasses.replace(settings, limit=limit))
        return settings.limit is not None

    async def settings_versions(self) -> tuple[int, int]:
        self._open()
        return self._queue_settings_version, self._limits_version

    def _store_queue(self, queue: str, settings: QueueSettings) -> None:
        """Keep `queue`'s settings (forget them when the defaults) and wake its waiters."""
        if settings == QueueSettings():
            self._queue_settings.pop(queue, None)
        else:
            self._queue_settings[queue] = settings
        self._queue_settings_version += 1
        self._wakeups.notify(queue)
