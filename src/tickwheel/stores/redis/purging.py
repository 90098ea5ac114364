"""A queue's bulk calls on a `RedisStore`: purge one state, set the queue's defaults.

A purge runs ``lua/purge_queue.lua`` on each shard in turn, `PURGE_BATCH` entries read a call,
until the shard says it holds no more. One call at a time, each a request of its own: Redis
runs a client's pipelined scripts back to back, and serves sixteen connections' scripts one
after another before a command that came after them, so either way another client would wait
for sixteen scripts; this way it waits for one at most (bench/purge.py).
"""

from __future__ import annotations

from typing import Any

from tickwheel.model import State
from tickwheel.stores.codec import state_code
from tickwheel.stores.operations import PURGE_BATCH
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.stores.redis.queue_settings import RedisQueueSettings


class RedisPurging(RedisQueueSettings):
    """The bulk calls of `RedisStore` on one queue."""

    async def _purge(self, queue: str, state: State) -> int:
        await self._ready()
        code = str(state_code(State(state)))
        total = 0
        for shard in range(self._shards.count):
            total += await self._purge_shard(shard, queue, code)
        return total

    async def _purge_shard(self, shard: int, queue: str, code: str) -> int:
        """Purge one shard a call at a time."""
        total, cursor = 0, "0"
        while True:
            name, keys, args = self._shards.call(
                "purge_queue", shard, (queue, code, cursor, PURGE_BATCH)
            )
            reply: Any = await self._scripts.run(name, keys, args)
            deleted, after = reply
            total += int(deleted)
            if not after:
                return total
            cursor = after.decode()

    async def _set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        """Set or delete the queue's defaults field alone (settings_field.lua), then wake its
        waiters."""
        await self._ready()
        had = await self._queue_settings.set_defaults(queue, defaults)
        await self._wake_queue(queue)
        return had
