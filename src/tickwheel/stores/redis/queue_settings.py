"""Queue settings in Redis: one hash, each part of a queue's settings in a field of its own.

::

    <p>:queue-settings   hash   paused:<queue> → "1" while the queue is paused
                                limit:<queue>  → `codec.encode_limit` JSON

Pausing, resuming, setting or removing a limit is then one HSET or HDEL of one field, atomic
with no read: two operators changing the two parts at once both keep their change. Replacing
both parts is one script (``lua/queue_set.lua``). One JSON record per queue would need a script
that decodes and re-encodes it, and Lua's cjson writes 14 significant digits, so a rate of one
a day would come back below the least rate `Limit` accepts.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.codec import decode_limit, encode_limit
from tickwheel.stores.redis.keys import queue_settings_key
from tickwheel.stores.redis.scripts import Client, unavailable

_PAUSED = "paused:"
_LIMIT = "limit:"


def _source() -> str:
    return (resources.files("tickwheel.stores.redis") / "lua" / "queue_set.lua").read_text()


class QueueSettingsHash:
    """The queue settings of the store on `prefix`; every call is one Redis command."""

    def __init__(self, client: Client, prefix: str) -> None:
        self._client = client
        self._key = queue_settings_key(prefix)
        self._replace = _source()

    async def read(self) -> dict[str, QueueSettings]:
        """Every queue that has settings, by name."""
        with unavailable("HGETALL"):
            stored: Any = await self._client.hgetall(self._key)
        paused: set[str] = set()
        limits: dict[str, Limit] = {}
        for raw_field, value in stored.items():
            field = raw_field.decode()
            if field.startswith(_PAUSED):
                paused.add(field.removeprefix(_PAUSED))
            elif field.startswith(_LIMIT):
                limits[field.removeprefix(_LIMIT)] = decode_limit(value)
        return {
            queue: QueueSettings(paused=queue in paused, limit=limits.get(queue))
            for queue in paused | limits.keys()
        }

    async def replace(self, queue: str, settings: QueueSettings) -> None:
        """Store both parts of `queue`'s settings at once; the defaults delete them."""
        limit = "" if settings.limit is None else encode_limit(settings.limit)
        paused = "1" if settings.paused else ""
        # EVAL, not EVALSHA: a rare call, and a cold Cluster client loses connections when
        # many calls load one script at once after NOSCRIPT
        with unavailable("queue_set"):
            await self._client.eval(self._replace, 1, self._key, queue, paused, limit)

    async def pause(self, queue: str, paused: bool) -> bool:
        """Set or clear `queue`'s pause; return whether that changed it."""
        field = _PAUSED + queue
        with unavailable("HSET" if paused else "HDEL"):
            changed: Any = await (
                self._client.hset(self._key, field, "1")
                if paused
                else self._client.hdel(self._key, field)
            )
        return bool(changed)

    async def set_limit(self, queue: str, limit: Limit | None) -> bool:
        """Set (None: remove) `queue`'s limit; return whether it had one."""
        field = _LIMIT + queue
        if limit is None:
            with unavailable("HDEL"):
                deleted: Any = await self._client.hdel(self._key, field)
            return bool(deleted)
        with unavailable("HSET"):
            added: Any = await self._client.hset(self._key, field, encode_limit(limit))
        return not added
