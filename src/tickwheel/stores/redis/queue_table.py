"""The queue table of a `RedisStore` a page or a queue at a time.

Each shard keeps an index of the queues that hold timers in it (``<tag>:qn``, score 0, so in
name order), kept by the scripts' ``finish()`` as a queue's first counts field appears and its
last goes. A page asks every shard, in one pipeline, for its first `limit` names after the
cursor with their counts and earliest due times (``lua/queue_page.lua``); the page is the
first `limit` names of all of them and of the queue settings, each queue's counts summed over
its shards. A queue on the page has no `limit` names before it in any shard, so each shard's
first `limit` hold all of its rows on the page: the cost grows with shards times the page,
not with the queues. The settings of a page are the settings hash read whole (what workers
read each time its version moves); one queue reads its three fields.
"""

from __future__ import annotations

import heapq
from typing import Any

from tickwheel.model import State
from tickwheel.stores.base import QueueInfo, QueueSettings
from tickwheel.stores.checks import check_list, check_queue
from tickwheel.stores.codec import state_of
from tickwheel.stores.queue_pages import QueuePage, page_of
from tickwheel.stores.redis import listing
from tickwheel.stores.redis.queue_settings import QueueSettingsHash
from tickwheel.stores.redis.store_base import RedisStoreBase

_STATES = tuple(state_of(code) for code in range(5))  # queue_page.lua's order of counts


class RedisQueueTable(RedisStoreBase):
    """The paged queue-table calls of `RedisStore`."""

    _queue_settings: QueueSettingsHash

    async def list_queues(self, limit: int = 100, cursor: str | None = None) -> QueuePage:
        self._open()
        check_list(limit)
        # one more than the page says whether another follows
        after = "" if cursor is None else cursor
        counts, earliest = await self._shard_rows(after, limit + 1, "")
        settings = await self._queue_settings.settings()
        named = (name for name in settings if cursor is None or name > cursor)
        names = heapq.nsmallest(limit + 1, counts.keys() | set(named))
        found = [
            QueueInfo(
                name,
                counts.get(name) or dict.fromkeys(State, 0),
                earliest.get(name),
                settings.get(name, QueueSettings()),
            )
            for name in names
        ]
        return page_of(found, limit)

    async def queue_info(self, queue: str) -> QueueInfo:
        self._open()
        check_queue(queue)
        counts, earliest = await self._shard_rows("", 1, queue)
        settings = await self._queue_settings.of(queue)
        found = counts.get(queue) or dict.fromkeys(State, 0)
        return QueueInfo(queue, found, earliest.get(queue), settings)

    async def _shard_rows(
        self, after: str, limit: int, only: str
    ) -> tuple[dict[str, dict[State, int]], dict[str, int]]:
        """Each shard's first `limit` queues after `after` (or `only`), their counts summed
        over the shards and their earliest due times, once done timers past retention went."""
        now = await self._now()
        await self._claimer.purge_all(now)
        shards = self._shards
        replies: dict[int, list[Any]] = {}
        todo = list(range(shards.count))
        while todo:  # again where a slot too big to move in one call hid the earliest
            calls = [shards.call("queue_page", s, (after, limit, now, only)) for s in todo]
            replies.update(zip(todo, await shards.run_many(calls), strict=True))
            if any(replies[s][2] for s in todo):  # a keyspace from before counts per queue
                await listing.count(shards, now)
                continue
            todo = [s for s in todo if not replies[s][1]]
        counts: dict[str, dict[State, int]] = {}
        earliest: dict[str, int] = {}
        for rows, *_ in replies.values():
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
