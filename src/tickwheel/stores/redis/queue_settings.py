"""What an operator sets in Redis: queue settings and host limits, each hash with a version.

::

    <p>:queue-settings        hash    paused:<queue> → "1" while the queue is paused
                                      limit:<queue>  → `codec.encode_limit` JSON
                                      defaults:<queue> → `encode_defaults_text` JSON
    <p>:limits                hash    callback host → `codec.encode_limit` JSON
    {<p>:queue-settings}:v    string  a count of the writes to the queue settings
    {<p>:queue-settings}:names  zset  the queues with settings, score 0: in name order, for
                                      a page of the queue table (``queue_table.py``)
    {<p>:queue-settings}:built  string  set once ``names`` was built from the hash (a store
                                      written before it existed: by the first page read)
    {<p>:limits}:v            string  a count of the writes to the host limits

Pausing, resuming, setting or removing a limit is then one field of one hash, written with no
decode (``lua/settings_field.lua``): two operators changing the two parts at once both keep
their change. Replacing both parts is ``lua/queue_set.lua``. One JSON record per queue would
need a script that decodes and re-encodes it, and Lua's cjson writes 14 significant digits, so
a rate of one a day would come back below the least rate `Limit` accepts.

A version key's hash tag is its hash's whole name, so on a Cluster it sits in the hash's slot
and each script counts a write atomically with it. Workers read the two versions each second
and a hash only when its version moved (`Store.settings_versions`).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.codec import decode_limit, encode_limit
from tickwheel.stores.queue_defaults import (
    QueueDefaults,
    decode_defaults_text,
    encode_defaults_text,
)
from tickwheel.stores.redis.keys import queue_settings_key
from tickwheel.stores.redis.scripts import Client, unavailable
from tickwheel.stores.redis.store_base import RedisStoreBase

_PAUSED = "paused:"
_LIMIT = "limit:"
_DEFAULTS = "defaults:"
REFUSED = -1  # settings_field.lua's answer when a new field would pass the cap


def _source(name: str) -> str:
    return (resources.files("tickwheel.stores.redis") / "lua" / f"{name}.lua").read_text()


def version_key(hash_key: str) -> str:
    """The version of the hash `hash_key`, in its Cluster slot (see the module's docstring)."""
    return "{%s}:v" % hash_key  # noqa: UP031 -- braces would need doubling


class SettingsHash:
    """One settings hash, its version and its index of queue names; every write is one script
    that counts it and keeps the index."""

    def __init__(self, client: Client, key: str) -> None:
        self._client = client
        self.key = key
        self.version_key = version_key(key)
        self.names_key = "{%s}:names" % key  # noqa: UP031 -- braces would need doubling
        self._field = _source("settings_field")

    async def read(self) -> dict[str, bytes]:
        """Every field, by name."""
        with unavailable("HGETALL"):
            stored: Any = await self._client.hgetall(self.key)
        return {field.decode(): value for field, value in stored.items()}

    async def write(self, field: str, value: str, cap: int = 0) -> int:
        """Set `field` to `value` ('' deletes it); 1 if it was there, 0 if not, `REFUSED` if
        it was not and the hash holds `cap` fields (0: no cap)."""
        # EVAL, not EVALSHA: a rare call, and a cold Cluster client loses connections when
        # many calls load one script at once after NOSCRIPT
        with unavailable("settings_field"):
            had: Any = await self._client.eval(
                self._field, 3, self.key, self.version_key, self.names_key, field, value, cap
            )
        return int(had)


class QueueSettingsHash(SettingsHash):
    """The queue settings of the store on `prefix`."""

    def __init__(self, client: Client, prefix: str) -> None:
        super().__init__(client, queue_settings_key(prefix))
        self._built_key = "{%s}:built" % self.key  # noqa: UP031 -- braces would need doubling
        self._replace = _source("queue_set")
        self._page = _source("queue_settings_page")

    async def settings(self) -> dict[str, QueueSettings]:
        """Every queue that has settings, by name."""
        paused: set[str] = set()
        limits: dict[str, Limit] = {}
        defaults: dict[str, QueueDefaults] = {}
        for field, value in (await self.read()).items():
            if field.startswith(_PAUSED):
                paused.add(field.removeprefix(_PAUSED))
            elif field.startswith(_LIMIT):
                limits[field.removeprefix(_LIMIT)] = decode_limit(value)
            elif field.startswith(_DEFAULTS):
                defaults[field.removeprefix(_DEFAULTS)] = decode_defaults_text(value)
        return {
            queue: QueueSettings(
                paused=queue in paused, limit=limits.get(queue), defaults=defaults.get(queue)
            )
            for queue in paused | limits.keys() | defaults.keys()
        }

    async def of(self, queue: str) -> QueueSettings:
        """`queue`'s settings alone, its three fields read by one HMGET."""
        fields = (_PAUSED + queue, _LIMIT + queue, _DEFAULTS + queue)
        with unavailable("HMGET"):
            found: Any = await self._client.hmget(self.key, fields)
        return _settings(*found)

    async def page(self, limit: int, cursor: str | None) -> dict[str, QueueSettings]:
        """Up to `limit` queues with settings after `cursor` (from the first when None), by
        name, read through the index of their names (``lua/queue_settings_page.lua``)."""
        keys = (self.key, self.names_key, self._built_key)
        # EVAL, not EVALSHA: a rare call (see `write`)
        with unavailable("queue_settings_page"):
            reply: Any = await self._client.eval(
                self._page, 3, *keys, "" if cursor is None else cursor, limit
            )
        return {
            reply[n].decode(): _settings(*reply[n + 1 : n + 4]) for n in range(0, len(reply), 4)
        }

    async def replace(self, queue: str, settings: QueueSettings) -> None:
        """Store every part of `queue`'s settings at once; the defaults delete them."""
        limit = "" if settings.limit is None else encode_limit(settings.limit)
        paused = "1" if settings.paused else ""
        given = settings.defaults
        defaults = "" if given is None or given.empty else encode_defaults_text(given)
        keys = (self.key, self.version_key, self.names_key)
        with unavailable("queue_set"):
            await self._client.eval(self._replace, 3, *keys, queue, paused, limit, defaults)

    async def pause(self, queue: str, paused: bool) -> bool:
        """Set or clear `queue`'s pause; return whether that changed it."""
        had = await self.write(_PAUSED + queue, "1" if paused else "")
        return had == (0 if paused else 1)

    async def set_limit(self, queue: str, limit: Limit | None) -> bool:
        """Set (None: remove) `queue`'s limit; return whether it had one."""
        return await self.write(_LIMIT + queue, "" if limit is None else encode_limit(limit)) == 1

    async def set_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        """Set (None: remove) `queue`'s defaults; return whether it had some."""
        value = "" if defaults is None else encode_defaults_text(defaults)
        return await self.write(_DEFAULTS + queue, value) == 1


def _settings(paused: bytes | None, limit: bytes | None, defaults: bytes | None) -> QueueSettings:
    """A queue's settings from its three fields (None: not set)."""
    return QueueSettings(
        paused=paused is not None,
        limit=None if limit is None else decode_limit(limit),
        defaults=None if defaults is None else decode_defaults_text(defaults),
    )


async def read_versions(client: Client, keys: tuple[str, str]) -> list[int]:
    """The versions at `keys`, in one pipeline (0 for a hash never written)."""
    with unavailable("GET"):
        async with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.get(key)
            replies: Any = await pipe.execute()
    return [int(reply or 0) for reply in replies]


class RedisQueueSettings(RedisStoreBase):
    """The queue-settings calls of `RedisStore`."""

    _queue_settings: QueueSettingsHash

    async def queue_settings(self) -> dict[str, QueueSettings]:
        self._open()
        return await self._queue_settings.settings()

    async def _set_queue(self, queue: str, settings: QueueSettings) -> None:
        """Write (or with the defaults delete) the queue's settings fields in one script, then
        wake the queue's waiters in every process through the wake channel."""
        self._open()
        await self._queue_settings.replace(queue, settings)
        await self._wake_queue(queue)

    async def _pause_queue(self, queue: str, paused: bool) -> bool:
        """Set or clear the queue's pause field alone (settings_field.lua), then wake its
        waiters."""
        self._open()
        changed = await self._queue_settings.pause(queue, paused)
        await self._wake_queue(queue)
        return changed

    async def _set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        """Set or delete the queue's limit field alone (settings_field.lua), then wake its
        waiters."""
        self._open()
        had = await self._queue_settings.set_limit(queue, limit)
        await self._wake_queue(queue)
        return had
