"""Claiming and settling the timers of a `RedisStore`: claim, extend, ack, retry, defer and kill,
and the due-queue reads a worker claims by."""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel.errors import LeaseLost, NotReplicated, StoreUnavailable
from tickwheel.model import truncate_error
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import ANY_QUEUE, Deferral, DueQueues, Lease
from tickwheel.stores.redis.record import base36
from tickwheel.stores.redis.scripts import Arg
from tickwheel.stores.redis.store_base import RedisStoreBase

SETTLE_BATCH = 500  # leases per ack.lua or defer.lua call
MAX_MS = 2**53  # Lua and sorted-set scores are doubles: integers are exact below this
NEXT_DUE_BATCH = 256  # queues one next_due.lua call looks at most


class RedisLeasing(RedisStoreBase):
    """The claim and settle calls of `RedisStore`."""

    async def _claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        await self._ready()
        self._listener.wakeups.mark(queue)
        now = await self._now()
        return await self._claimer.claim(queue, min(horizon_ms, MAX_MS), limit, lease_ms, now)

    async def _extend(self, lease: Lease, lease_ms: int) -> Lease:
        await self._ready()
        now = await self._now()
        await self._settle("extend", lease, now + lease_ms, self._next_seq())
        return Lease(lease.timer, lease.token, now + lease_ms)

    async def _extend_many(self, leases: Sequence[Lease], lease_ms: int) -> list[Lease | None]:
        """Extend many leases: one extend_many.lua call per shard (per 500), all in one
        pipeline, each lease under a lease seq of its own."""
        await self._ready()
        now = await self._now()
        deadline = now + lease_ms
        batches = self._batches(leases)
        calls = []
        for shard, positions in batches:
            args: list[Arg] = [deadline]
            for n in positions:
                args += (leases[n].timer.id, leases[n].token, self._next_seq())
            calls.append(self._shards.call("extend_many", shard, args))
        try:
            answers = await self._shards.run_many(calls)
        except StoreUnavailable:
            self._in_doubt.note(leases, now)
            raise
        extended = _per_lease(batches, answers, len(leases))
        return [
            Lease(lease.timer, lease.token, deadline) if held else None
            for lease, held in zip(leases, extended, strict=True)
        ]

    async def next_due_ms(self, queue: str) -> int | None:
        await self._ready()
        self._listener.wakeups.mark(queue)
        return await self._next_dues.submit(queue)

    async def _next_due_batch(self, queues: list[str]) -> list[int | None]:
        """The next due time of each queue: one next_due.lua call per shard for them all, so
        callers asking at once (a worker's many claim loops) share the calls."""
        now = await self._now()
        distinct = list(dict.fromkeys(queues))
        calls = [self._shards.call("next_due", s, (now, *distinct)) for s in range(self.shards)]
        earliest: dict[str, int] = {}
        for reply in await self._shards.run_many(calls):
            for queue, due in zip(distinct, reply, strict=True):
                if due and int(due) < earliest.get(queue, MAX_MS):
                    earliest[queue] = int(due)
        return [earliest.get(queue) for queue in queues]

    async def _due_queues(self, horizon_ms: int, limit: int, since_ms: int | None) -> DueQueues:
        """The earliest heads of every shard (heads.lua, one pipeline), merged by time."""
        await self._ready()
        self._listener.wakeups.mark(ANY_QUEUE)
        args = (horizon_ms, limit, "-inf" if since_ms is None else since_ms)
        calls = [self._shards.call("heads", s, args) for s in range(self.shards)]
        heads: dict[bytes, int] = {}
        earlier = heads.get
        for reply in await self._shards.run_many(calls):
            for name, at in zip(reply[::2], reply[1::2], strict=True):
                at_ms = int(at)
                if at_ms < earlier(name, at_ms + 1):
                    heads[name] = at_ms
        ordered = sorted(heads.items(), key=lambda head: head[1])
        due = [name.decode() for name, at_ms in ordered[:limit] if at_ms <= horizon_ms]
        return DueQueues(due, ordered[len(due)][1] if len(ordered) > len(due) else None)

    async def queues(self) -> list[str]:
        """The union of every shard's queues, from one pipeline of `queues.lua` calls."""
        await self._ready()
        self._listener.wakeups.mark(ANY_QUEUE)
        calls = [self._shards.call("queues", s, ()) for s in range(self.shards)]
        replies = await self._shards.run_many(calls)
        return sorted({name.decode() for reply in replies for name in reply})

    async def ack(self, lease: Lease, attempt: Attempt | None = None) -> None:
        (acked,) = await self.ack_many([lease], () if attempt is None else (attempt,))
        if not acked:
            raise LeaseLost(lease.timer.id, lease.token)

    async def ack_many(
        self, leases: Sequence[Lease], attempts: Sequence[Attempt | None] = ()
    ) -> list[bool]:
        """Ack many leases: one ack.lua call per shard (per 500), all in one pipeline, each
        with the attempts of its leases."""
        await self._ready()
        now = await self._now()
        batches = self._batches(leases)
        expiry = now + self.settings.retention_ms
        occurrence_expiry = now + self.settings.occurrence_retention()
        doubts = self._in_doubt
        keeping = f"{self.settings.attempt_history} {self.settings.attempt_retention_ms}"

        def recorded(positions: list[int]) -> list[str]:
            if not attempts:
                return []
            return [
                "" if (attempt := attempts[n]) is None else attempt.to_json() for n in positions
            ]

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
                    keeping,
                    *recorded(positions),
                ),
            )
            for shard, positions in batches
        ]
        try:
            answers = await self._shards.run_many(calls)
        except StoreUnavailable:
            self._in_doubt.note(leases, now)
            raise
        return _per_lease(batches, answers, len(leases))

    async def _retry(self, lease: Lease, due_ms: int, error: str, attempt: Attempt | None) -> None:
        await self._ready()
        now = await self._now()
        await self._settle(
            "retry",
            lease,
            now,
            base36(due_ms),
            self._next_seq(),
            truncate_error(error),
            recording=self._history_args(attempt),
        )

    async def _defer(self, lease: Lease, due_ms: int, reason: str) -> None:
        (deferred,) = await self._defer_many([(lease, due_ms, reason)])
        if not deferred:
            raise LeaseLost(lease.timer.id, lease.token)

    async def _defer_many(self, deferrals: Sequence[Deferral]) -> list[bool]:
        """Defer many leases: one defer.lua call per shard (per 500), all in one pipeline."""
        await self._ready()
        now = await self._now()
        leases = [lease for lease, _, _ in deferrals]
        batches = self._batches(leases)
        doubts = self._in_doubt
        calls = []
        for shard, positions in batches:
            args: list[Arg] = [now]
            for n in positions:
                lease, due_ms, reason = deferrals[n]
                args += (lease.timer.id, lease.token, base36(due_ms), self._next_seq(),
                         truncate_error(reason), int(doubts.take(lease)))  # fmt: skip
            calls.append(self._shards.call("defer", shard, args))
        try:
            answers = await self._shards.run_many(calls)
        except StoreUnavailable:
            doubts.note(leases, now)
            raise
        except NotReplicated as error:
            raise error.of(tuple(lease.timer.id for lease in leases)) from None
        return _per_lease(batches, answers, len(leases))

    def _batches(self, leases: Sequence[Lease]) -> list[tuple[int, list[int]]]:
        """The places of `leases` by shard, in batches of `SETTLE_BATCH`: one script call each."""
        by_shard: dict[int, list[int]] = {}
        for n, lease in enumerate(leases):
            by_shard.setdefault(self._shards.of(lease.timer.id), []).append(n)
        return [
            (shard, positions[start : start + SETTLE_BATCH])
            for shard, positions in by_shard.items()
            for start in range(0, len(positions), SETTLE_BATCH)
        ]

    async def kill(self, lease: Lease, error: str, attempt: Attempt | None = None) -> None:
        await self._ready()
        now = await self._now()
        recording = self._history_args(attempt)
        await self._settle("kill", lease, now, truncate_error(error), recording=recording)

    def _history_args(self, attempt: Attempt | None = None) -> tuple[str, int, int]:
        """What a settle script records: the attempt (JSON, or ''), how many a timer keeps
        and for how long."""
        record = "" if attempt is None else attempt.to_json()
        return (record, self.settings.attempt_history, self.settings.attempt_retention_ms)

    async def _settle(
        self, name: str, lease: Lease, *args: Arg, recording: Sequence[Arg] = ()
    ) -> None:
        """Run a one-lease settle script; after `args` it says whether this lease's last
        settle went unanswered (then "settled so already, by this token" counts), and then
        the attempt to record (`recording`, for retry and kill)."""
        again = int(self._in_doubt.take(lease))
        try:
            settled = await self._shards.step(
                name, lease.timer.id, lease.token, *args, again, *recording
            )
        except StoreUnavailable:
            self._in_doubt.note([lease], self._clock())
            raise
        if not settled:
            raise LeaseLost(lease.timer.id, lease.token)


def _per_lease(
    batches: list[tuple[int, list[int]]], answers: list[list[int]], count: int
) -> list[bool]:
    """Whether each of `count` leases settled, from the replies of its batch's call."""
    settled = [False] * count
    for (_, positions), replies in zip(batches, answers, strict=True):
        for n, reply in zip(positions, replies, strict=True):
            settled[n] = reply == 1
    return settled
