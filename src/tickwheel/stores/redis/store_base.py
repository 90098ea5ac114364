"""What every part of `RedisStore` stands on: its client, shards, clock and wake channel.

`RedisStore.__init__` (``store.py``) sets the attributes declared here; each part of the store
(`adding`, `changing`, `leasing`, `stored_schedules`, `queue_settings`, `host_limits`, `listing`)
subclasses `RedisStoreBase` and adds the calls of its concept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tickwheel.errors import Closed
from tickwheel.stores.base import StoreSettings
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.contract import StoreContract
from tickwheel.stores.in_doubt import InDoubt
from tickwheel.stores.redis.claiming import Claimer
from tickwheel.stores.redis.clock import ServerClock
from tickwheel.stores.redis.durability import Replicated, count_replicas
from tickwheel.stores.redis.keys import ShardKeys
from tickwheel.stores.redis.layout import recorded_shards
from tickwheel.stores.redis.listen import Listener
from tickwheel.stores.redis.record import RecordCodec, SeqSource
from tickwheel.stores.redis.scripts import Client, Scripts, unavailable
from tickwheel.stores.redis.shards import Shards
from tickwheel.stores.wake import until


class RedisStoreBase(StoreContract):
    """What every part of `RedisStore` shares: the client, the shards, the clock and the wake
    channel; the base of each part of the store."""

    settings: StoreSettings
    prefix: str
    durability: Replicated | None
    _client: Client
    _owns_client: bool
    _scripts: Scripts
    _shards: Shards
    _records: RecordCodec
    _seq: SeqSource
    _claimer: Claimer
    _next_dues: Coalescer[str, int | None]
    _in_doubt: InDoubt
    _server_clock: ServerClock | None
    _clock: Callable[[], int]
    _listener: Listener
    _closed: bool
    _layout_read: bool

    @property
    def client(self) -> Client:
        return self._client

    @property
    def shards(self) -> int:
        """The prefix's shard count: the one asked for, or once a call has read it, the one
        recorded in Redis (`layout.py`).

        Raises:
            RuntimeError: none was asked for and no call has read the record yet.
        """
        if self._shards.asked is None and not self._layout_read:
            raise RuntimeError("the shard count is read from Redis by the store's first call")
        return self._shards.count

    def now_ms(self) -> int:
        return self._clock()

    def shard_keys(self, shard: int) -> ShardKeys:
        """The keys of one shard (for tools and tests)."""
        return self._shards.keys(shard)

    async def replicas(self) -> int:
        """Return how many replicas the master has (on a Cluster, the fewest of any master)."""
        self._open()
        with unavailable("INFO"):
            return await count_replicas(self._client)

    async def _wait(self, queue: str, timeout_s: float) -> bool:
        """Wait for a wake message naming `queue`, or `timeout_s`.

        Scripts publish one when a change makes a timer the earliest of its queue in its shard,
        whichever process made it. The first call subscribes, and returns True once subscribed
        (as after a reconnect): a change made before the subscription was not heard.
        """
        self._open()
        with self._listener.wakeups.waiting(queue) as event:
            self._listener.start()
            return await until(event, timeout_s)

    async def sync_clock(self) -> None:
        """Measure the server clock's offset now (done lazily and every `clock_refresh_s`), and
        read the prefix's layout if no call has yet."""
        await self._ready()
        if self._server_clock is not None:
            with unavailable("TIME"):
                await self._server_clock.sync(self._server_time)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._listener.close()
        await self._scripts.close()
        if self._owns_client:
            await self._client.aclose()

    async def _wake_queue(self, queue: str) -> None:
        with unavailable("PUBLISH"):
            await self._client.publish(f"{self.prefix}:wake", queue)

    def _next_seq(self) -> str:
        return SeqSource.format(self._seq.take())

    async def _now(self) -> int:
        if self._server_clock is not None and self._server_clock.stale():
            await self.sync_clock()
        return self._clock()

    async def _server_time(self) -> tuple[int, int]:
        reply: Any = await self._client.time()
        if isinstance(reply, dict):  # the Cluster client may answer per node
            reply = next(iter(reply.values()))
        return int(reply[0]), int(reply[1])

    def _open(self) -> None:
        if self._closed:
            raise Closed("store is closed")

    async def _ready(self) -> None:
        """`_open`, and the layout read before the first call that touches the shards."""
        self._open()
        if not self._layout_read:
            self._shards.learn(await recorded_shards(self._client, self.prefix, self._shards.asked))
            self._layout_read = True
