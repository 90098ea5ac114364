"""A queue's bulk calls on a `RedisStore`: purge one state, set the queue's defaults.

A purge runs ``lua/purge_queue.lua`` on every shard, `PURGE_BATCH` entries read a call, each
shard's calls of one round in one pipeline, until every shard says it holds no more: no script
blocks the server for longer than a claim's does.
"""

from __future__ import annotations

from typing import Any

from tickwheel.model import State
from tickwheel.stores.checks import check_purge, check_queue_defaults
from tickwheel.stores.codec import state_code
from tickwheel.stores.operations import PURGE_BATCH
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.stores.redis.queue_settings import RedisQueueSettings


class RedisPurging(RedisQueueSettings):
    """The bulk calls of `RedisStore` on one queue."""

    async def purge(self, queue: str, state: State) -> int:
        self._open()
        check_purge(queue, state)
        code = str(state_code(State(state)))
        shards = self._shards
        cursors = dict.fromkeys(range(shards.count), "0")
        total = 0
        while cursors:
            todo = list(cursors)
            calls = [
                shards.call("purge_queue", s, (queue, code, cursors[s], PURGE_BATCH)) for s in todo
            ]
            replies: list[Any] = await shards.run_many(calls)
            for shard, (deleted, cursor) in zip(todo, replies, strict=True):
                total += int(deleted)
                if cursor:
                    cursors[shard] = cursor.decode()
                else:
                    del cursors[shard]
        return total

    async def set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        """Set or delete the queue's defaults field alone (settings_field.lua), then wake its
        waiters."""
        self._open()
        kept = check_queue_defaults(queue, defaults)
        had = await self._queue_settings.set_defaults(queue, kept)
        await self._wake_queue(queue)
        return had
