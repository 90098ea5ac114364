"""The queue table of a `RedisStore` a page or a queue at a time.

Each shard keeps an index of the queues that hold timers in it (``<tag>:qn``, score 0, so in
name order), kept by the scripts' ``finish()`` as a queue's first counts field appears and its
last goes. A page takes two pipelines of ``lua/queue_page.lua``, one call per shard each:
every shard's first names after the cursor, then the counts and earliest due times of the
page's names from the shards that listed them. The page is the first names of all of them and
of the first queues with settings after the cursor (read through their own index,
``{<p>:queue-settings}:names``); a queue on it has fewer names before it in any shard, or
among the settings, than the page holds, so each list includes all of its own on the page.
The cost grows with shards times the page for names (cheap) and with the page for counts and
settings, not with the queues. One queue reads its three settings fields. A queue whose last
timer went between the two pipelines is listed with zero counts.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from tickwheel.model import State
from tickwheel.stores.base import QueueInfo, QueueSettings
from tickwheel.stores.codec import state_of
from tickwheel.stores.queue_pages import QueuePage, page_of
from tickwheel.stores.redis import listing
from tickwheel.stores.redis.queue_settings import QueueSettingsHash
from tickwheel.stores.redis.scripts import Arg
from tickwheel.stores.redis.store_base import RedisStoreBase

_STATES = tuple(state_of(code) for code in range(5))  # queue_page.lua's order of counts
Counts = dict[str, dict[State, int]]


class RedisQueueTable(RedisStoreBase):
    """The paged queue-table calls of `RedisStore`."""

    _queue_settings: QueueSettingsHash

    async def _list_queues(self, limit: int, cursor: str | None) -> QueuePage:
        await self._ready()
        now = await self._now()
        await self._claimer.purge_all(now)
        # one more than the page says whether another follows
        args = ("" if cursor is None else cursor, limit + 1, now)
        listed = await self._each_shard({s: args for s in range(self._shards.count)}, now)
        settings = await self._queue_settings.page(limit + 1, cursor)
        names: set[str] = {name for reply in listed.values() for name in _text(reply)}
        names.update(settings)
        page = heapq.nsmallest(limit + 1, names)
        on_page = set(page)
        asks: dict[int, Sequence[Arg]] = {}
        for s, reply in listed.items():
            held = [name for name in _text(reply) if name in on_page]
            if held:
                asks[s] = ("", 0, now, *held)
        counts, earliest = _summed(await self._each_shard(asks, now))
        found = [
            QueueInfo(
                name,
                counts.get(name) or dict.fromkeys(State, 0),
                earliest.get(name),
                settings.get(name, QueueSettings()),
            )
            for name in page
        ]
        return page_of(found, limit)

    async def _queue_info(self, queue: str) -> QueueInfo:
        await self._ready()
        now = await self._now()
        await self._claimer.purge_all(now)
        asks: dict[int, Sequence[Arg]] = dict.fromkeys(
            range(self._shards.count), ("", 0, now, queue)
        )
        counts, earliest = _summed(await self._each_shard(asks, now))
        settings = await self._queue_settings.of(queue)
        found = counts.get(queue) or dict.fromkeys(State, 0)
        return QueueInfo(queue, found, earliest.get(queue), settings)

    async def _each_shard(self, asks: dict[int, Sequence[Arg]], now: int) -> dict[int, list[Any]]:
        """Each asked shard's queue_page.lua payload, once its counts are kept per queue and
        every earliest it gave is exact."""
        shards = self._shards
        payloads: dict[int, list[Any]] = {}
        todo = list(asks)
        while todo:  # again where a slot too big to move in one call hid the earliest
            calls = [shards.call("queue_page", s, asks[s]) for s in todo]
            replies = await shards.run_many(calls)
            if any(legacy for _, _, legacy in replies):  # a keyspace from before counts per queue
                await listing.count(shards, now)
                continue
            payloads.update((s, payload) for s, (payload, _, _) in zip(todo, replies, strict=True))
            todo = [s for s, (_, exact, _) in zip(todo, replies, strict=True) if not exact]
        return payloads


def _text(names: list[bytes]) -> list[str]:
    return [name.decode() for name in names]


def _summed(payloads: dict[int, list[Any]]) -> tuple[Counts, dict[str, int]]:
    """Counts per queue summed over the shards' rows, and each queue's earliest due time."""
    counts: Counts = {}
    earliest: dict[str, int] = {}
    for rows in payloads.values():
        for i in range(0, len(rows), 7):
            queue = rows[i].decode()
            per_state = counts.get(queue)
            if per_state is None:
                per_state = counts[queue] = dict.fromkeys(State, 0)
            for state, n in zip(_STATES, rows[i + 1 : i + 6], strict=True):
                per_state[state] += int(n)
            if rows[i + 6]:
                due = int(rows[i + 6])
                if due < earliest.get(queue, due + 1):
                    earliest[queue] = due
    return counts, earliest
