"""Host limits in Redis: a hash of every host's limit, and an index of hosts to page through.

::

    <p>:limits              hash   callback host → `codec.encode_limit` JSON
    {<p>:limits}:hosts      zset   callback host, score 0: the hosts in byte order
    {<p>:limits}:v          string a count of the writes to the hash (`queue_settings.py`)

The hash is what workers read whole (`RedisStore.limits`); the index lets ``GET /v1/limits``
read one page by ``ZRANGEBYLEX`` instead of 20,000 rows. Its hash tag is the hash's whole
name, so the three keys sit in one Cluster slot and one script (``lua/host_limit_set.lua``)
writes them together. A store written before the index existed gets it built by the first page read
(``lua/host_limit_page.lua``).
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from tickwheel.errors import CapReached
from tickwheel.stores.base import Limit, LimitPage
from tickwheel.stores.codec import decode_limit, encode_limit
from tickwheel.stores.redis.keys import limits_key
from tickwheel.stores.redis.queue_settings import REFUSED, version_key
from tickwheel.stores.redis.scripts import Client, unavailable
from tickwheel.stores.redis.shared_grants import RedisGrants
from tickwheel.stores.redis.store_base import RedisStoreBase


def _source(name: str) -> str:
    return (resources.files("tickwheel.stores.redis") / "lua" / name).read_text()


class HostLimits:
    """The host limits of the store on `prefix`: set, remove, read whole or a page at a time."""

    def __init__(self, client: Client, prefix: str) -> None:
        self._client = client
        self._keys = (limits_key(prefix), "{%s}:hosts" % limits_key(prefix))  # noqa: UP031
        self.version_key = version_key(limits_key(prefix))
        self._set = _source("host_limit_set.lua")
        self._page = _source("host_limit_page.lua")

    async def read(self) -> dict[str, Limit]:
        """Every host's limit (what a worker reads)."""
        with unavailable("HGETALL"):
            stored: Any = await self._client.hgetall(self._keys[0])
        return {host.decode(): decode_limit(text) for host, text in stored.items()}

    async def put(self, host: str, limit: Limit | None, cap: int = 0) -> bool:
        """Set (None: remove) `host`'s limit; return whether it had one. Raises `CapReached`
        for a new host when `cap` are stored (0: no cap)."""
        record = "" if limit is None else encode_limit(limit)
        keys = (*self._keys, self.version_key)
        # EVAL, not EVALSHA: a rare call (see queue_settings.py)
        with unavailable("host_limit_set"):
            had: Any = await self._client.eval(self._set, 3, *keys, host, record, cap)
        if had == REFUSED:
            raise CapReached("limits", cap, "host")
        return bool(had)

    async def page(self, limit: int, cursor: str | None) -> list[tuple[str, Limit]]:
        """Up to `limit` hosts after `cursor` (from the first when None), by host."""
        with unavailable("host_limit_page"):
            reply: Any = await self._client.eval(
                self._page, 2, *self._keys, "" if cursor is None else cursor, limit
            )
        return [(reply[n].decode(), decode_limit(reply[n + 1])) for n in range(0, len(reply), 2)]


class RedisHostLimits(RedisStoreBase):
    """The host-limit calls of `RedisStore`."""

    _host_limits: HostLimits

    async def limits(self) -> dict[str, Limit]:
        self._open()
        return await self._host_limits.read()

    async def _list_limits(self, limit: int, cursor: str | None) -> LimitPage:
        """One page read through the index of hosts (`host_limits.py`), not the whole hash."""
        self._open()
        found = await self._host_limits.page(limit + 1, cursor)
        if len(found) > limit:
            return LimitPage(found[:limit], found[limit - 1][0])
        return LimitPage(found, None)

    async def _set_limit(self, host: str, limit: Limit) -> None:
        self._open()
        await self._host_limits.put(host, limit, self.settings.max_limits)

    async def delete_limit(self, host: str) -> bool:
        self._open()
        return await self._host_limits.put(host, None)

    def limit_grants(self) -> RedisGrants:
        """Return the limit grants every worker of this store shares (`RedisGrants`)."""
        return RedisGrants(self._client, self.prefix)
