"""Listing and counting the timers of a `MemoryStore`: list, stats and the queue
table (`queue_infos`, a page of it, one queue)."""

from __future__ import annotations

from tickwheel.model import State
from tickwheel.stores.base import Page, QueueInfo, QueueSettings, Stats
from tickwheel.stores.memory.heaps import MemoryHeaps
from tickwheel.stores.queue_pages import QueuePage, page_of


class MemoryListing(MemoryHeaps):
    """The list and count calls of `MemoryStore`."""

    async def queue_infos(self) -> list[QueueInfo]:
        self._open()
        self._expire_done(self._clock())
        counts: dict[str, dict[State, int]] = {}
        for timer in self._timers.values():
            per_state = counts.get(timer.queue)
            if per_state is None:
                per_state = counts[timer.queue] = dict.fromkeys(State, 0)
            per_state[timer.state] += 1
        infos = []
        for queue in sorted(counts.keys() | self._queue_settings.keys()):
            heap = self._due.get(queue)
            infos.append(
                QueueInfo(
                    queue,
                    counts.get(queue) or dict.fromkeys(State, 0),
                    None if heap is None else heap.next_due_ms(),
                    self._queue_settings.get(queue, QueueSettings()),
                )
            )
        return infos

    async def _list_queues(self, limit: int, cursor: str | None) -> QueuePage:
        """The reference: every queue counted, then the page cut from them."""
        infos = await self.queue_infos()
        after = [info for info in infos if cursor is None or info.name > cursor]
        return page_of(after[: limit + 1], limit)

    async def _queue_info(self, queue: str) -> QueueInfo:
        for info in await self.queue_infos():
            if info.name == queue:
                return info
        return QueueInfo(queue, dict.fromkeys(State, 0), None, QueueSettings())

    async def _list(
        self,
        state: State | None,
        limit: int,
        cursor: str | None,
        queue: str | None,
        due_from_ms: int | None,
        due_to_ms: int | None,
    ) -> Page:
        self._open()
        self._expire_done(self._clock())
        ids = sorted(
            timer_id
            for timer_id, timer in self._timers.items()
            if (cursor is None or timer_id > cursor)
            and (state is None or timer.state is state)
            and (queue is None or timer.queue == queue)
            and (due_from_ms is None or timer.due_ms >= due_from_ms)
            and (due_to_ms is None or timer.due_ms < due_to_ms)
        )
        timers = [self._timers[timer_id] for timer_id in ids[: limit + 1]]
        if len(timers) > limit:
            return Page(timers[:limit], timers[limit - 1].id)
        return Page(timers, None)

    async def stats(self) -> Stats:
        self._open()
        now = self._clock()
        self._expire_done(now)
        counts = dict.fromkeys(State, 0)
        for timer in self._timers.values():
            counts[timer.state] += 1
        dues = [due for heap in self._due.values() if (due := heap.next_due_ms()) is not None]
        return Stats(counts, min(dues, default=None))
