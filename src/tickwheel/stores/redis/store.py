"""`RedisStore`: timers in Redis or Redis Cluster, in virtual shards holding a two-level wheel.

A timer lives in the shard its id hashes to (`keys.py`); each state transition is one Lua
script on that shard (``lua/*.lua``), so a timer is never half written. Calls that touch several
shards (claim, list, stats, add_many) go out as one pipeline, which the Cluster client splits by
node and sends concurrently. The class is assembled from one part per concept, each a
subclass of `store_base.RedisStoreBase` (the client, shards, clock and wake channel): adding
(`adding.py`), one timer by id (`changing.py`), claiming and settling (`leasing.py`, with the
claim itself in `claiming.py`), schedules (`stored_schedules.py`, each in its shard beside its
occurrences), queue settings (`queue_settings.py`; `purging.py` adds the bulk calls on a
queue), host limits (`host_limits.py`), listing and counting (`listing.py`), and the queue
table a page at a time (`queue_table.py`); `record.py` writes and reads the records. This
module constructs the store and holds the calls that span parts.
"""

from __future__ import annotations

from collections.abc import Callable

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.driver_info import DriverInfo

from tickwheel.errors import InvalidArgument
from tickwheel.model import State
from tickwheel.stores.base import QueueInfo, QueueSettings, StoreSettings
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.in_doubt import InDoubt
from tickwheel.stores.redaction import redact
from tickwheel.stores.redis import adding, listing
from tickwheel.stores.redis.adding import RedisAdding
from tickwheel.stores.redis.attempt_history import RedisAttemptHistory
from tickwheel.stores.redis.changing import RedisChanging
from tickwheel.stores.redis.claiming import Claimer
from tickwheel.stores.redis.clock import ServerClock
from tickwheel.stores.redis.durability import Replicated, split_url
from tickwheel.stores.redis.host_limits import HostLimits, RedisHostLimits
from tickwheel.stores.redis.keys import DEFAULT_PREFIX, check_layout
from tickwheel.stores.redis.leasing import NEXT_DUE_BATCH, RedisLeasing
from tickwheel.stores.redis.listen import Listener
from tickwheel.stores.redis.listing import RedisListing
from tickwheel.stores.redis.purging import RedisPurging
from tickwheel.stores.redis.queue_settings import QueueSettingsHash, read_versions
from tickwheel.stores.redis.queue_table import RedisQueueTable
from tickwheel.stores.redis.record import RecordCodec, SeqSource
from tickwheel.stores.redis.scripts import Client, Scripts
from tickwheel.stores.redis.shards import Shards
from tickwheel.stores.redis.stored_schedules import RedisSchedules, Schedules

_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


class RedisStore(
    RedisAdding,
    RedisChanging,
    RedisLeasing,
    RedisSchedules,
    RedisPurging,
    RedisHostLimits,
    RedisListing,
    RedisAttemptHistory,
    RedisQueueTable,
):
    """Timers in Redis (standalone or Cluster), shared by any number of workers.

    Args:
        client: a ``redis.asyncio`` `Redis` or `RedisCluster` with ``decode_responses=False``.
            Give it socket timeouts: a Redis that stops answering then raises
            `StoreUnavailable` instead of hanging.
        prefix: names this store's keys; stores with different prefixes share nothing.
        shards: the number of virtual shards, which every store on one prefix shares: None takes
            the prefix's recorded count, or for a new prefix 1 on a standalone server and 16 on a
            Cluster (`layout.py`); another count than the recorded one is refused.
        clock: epoch ms for tests; None follows the Redis server's clock (``TIME``), re-measured
            every `clock_refresh_s`.
        durability: `Replicated` makes a caller's creates and changes wait for a replica
            (`durability.py`); give the client a socket timeout above its `wait_ms`.
    """

    def __init__(
        self,
        client: Client,
        settings: StoreSettings | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        shards: int | None = None,
        clock: Callable[[], int] | None = None,
        clock_refresh_s: float = 60.0,
        owns_client: bool = False,
        durability: Replicated | None = None,
    ) -> None:
        check_layout(prefix, shards)
        self.settings = settings or StoreSettings()
        self.prefix = prefix
        self.durability = durability
        self._client = client
        self._owns_client = owns_client
        self._scripts = Scripts(client, durability)
        self._shards = Shards(self._scripts, prefix, shards)
        self._records = RecordCodec()
        self._seq = SeqSource()
        self._claimer = Claimer(self._shards, self._records, self._seq)
        self._in_doubt = InDoubt()
        self._server_clock: ServerClock | None = None
        self._clock: Callable[[], int]
        if clock is None:
            self._server_clock = self._clock = ServerClock(clock_refresh_s)
        else:
            self._clock = clock
        self._schedules = Schedules(
            self._shards, self._records, self._seq, self.settings, self._now
        )
        self._listener = Listener(client, f"{prefix}:wake")
        self._queue_settings = QueueSettingsHash(client, prefix)
        self._host_limits = HostLimits(client, prefix)
        self._adding = Coalescer(self._add_new, adding.ADD_CHUNK)
        self._replacing = Coalescer(self._add_replacing, adding.ADD_CHUNK)
        self._next_dues = Coalescer(self._next_due_batch, NEXT_DUE_BATCH)
        self._closed = False
        self._layout_read = False

    @classmethod
    def from_url(
        cls,
        url: str,
        settings: StoreSettings | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        shards: int | None = None,
        clock: Callable[[], int] | None = None,
        clock_refresh_s: float = 60.0,
        timeout_s: float = 5.0,
        max_connections: int = 64,
    ) -> RedisStore:
        """Open a store on ``redis://``, ``rediss://``, ``redis+cluster://`` or ``rediss+cluster://``.

        `timeout_s` bounds connecting and every reply. A standalone client does not retry
        after a connection error (the script may have run before the connection dropped): the
        caller gets `StoreUnavailable` and decides. The Cluster client keeps redis-py's retries,
        which follow a failover; a retried ack may then report `LeaseLost` for its own ack.
        An ack, retry or kill the caller sends again after `StoreUnavailable` reports success
        for its own earlier landing, not `LeaseLost`; a claim sent again returns its leases.
        A standalone client opens at most `max_connections`; callers beyond wait for one.
        ``?durability=replicated&wait_ms=N`` in the query waits for a replica after each
        create or change (`durability.py`); a reply may then take `wait_ms` beyond `timeout_s`.
        """
        check_layout(prefix, shards)  # before a client exists to be closed
        url, durability = split_url(url)
        if durability is not None:
            timeout_s += durability.wait_ms / 1000
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in {"redis", "rediss", *_CLUSTER_SCHEMES}:
            raise InvalidArgument(
                "url", f"must start with redis:// or redis+cluster://: {redact(url)!r}"
            )
        client: Client
        # named once: without it redis-py reads its own package metadata again for every new
        # connection (0.8 ms each), and a pool filling up in a burst stalls the event loop
        driver = DriverInfo()
        if scheme in _CLUSTER_SCHEMES:
            client = RedisCluster.from_url(
                f"{_CLUSTER_SCHEMES[scheme]}://{rest}",
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
                driver_info=driver,
            )
        else:
            # a blocking pool: a burst of callers waits for a connection (up to timeout_s)
            # where redis-py's default pool raises "Too many connections"
            client = Redis.from_pool(
                BlockingConnectionPool.from_url(
                    url,
                    max_connections=max_connections,
                    timeout=timeout_s,
                    socket_timeout=timeout_s,
                    socket_connect_timeout=timeout_s,
                    retry=Retry(NoBackoff(), 0),
                    driver_info=driver,
                )
            )
        return cls(
            client,
            settings,
            prefix=prefix,
            shards=shards,
            clock=clock,
            clock_refresh_s=clock_refresh_s,
            owns_client=True,
            durability=durability,
        )

    async def queue_infos(self) -> list[QueueInfo]:
        """Counts per queue from every shard's counts hash, and the stored settings."""
        await self._ready()
        now = await self._now()
        await self._claimer.purge_all(now)
        found = await listing.count(self._shards, now)
        settings = await self.queue_settings()
        held = {queue for queue, counts in found.per_queue.items() if any(counts.values())}
        return [
            QueueInfo(
                queue,
                found.per_queue.get(queue) or dict.fromkeys(State, 0),
                found.earliest.get(queue),
                settings.get(queue, QueueSettings()),
            )
            for queue in sorted(held | settings.keys())
        ]

    async def settings_versions(self) -> tuple[int, int]:
        """Both versions in one pipeline (`queue_settings.py`)."""
        await self._ready()
        keys = (self._queue_settings.version_key, self._host_limits.version_key)
        queues, limits = await read_versions(self._client, keys)
        return queues, limits
