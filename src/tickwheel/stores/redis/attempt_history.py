"""The attempt history of a `RedisStore`: a list per timer (`{p:s}:a:<id>`), pushed and trimmed
by the script of the settle it records, deleted with the timer, lapsing after the retention."""

from __future__ import annotations

from tickwheel.stores.attempt_record import Attempt, kept_attempts
from tickwheel.stores.redis.store_base import RedisStoreBase


class RedisAttemptHistory(RedisStoreBase):
    """Reads a timer with its attempts in one script call (`attempts.lua`)."""

    async def attempts(self, timer_id: str) -> list[Attempt]:
        await self._ready()
        settings = self.settings
        most = settings.attempt_history
        if most == 0:
            return []
        now = await self._now()
        raw, *recorded = await self._shards.run("attempts", timer_id, (now, timer_id, most))
        if raw == 0:
            return []
        timer = self._records.unpack(timer_id, raw)
        history = [Attempt.from_json(text) for text in recorded]
        return kept_attempts(history, timer, now, settings.attempt_retention_ms, most)
