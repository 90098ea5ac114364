"""`RedisStore`: timers in Redis or Redis Cluster, in virtual shards holding a two-level wheel.

A timer lives in the shard its id hashes to (`keys.py`); each state transition is one Lua
script on that shard (``lua/*.lua``), so a timer is never half written. Calls that touch several
shards (claim, list, stats, add_many) go out as one pipeline, which the Cluster client splits by
node and sends concurrently.
"""

from __future__ import annotations

import asyncio
import itertools
from asyncio import FIRST_COMPLETED
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, cast

from redis.asyncio import BlockingConnectionPool, Redis, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from tickwheel.errors import Closed, InvalidArgument, LeaseLost, TimerExists
from tickwheel.model import State, Timer, as_scheduled, truncate_error
from tickwheel.stores.base import Lease, Page, Stats, StoreSettings, new_lease
from tickwheel.stores.checks import (
    check_claim,
    check_due,
    check_lease,
    check_list,
    check_timeout,
)
from tickwheel.stores.codec import state_code
from tickwheel.stores.redis.batch import AddCall, plan
from tickwheel.stores.redis.clock import ServerClock
from tickwheel.stores.redis.keys import (
    DEFAULT_PREFIX,
    DEFAULT_SHARDS,
    ShardKeys,
    check_layout,
    shard_of,
)
from tickwheel.stores.redis.listen import Listener
from tickwheel.stores.redis.record import (
    NEAR_ID_AT,
    SeqSource,
    base36,
    seq_of,
    unpack,
)
from tickwheel.stores.redis.scripts import Arg, Client, ScriptCall, Scripts, unavailable
from tickwheel.stores.urls import redact
from tickwheel.stores.wake import until

# (`RedisStore.list` hides the builtin inside the class body)
Added: TypeAlias = list[Timer | TimerExists]
Replies: TypeAlias = list[Any]
Calls: TypeAlias = list[ScriptCall]
Members: TypeAlias = list[bytes]
Heads: TypeAlias = list[tuple[bytes, int]]  # (near-set member, shard)

ADD_CHUNK = 2_000  # timers per add_many pipeline (an add.lua call per shard)
ADD_IN_FLIGHT = 3  # add_many pipelines sent at once
ACK_BATCH = 500  # leases per ack.lua call
RELEASE_LIMIT = 256  # expired leases returned per shard per claim (whole batches: maybe more)
PURGE_LIMIT = 1_000  # done-list entries a purge.lua call reads (16k/s with a claim a second)
SCAN_STEPS = 50  # HSCAN steps (of ~100 records, ~2 ms of Redis) a scan.lua call takes at most
PURGE_EVERY_MS = 1000  # claims purge at most this often (store clock); stats purges all
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
    ) -> None:
        check_layout(prefix, shards)
        self.settings = settings or StoreSettings()
        self.prefix = prefix
        self.shards = shards
        self._client = client
        self._owns_client = owns_client
        self._keys = [ShardKeys.of(prefix, shard) for shard in range(shards)]
        self._fixed = [keys.fixed for keys in self._keys]
        self._scripts = Scripts(client)
        self._server_clock: ServerClock | None = None
        self._clock: Callable[[], int]
        if clock is None:
            self._server_clock = self._clock = ServerClock(clock_refresh_s)
        else:
            self._clock = clock
        self._seq = SeqSource()
        self._next_purge_ms = 0
        self._listener = Listener(client, f"{prefix}:wake")
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
        A standalone client opens at most `max_connections`; callers beyond wait for one.
        """
        check_layout(prefix, shards)  # before a client exists to be closed
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
        )

    @property
    def client(self) -> Client:
        return self._client

    def now_ms(self) -> int:
        return self._clock()

    def shard_keys(self, shard: int) -> ShardKeys:
        """The keys of one shard (for tools and tests)."""
        return self._keys[shard]

    async def add(self, timer: Timer, *, replace: bool = False) -> Timer:
        (stored,) = await self._add([timer], replace)
        if isinstance(stored, TimerExists):
            raise stored
        return stored

    async def add_many(self, timers: Sequence[Timer], *, replace: bool = False) -> list[Timer]:
        """Add many timers in few round trips; return them as stored, in order.

        Each timer is added atomically, as by `add`, the batch as a whole is not: after a
        `StoreUnavailable` some may be stored. An id held by a timer with another spec raises
        `TimerExists` once the rest are stored.
        """
        stored = []
        for result in await self._add(timers, replace):
            if isinstance(result, TimerExists):
                raise result
            stored.append(result)
        return stored

    async def get(self, timer_id: str) -> Timer | None:
        self._open()
        now = await self._now()
        (raw,) = await self._scripts.run("get", self._fixed_of(timer_id), (now, timer_id))
        return None if raw == 0 else unpack(timer_id, raw)

    async def cancel(self, timer_id: str) -> bool:
        self._open()
        return await self._step("cancel", timer_id)

    async def reschedule(self, timer_id: str, due_ms: int) -> bool:
        self._open()
        now = await self._now()
        check_due(due_ms, now, self.settings)
        return await self._step("reschedule", timer_id, base36(due_ms), now, self._next_seq())

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        self._open()
        check_claim(limit, lease_ms, self.settings)
        self._listener.wakeups.mark(queue)
        now = await self._now()
        horizon_ms = min(horizon_ms, MAX_MS)
        chosen = await self._choose(queue, horizon_ms, limit, now)
        if not chosen:
            return []
        # lease seqs number the claims in (due, seq) order across shards: the leases are
        # returned in that order, and come back in it should they expire
        seqs = SeqSource.formats(self._seq.take(len(chosen)), len(chosen))
        lease_seqs: dict[int, list[str]] = {}
        for seq, (_, shard) in zip(seqs, chosen, strict=True):
            lease_seqs.setdefault(shard, []).append(seq)
        claim_calls = [
            self._call("claim", s, (queue, horizon_ms, now, lease_ms, "".join(seqs)))
            for s, seqs in lease_seqs.items()
        ]
        claimed = [
            (flat[i], flat[i + 1])
            for flat in await self._scripts.run_many(claim_calls)
            for i in range(0, len(flat), 2)
        ]
        place = {member[NEAR_ID_AT[member[0]] :]: n for n, (member, _) in enumerate(chosen)}
        if all(raw_id in place for raw_id, _ in claimed):
            claimed.sort(key=lambda pair: place[pair[0]])
        else:  # a shard leased other timers than it showed (they changed in between)
            claimed.sort(key=lambda pair: seq_of(pair[1]))
        deadline = now + lease_ms
        leases = []
        for raw_id, raw in claimed:
            timer = unpack(raw_id.decode(), raw)
            leases.append(new_lease(timer, timer.attempt, deadline))
        return leases

    async def _choose(self, queue: str, horizon_ms: int, limit: int, now: int) -> Heads:
        """Return (member, shard) of the `limit` earliest due timers over all shards.

        Expired leases return to their queues first. Each shard shows its share and a margin;
        a shard all of whose shown timers made the cut shows `limit` in a second round. A shard
        whose slots the horizon reaches hold more than one call moves is asked again first.
        """
        # a shard's share of the limit plus a margin: ids hash evenly, so a shard rarely holds
        # more than a quarter over its share of the earliest
        share = min(limit, -(-5 * limit // (4 * self.shards)) + 16)
        asked = dict.fromkeys(range(self.shards), share)
        shown: dict[int, Members] = {}
        wanted = list(asked)
        calls: Calls = []
        if now >= self._next_purge_ms:
            calls = [self._purge(s, now) for s in range(self.shards)]
            self._next_purge_ms = now + PURGE_EVERY_MS
        released = False
        while wanted:
            calls += [
                self._call("peek", s, (queue, horizon_ms, asked[s], now, RELEASE_LIMIT))
                for s in wanted
            ]
            peeks = (await self._scripts.run_many(calls))[len(calls) - len(wanted) :]
            calls = []
            expired = {s: members for s, (members, _, _) in zip(wanted, peeks, strict=True)}
            if not released and any(expired.values()):
                # as in the reference store, they return before anything is claimed (once
                # per claim: those beyond RELEASE_LIMIT in a shard wait for the next claim)
                await self._release(now, expired)
                released = True
                continue
            moving = [s for s, (_, _, partly) in zip(wanted, peeks, strict=True) if partly]
            if moving:  # a slot too big to move in one call: peek again until it is moved
                wanted = moving
                continue
            shown.update((s, due) for s, (_, due, _) in zip(wanted, peeks, strict=True))
            # members begin with their due time: they sort as (due, seq) by their bytes; one
            # sort of all shown (~1.5 x limit) is 5x faster here than heapq.nsmallest
            chosen = sorted(
                itertools.chain.from_iterable(
                    zip(due, itertools.repeat(shard)) for shard, due in shown.items()
                )
            )[:limit]
            taken = Counter(shard for _, shard in chosen)
            wanted = [
                s
                for s, due in shown.items()
                if taken[s] == len(due) == asked[s] < limit  # it may hold more
            ]
            asked.update(dict.fromkeys(wanted, limit))
        return chosen

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
        calls = [self._call("next_due", s, (queue, now)) for s in range(self.shards)]
        dues = [int(due) for due in await self._scripts.run_many(calls) if due]
        return min(dues, default=None)

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
            by_shard.setdefault(shard_of(lease.timer.id, self.shards), []).append(n)
        batches = [
            (shard, positions[start : start + ACK_BATCH])
            for shard, positions in by_shard.items()
            for start in range(0, len(positions), ACK_BATCH)
        ]
        expiry = now + self.settings.retention_ms
        calls = [
            self._call(
                "ack",
                shard,
                (
                    now,
                    expiry,
                    "".join([f"{leases[n].timer.id} {leases[n].token} " for n in positions]),
                ),
            )
            for shard, positions in batches
        ]
        acked = [False] * len(leases)
        for (_, positions), replies in zip(
            batches, await self._scripts.run_many(calls), strict=True
        ):
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

    async def kill(self, lease: Lease, error: str) -> None:
        self._open()
        now = await self._now()
        await self._settle("kill", lease, now, truncate_error(error))

    async def replay(self, timer_id: str) -> bool:
        self._open()
        now = await self._now()
        return await self._step("replay", timer_id, now, self._next_seq(), base36(now))

    async def list(
        self, state: State | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page:
        """Page through the timers shard by shard: dead letters in id order, the rest in each
        shard's records-hash order (decisions 23), with Redis SCAN's guarantee: a timer present
        for the whole walk is listed; one added or deleted meanwhile may or may not be."""
        self._open()
        check_list(limit)
        now = await self._now()
        if state is State.LEASED:
            return await self._list_leased(now, limit, cursor)
        code = "" if state is None else str(state_code(state))
        begin = "-" if state is State.DEAD else "0"
        shard, skip, position = self._where(cursor, begin)
        timers: list[Timer] = []
        # the cursor's shard alone while it has more (on a large store it fills the page, or
        # a rare state takes it many calls); once it ends, every shard after it at once
        asked = 1
        while shard < self.shards and len(timers) < limit:
            need = limit - len(timers)
            shards = range(shard, min(shard + asked, self.shards))
            calls = [
                self._call(
                    "scan",
                    s,
                    (position, skip, need, code, now, SCAN_STEPS)
                    if s == shards[0]
                    else (begin, 0, need, code, now, SCAN_STEPS),
                )
                for s in shards
            ]
            asked = self.shards
            for s, (flat, after, after_skip, done) in zip(
                shards, await self._scripts.run_many(calls), strict=True
            ):
                if len(flat) // 2 > limit - len(timers):
                    shard, skip, position = s, 0, begin  # asked for too many: ask it again
                    break
                timers += [unpack(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)]
                if not done:
                    shard, skip, position = s, after_skip, after.decode()
                    asked = 1
                    break
                shard, skip, position = s + 1, 0, begin
        more = shard < self.shards
        return Page(timers, f"{shard}:{skip}:{position}" if more else None)

    async def _list_leased(self, now: int, limit: int, cursor: str | None) -> Page:
        """Leased timers shard by shard, by id within a shard: each shard's lease batches
        list its timers in flight, which the store sorts (Lua compares by locale)."""
        shard, _, position = self._where(cursor, "-")
        after = position[1:]  # "(<id>": the last one listed
        code = str(state_code(State.LEASED))
        shards = range(shard, self.shards)
        calls = [self._call("scan", s, ("-", 0, limit, code, now, 0)) for s in shards]
        timers: list[Timer] = []
        for s, (flat, *_) in zip(shards, await self._scripts.run_many(calls), strict=True):
            held = sorted(
                (flat[i].decode(), flat[i + 1])
                for i in range(0, len(flat), 2)
                if s != shard or flat[i].decode() > after
            )
            need = limit - len(timers)
            timers += [unpack(timer_id, raw) for timer_id, raw in held[:need]]
            if len(held) > need:
                return Page(timers, f"{s}:0:({held[need - 1][0]}" if need else f"{s}:0:-")
        return Page(timers, None)

    def _where(self, cursor: str | None, begin: str) -> tuple[int, int, str]:
        """Read a `list` cursor: shard, matches to skip, and where in the shard."""
        if cursor is None:
            return 0, 0, begin
        shard, _, rest = cursor.partition(":")
        skip, _, position = rest.partition(":")
        if not (shard.isdigit() and skip.isdigit() and position and int(shard) < self.shards):
            raise InvalidArgument("cursor", f"not a cursor this store returned: {cursor!r}")
        return int(shard), int(skip), position

    async def stats(self) -> Stats:
        self._open()
        now = await self._now()
        await self._purge_all(now)
        replies: dict[int, Replies] = {}
        todo = list(range(self.shards))
        while todo:  # again where a slot too big to move in one call hid the earliest
            calls = [self._call("stats", s, (now,)) for s in todo]
            replies.update(zip(todo, await self._scripts.run_many(calls), strict=True))
            todo = [s for s in todo if not replies[s][5]]
        counts = dict.fromkeys(State, 0)
        dues = []
        for reply in replies.values():
            for state, count in zip(State, reply[:4], strict=True):
                counts[state] += count
            if reply[4]:
                dues.append(int(reply[4]))
        return Stats(counts, min(dues, default=None))

    async def _purge_all(self, now: int) -> None:
        """Delete every done timer whose retention has ended, PURGE_LIMIT per call."""
        todo = list(range(self.shards))
        while todo:
            replies = await self._scripts.run_many([self._purge(s, now) for s in todo])
            todo = [s for s, read in zip(todo, replies, strict=True) if read == PURGE_LIMIT]

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
        if self._owns_client:
            await self._client.aclose()

    async def _add(self, timers: Sequence[Timer], replace: bool) -> Added:
        self._open()
        now = await self._now()
        for timer in timers:
            check_due(timer.due_ms, now, self.settings)
        first_seq = self._seq.take(len(timers))
        results: list[Timer | TimerExists | None] = [None] * len(timers)

        async def send(calls: list[AddCall]) -> None:
            script_calls = [self._call("add", c.shard, (now, int(replace), c.lines)) for c in calls]
            for call, reply in zip(calls, await self._scripts.run_many(script_calls), strict=True):
                for n, result in zip(call.positions, reply, strict=True):
                    results[n] = self._added(timers[n], now, result)

        if len({timer.id for timer in timers}) < len(timers):
            # an id repeats: one pipeline, whose calls run in order, so the later add sees
            # the earlier
            await send(plan(timers, 0, now, first_seq, self.shards))
        else:
            # chunks in flight while the next is encoded, so encoding overlaps Redis's work
            in_flight: set[asyncio.Task[None]] = set()
            try:
                for start in range(0, len(timers), ADD_CHUNK):
                    chunk = plan(
                        timers[start : start + ADD_CHUNK], start, now, first_seq, self.shards
                    )
                    in_flight.add(asyncio.ensure_future(send(chunk)))
                    if len(in_flight) < ADD_IN_FLIGHT:
                        await asyncio.sleep(0)  # let the task write its pipeline
                        continue
                    done, in_flight = await asyncio.wait(in_flight, return_when=FIRST_COMPLETED)
                    for task in done:
                        task.result()
                await asyncio.gather(*in_flight)
            finally:
                for task in in_flight:
                    task.cancel()
        return cast(Added, results)

    def _added(self, timer: Timer, now: int, result: int | bytes) -> Timer | TimerExists:
        """What add.lua's `result` for `timer` means: stored (with this attempt) or taken."""
        if isinstance(result, int):
            return as_scheduled(timer, now, result)
        existing = unpack(timer.id, result)
        return existing if existing.spec() == timer.spec() else TimerExists(timer.id)

    async def _release(self, now: int, expired: dict[int, Replies]) -> None:
        """Return expired leases to scheduled, numbered in (deadline, lease seq) order.

        `expired` holds each shard's expired lease batches as peek.lua lists them: batch,
        deadline, the members still leased.
        """
        ordered = sorted(
            (float(flat[i + 1]), member, shard, flat[i])
            for shard, flat in expired.items()
            for i in range(0, len(flat), 3)
            for member in flat[i + 2]
        )
        first = self._seq.take(len(ordered))
        batches: dict[int, dict[bytes, list[Arg]]] = {}
        for n, (_, member, shard, batch) in enumerate(ordered):
            pairs = batches.setdefault(shard, {}).setdefault(batch, [])
            pairs += (member.decode(), SeqSource.format(first + n))
        calls = []
        for shard, by_batch in batches.items():
            args: list[Arg] = [now]
            for batch, pairs in by_batch.items():
                args += (batch.decode(), len(pairs) // 2, *pairs)
            calls.append(self._call("release", shard, args))
        await self._scripts.run_many(calls)

    async def _settle(self, name: str, lease: Lease, *args: Arg) -> None:
        if not await self._step(name, lease.timer.id, lease.token, *args):
            raise LeaseLost(lease.timer.id, lease.token)

    async def _step(self, name: str, timer_id: str, *args: Arg) -> bool:
        """Run a one-timer transition script; return whether it applied."""
        reply: int = await self._scripts.run(name, self._fixed_of(timer_id), (timer_id, *args))
        return reply == 1

    def _fixed_of(self, timer_id: str) -> tuple[str, ...]:
        return self._fixed[shard_of(timer_id, self.shards)]

    def _call(self, name: str, shard: int, args: Sequence[Arg]) -> ScriptCall:
        return (name, self._fixed[shard], args)

    def _purge(self, shard: int, now: int) -> ScriptCall:
        return self._call("purge", shard, (now, PURGE_LIMIT))

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
