"""Reading and changing one timer of a `RedisStore` by its id: get, cancel, reschedule, pause,
resume and replay, each one script on the timer's shard."""

from __future__ import annotations

from tickwheel.model import Timer, occurrence_of
from tickwheel.stores.redis.record import base36
from tickwheel.stores.redis.store_base import RedisStoreBase


class RedisChanging(RedisStoreBase):
    """The calls of `RedisStore` on one timer by its id."""

    async def get(self, timer_id: str) -> Timer | None:
        await self._ready()
        now = await self._now()
        (raw,) = await self._shards.run("get", timer_id, (now, timer_id))
        return None if raw == 0 else self._records.unpack(timer_id, raw)

    async def cancel(self, timer_id: str) -> bool:
        await self._ready()
        return await self._shards.step("cancel", timer_id)

    async def _reschedule(self, timer_id: str, due_ms: int) -> bool:
        await self._ready()
        now = await self._now()
        return await self._shards.step(
            "reschedule", timer_id, base36(due_ms), now, self._next_seq()
        )

    async def replay(self, timer_id: str) -> bool:
        await self._ready()
        now = await self._now()
        return await self._shards.step("replay", timer_id, now, self._next_seq(), base36(now))

    async def pause(self, timer_id: str) -> bool:
        """Take a scheduled timer out of its queue, in one pause.lua call."""
        await self._ready()
        if occurrence_of(timer_id) is not None:
            return False  # its schedule owns it
        now = await self._now()
        return await self._shards.step("pause", timer_id, now)

    async def resume(self, timer_id: str) -> bool:
        """Put a paused timer back in its queue at its due time, in one resume.lua call."""
        await self._ready()
        now = await self._now()
        return await self._shards.step("resume", timer_id, now, self._next_seq())
