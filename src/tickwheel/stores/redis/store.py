"""`RedisStore`: timers in Redis or Redis Cluster, in virtual shards holding a two-level wheel.

A timer lives in the shard its id hashes to (`keys.py`); each state transition is one Lua
script on that shard (``lua/*.lua``), so a timer is never half written. Calls that touch several
shards (claim, list, stats, add_many) go out as one pipeline, which the Cluster client splits by
node and sends concurrently. The store's class holds the one-timer transitions; adding batches
(`adding.py`), claiming (`claiming.py`), and listing and counting (`listing.py`) each have a
module, and `record.py` writes and reads the records. Durable schedules live in their
shard beside their occurrences (`schedules.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from tickwheel.errors import (
    Closed,
    InvalidArgument,
    LeaseLost,
    NotReplicated,
    StoreUnavailable,
    TimerExists,
)
from tickwheel.model import State, Timer, occurrence_of, truncate_error
from tickwheel.schedule import Schedule, ScheduleState
from tickwheel.stores.base import (
    ANY_QUEUE,
    Deferral,
    DueQueues,
    Lease,
    Limit,
    LimitPage,
    Page,
    QueueInfo,
    QueueSettings,
    SchedulePage,
    Stats,
    StoreSettings,
)
from tickwheel.stores.checks import (
    check_claim,
    check_due,
    check_due_queues,
    check_host,
    check_lease,
    check_list,
    check_list_filters,
    check_queue_limit,
    check_queue_pause,
    check_queue_settings,
    check_timeout,
)
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.redis import adding, listing
from tickwheel.stores.redis.claiming import Claimer
from tickwheel.stores.redis.clock import ServerClock
from tickwheel.stores.redis.durability import Replicated, count_replicas, split_url
from tickwheel.stores.redis.host_limits import HostLimits
from tickwheel.stores.redis.keys import (
    DEFAULT_PREFIX,
    DEFAULT_SHARDS,
    ShardKeys,
    check_layout,
)
from tickwheel.stores.redis.limits import RedisGrants
from tickwheel.stores.redis.listen import Listener
from tickwheel.stores.redis.queue_settings import (
    QueueSettingsHash,
    read_versions,
)
from tickwheel.stores.redis.record import RecordCodec, SeqSource, base36
from tickwheel.stores.redis.resends import InDoubt
from tickwheel.stores.redis.schedules import Schedules
from tickwheel.stores.redis.scripts import Arg, Client, Scripts, unavailable
from tickwheel.stores.redis.shards import Shards
from tickwheel.stores.urls import redact
from tickwheel.stores.wake import until

ACK_BATCH = 500  # leases per ack.lua call
MAX_MS = 2**53  # Lua and sorted-set scores are doubles: integers are exact below this
_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


class RedisStore:
    """Timers in Redis (standalone or Cluster), shared by any number of workers.

    Args:
        client: a ``redis.asyncio`` `Redis` or `RedisCluster` with ``decode_responses=False``.
            Give it socket timeouts: a Redis that stops answering then raises
            `StoreUnavailable` instead of hanging.
        prefix: names this store's keys; stores with different prefixes share nothing.
        shards: the number of virtual shards. Every store on one prefix must use the same.
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
        shards: int = DEFAULT_SHARDS,
        clock: Callable[[], int] | None = None,
        clock_refresh_s: float = 60.0,
        owns_client: bool = False,
        durability: Replicated | None = None,
    ) -> None:
        check_layout(prefix, shards)
        self.settings = settings or StoreSettings()
        self.prefix = prefix
        self.shards = shards
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
        self._adding = Coalescer(self._add_checked, adding.ADD_CHUNK)
        self._replacing = Coalescer(self._replace_checked, adding.ADD_CHUNK)
        self._closed = False

    @classmethod
    def from_url(
        cls,
        url: str,
        settings: StoreSettings | None = None,
        *,
        prefix: str = DEFAULT_PREFIX,
        shards: int = DEFAULT_SHARDS,
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
        if scheme in _CLUSTER_SCHEMES:
            client = RedisCluster.from_url(
                f"{_CLUSTER_SCHEMES[scheme]}://{rest}",
                socket_timeout=timeout_s,
                socket_connect_timeout=timeout_s,
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

    @property
    def client(self) -> Client:
        return self._client

    def now_ms(self) -> int:
        return self._clock()

    def shard_keys(self, shard: int) -> ShardKeys:
        """The keys of one shard (for tools and tests)."""
        return self._shards.keys(shard)

    async def add(self, timer: Timer, *, replace: bool = False) -> Timer:
        """Add one timer; concurrent adds share a round trip (group commit)."""
        self._open()
        check_due(timer.due_ms, self._clock(), self.settings)
        try:
            return await (self._replacing if replace else self._adding).submit(timer)
        except NotReplicated as error:  # its own id: others' timers may share the round trip
            raise error.of((timer.id,)) from None

    async def add_many(self, timers: Sequence[Timer], *, replace: bool = False) -> list[Timer]:
        """Add many timers in few round trips; return them as stored, in order.

        Each timer is added atomically, as by `add`, the batch as a whole is not: after a
        `StoreUnavailable` some may be stored. An id held by a timer with another spec raises
        `TimerExists` once the rest are stored.
        """
        stored = []
        try:
            added = await self._add(timers, replace)
        except NotReplicated as error:
            raise error.of(tuple(timer.id for timer in timers)) from None
        for result in added:
            if isinstance(result, TimerExists):
                raise result
            stored.append(result)
        return stored

    async def replicas(self) -> int:
        """Return how many replicas the master has (on a Cluster, the fewest of any master)."""
        self._open()
        with unavailable("INFO"):
            return await count_replicas(self._client)

    async def get(self, timer_id: str) -> Timer | None:
        self._open()
        now = await self._now()
        (raw,) = await self._shards.run("get", timer_id, (now, timer_id))
        return None if raw == 0 else self._records.unpack(timer_id, raw)

    async def cancel(self, timer_id: str) -> bool:
        self._open()
        return await self._shards.step("cancel", timer_id)

    async def reschedule(self, timer_id: str, due_ms: int) -> bool:
        self._open()
        now = await self._now()
        check_due(due_ms, now, self.settings)
        return await self._shards.step(
            "reschedule", timer_id, base36(due_ms), now, self._next_seq()
        )

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self._open()
        check_claim(limit, lease_ms, self.settings)
        self._listener.wakeups.mark(queue)
        now = await self._now()
        return await self._claimer.claim(queue, min(horizon_ms, MAX_MS), limit, lease_ms, now)

    async def extend(self, lease: Lease, lease_ms: int) -> Lease:
        self._open()
        check_lease(lease_ms)
        now = await self._now()
        await self._settle("extend", lease, now + lease_ms, self._next_seq())
        return Lease(lease.timer, lease.token, now + lease_ms)

    async def next_due_ms(self, queue: str) -> int | None:
        self._open()
        self._listener.wakeups.mark(queue)
        now = await self._now()
        calls = [self._shards.call("next_due", s, (queue, now)) for s in range(self.shards)]
        dues = [int(due) for due in await self._shards.run_many(calls) if due]
        return min(dues, default=None)

    async def due_queues(self, horizon_ms: int, limit: int) -> DueQueues:
        """The earliest heads of every shard (heads.lua, one pipeline), merged by time."""
        self._open()
        check_due_queues(horizon_ms, limit)
        self._listener.wakeups.mark(ANY_QUEUE)
        args = (horizon_ms, limit)
        calls = [self._shards.call("heads", s, args) for s in range(self.shards)]
        heads: dict[str, int] = {}
        for reply in await self._shards.run_many(calls):
            for name, at in zip(reply[::2], reply[1::2], strict=True):
                queue, at_ms = name.decode(), int(at)
                if at_ms < heads.get(queue, at_ms + 1):
                    heads[queue] = at_ms
        ordered = sorted(heads.items(), key=lambda head: head[1])
        due = [queue for queue, at_ms in ordered[:limit] if at_ms <= horizon_ms]
        return DueQueues(due, ordered[len(due)][1] if len(ordered) > len(due) else None)

    async def queues(self) -> list[str]:
        """The union of every shard's queues, from one pipeline of `queues.lua` calls."""
        self._open()
        self._listener.wakeups.mark(ANY_QUEUE)
        calls = [self._shards.call("queues", s, ()) for s in range(self.shards)]
        replies = await self._shards.run_many(calls)
        return sorted({name.decode() for reply in replies for name in reply})

    async def wait(self, queue: str, timeout_s: float) -> bool:
        """Wait for a wake message naming `queue`, or `timeout_s`.

        Scripts publish one when a change makes a timer the earliest of its queue in its shard,
        whichever process made it. The first call subscribes, and returns True once subscribed
        (as after a reconnect): a change made before the subscription was not heard.
        """
        self._open()
        check_timeout(timeout_s)
        with self._listener.wakeups.waiting(queue) as event:
            self._listener.start()
            return await until(event, timeout_s)

    async def ack(self, lease: Lease) -> None:
        (acked,) = await self.ack_many([lease])
        if not acked:
            raise LeaseLost(lease.timer.id, lease.token)

    async def ack_many(self, leases: Sequence[Lease]) -> list[bool]:
        """Ack many leases: one ack.lua call per shard (per 500), all in one pipeline."""
        self._open()
        now = await self._now()
        by_shard: dict[int, list[int]] = {}
        for n, lease in enumerate(leases):
            by_shard.setdefault(self._shards.of(lease.timer.id), []).append(n)
        batches = [
            (shard, positions[start : start + ACK_BATCH])
            for shard, positions in by_shard.items()
            for start in range(0, len(positions), ACK_BATCH)
        ]
        expiry = now + self.settings.retention_ms
        occurrence_expiry = now + self.settings.occurrence_retention()
        doubts = self._in_doubt
        calls = [
            self._shards.call(
                "ack",
                shard,
                (
                    now,
                    expiry,
                    "".join([f"{leases[n].timer.id} {leases[n].token} " for n in positions]),
                    doubts.ids([leases[n] for n in positions]) if doubts else "",
                    occurrence_expiry,
                ),
            )
            for shard, positions in batches
        ]
        try:
            answers = await self._shards.run_many(calls)
        except StoreUnavailable:
            self._in_doubt.note(leases, now)
            raise
        acked = [False] * len(leases)
        for (_, positions), replies in zip(batches, answers, strict=True):
            for n, reply in zip(positions, replies, strict=True):
                acked[n] = reply == 1
        return acked

    async def retry(self, lease: Lease, due_ms: int, error: str) -> None:
        self._open()
        now = await self._now()
        check_due(due_ms, now, self.settings)
        await self._settle(
            "retry", lease, now, base36(due_ms), self._next_seq(), truncate_error(error)
        )

    async def defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        self._open()
        now = await self._now()
        check_due(due_ms, now, self.settings)
        await self._settle(
            "defer", lease, now, base36(due_ms), self._next_seq(), truncate_error(reason)
        )

    async def defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        """Defer many leases: one defer.lua call each, all in one pipeline."""
        self._open()
        now = await self._now()
        for _, due_ms, _ in deferrals:
            check_due(due_ms, now, self.settings)
        doubts = self._in_doubt
        calls = [
            self._shards.call(
                "defer",
                self._shards.of(lease.timer.id),
                (lease.timer.id, lease.token, now, base36(due_ms), self._next_seq(),
                 truncate_error(reason), int(doubts.take(lease))),
            )
            for lease, due_ms, reason in deferrals
        ]  # fmt: skip
        try:
            replies = await self._shards.run_many(calls)
        except StoreUnavailable:
            doubts.note([lease for lease, _, _ in deferrals], now)
            raise
        except NotReplicated as error:
            raise error.of(tuple(lease.timer.id for lease, _, _ in deferrals)) from None
        return [reply == 1 for reply in replies]

    async def kill(self, lease: Lease, error: str) -> None:
        self._open()
        now = await self._now()
        await self._settle("kill", lease, now, truncate_error(error))

    async def replay(self, timer_id: str) -> bool:
        self._open()
        now = await self._now()
        return await self._shards.step("replay", timer_id, now, self._next_seq(), base36(now))

    async def add_schedule(self, schedule: Schedule) -> ScheduleState:
        self._open()
        try:
            return await self._schedules.add(schedule)
        except NotReplicated as error:
            raise error.of((schedule.id,)) from None

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        self._open()
        return await self._schedules.get(schedule_id)

    async def list_schedules(self, limit: int = 100, cursor: str | None = None) -> SchedulePage:
        """Page through the schedules shard by shard, by id within a shard: each once."""
        self._open()
        check_list(limit)
        return await self._schedules.page(limit, cursor)

    async def update_schedule(self, schedule: Schedule) -> ScheduleState | None:
        self._open()
        try:
            return await self._schedules.update(schedule)
        except NotReplicated as error:
            raise error.of((schedule.id,)) from None

    async def delete_schedule(self, schedule_id: str) -> bool:
        self._open()
        try:
            return await self._schedules.delete(schedule_id)
        except NotReplicated as error:
            raise error.of((schedule_id,)) from None

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        """Move claimed occurrences' schedules on (`schedules.py`): two round trips for any
        number of shards, none when no lease is an occurrence."""
        self._open()
        return await self._schedules.advance(leases)

    async def pause(self, timer_id: str) -> bool:
        """Take a scheduled timer out of its queue, in one pause.lua call."""
        self._open()
        if occurrence_of(timer_id) is not None:
            return False  # its schedule owns it
        now = await self._now()
        return await self._shards.step("pause", timer_id, now)

    async def resume(self, timer_id: str) -> bool:
        """Put a paused timer back in its queue at its due time, in one resume.lua call."""
        self._open()
        now = await self._now()
        return await self._shards.step("resume", timer_id, now, self._next_seq())

    async def queue_settings(self) -> dict[str, QueueSettings]:
        self._open()
        return await self._queue_settings.settings()

    async def set_queue(self, queue: str, settings: QueueSettings) -> None:
        """Write (or with the defaults delete) the queue's settings fields in one script, then
        wake the queue's waiters in every process through the wake channel."""
        self._open()
        check_queue_settings(queue, settings)
        await self._queue_settings.replace(queue, settings)
        await self._wake_queue(queue)

    async def pause_queue(self, queue: str, paused: bool) -> bool:
        """Set or clear the queue's pause field alone (settings_field.lua), then wake its
        waiters."""
        self._open()
        check_queue_pause(queue, paused)
        changed = await self._queue_settings.pause(queue, paused)
        await self._wake_queue(queue)
        return changed

    async def set_queue_limit(self, queue: str, limit: Limit | None) -> bool:
        """Set or delete the queue's limit field alone (settings_field.lua), then wake its
        waiters."""
        self._open()
        check_queue_limit(queue, limit)
        had = await self._queue_settings.set_limit(queue, limit)
        await self._wake_queue(queue)
        return had

    async def queue_infos(self) -> list[QueueInfo]:
        """Counts per queue from every shard's counts hash, and the stored settings."""
        self._open()
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

    async def limits(self) -> dict[str, Limit]:
        self._open()
        return await self._host_limits.read()

    async def list_limits(self, limit: int = 100, cursor: str | None = None) -> LimitPage:
        """One page read through the index of hosts (`host_limits.py`), not the whole hash."""
        self._open()
        check_list(limit)
        found = await self._host_limits.page(limit + 1, cursor)
        if len(found) > limit:
            return LimitPage(found[:limit], found[limit - 1][0])
        return LimitPage(found, None)

    async def set_limit(self, host: str, limit: Limit) -> None:
        self._open()
        check_host(host)
        await self._host_limits.put(host, limit, self.settings.max_limits)

    async def delete_limit(self, host: str) -> bool:
        self._open()
        return await self._host_limits.put(host, None)

    async def settings_versions(self) -> tuple[int, int]:
        """Both versions in one pipeline (`queue_settings.py`)."""
        self._open()
        keys = (self._queue_settings.version_key, self._host_limits.version_key)
        queues, limits = await read_versions(self._client, keys)
        return queues, limits

    def limit_grants(self) -> RedisGrants:
        """Return the limit grants every worker of this store shares (`limits.RedisGrants`)."""
        return RedisGrants(self._client, self.prefix)

    async def list(
        self,
        state: State | None = None,
        limit: int = 100,
        cursor: str | None = None,
        *,
        queue: str | None = None,
        due_from_ms: int | None = None,
        due_to_ms: int | None = None,
    ) -> Page:
        """Page through the timers shard by shard (`listing.py` says in which order): a timer
        present for the whole walk is listed; one added or deleted meanwhile may or may not be."""
        self._open()
        check_list(limit)
        check_list_filters(queue, due_from_ms, due_to_ms)
        now = await self._now()
        filters = (
            queue or "",
            "" if due_from_ms is None else str(due_from_ms),
            "" if due_to_ms is None else str(due_to_ms),
        )
        return await listing.list_page(
            self._shards, self._records, state, limit, cursor, now, filters
        )

    async def stats(self) -> Stats:
        self._open()
        now = await self._now()
        await self._claimer.purge_all(now)
        return (await listing.count(self._shards, now)).stats()

    async def sync_clock(self) -> None:
        """Measure the server clock's offset now (done lazily and every `clock_refresh_s`)."""
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

    async def _add(
        self, timers: Sequence[Timer], replace: bool, *, checked: bool = False
    ) -> adding.Added:
        """Add `timers`, each due time checked against the horizon unless `checked` (by
        `add`, before it queued: a batch of others' timers must not fail for one of them)."""
        self._open()
        now = await self._now()
        if not checked:
            for timer in timers:
                check_due(timer.due_ms, now, self.settings)
        first_seq = self._seq.take(len(timers))
        if len(timers) == 1:
            one = await adding.add_one(
                self._shards, self._records, timers[0], replace=replace, now_ms=now, seq=first_seq
            )
            return [one]
        return await adding.add(
            self._shards, self._records, timers, replace=replace, now_ms=now, first_seq=first_seq
        )

    async def _add_checked(self, timers: Sequence[Timer]) -> adding.Added:
        return await self._add(timers, False, checked=True)

    async def _replace_checked(self, timers: Sequence[Timer]) -> adding.Added:
        return await self._add(timers, True, checked=True)

    async def _wake_queue(self, queue: str) -> None:
        with unavailable("PUBLISH"):
            await self._client.publish(f"{self.prefix}:wake", queue)

    async def _settle(self, name: str, lease: Lease, *args: Arg) -> None:
        """Run a one-lease settle script; its last argument says whether this lease's last
        settle went unanswered (then "settled so already, by this token" counts)."""
        again = int(self._in_doubt.take(lease))
        try:
            settled = await self._shards.step(name, lease.timer.id, lease.token, *args, again)
        except StoreUnavailable:
            self._in_doubt.note([lease], self._clock())
            raise
        if not settled:
            raise LeaseLost(lease.timer.id, lease.token)

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
