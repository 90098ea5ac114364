"""How `RedisStore.claim` leases the earliest due timers of queues across all their shards.

A claim is two round trips: one pipeline of peek.lua per shard, each showing its earliest due
near-set members (and returning expired leases first, by release.lua), a byte sort of the members
across shards, then claim.lua on the shards chosen. Near-set members begin with their due time,
so they sort as (due, seq) by their bytes and the sort needs no scores. Claims of several queues
made while one is in flight go out together: each script call carries every queue of the batch
that it has to look at on its shard, so a worker serving a thousand due queues costs the server
a few calls per shard and batch, not a few per shard and queue.

Each claim carries a request id that claim.lua keeps with the leases it took until they lapse.
A claim whose outcome is unknown (the connection dropped before its reply, Redis restarted) is
sent again, same id, by the next claim of its queue while its leases hold: the shards that ran
it return what it took, and its timers fire now instead of a lease later.
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from tickwheel.errors import StoreUnavailable
from tickwheel.stores.base import Lease, new_lease
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.redis.record import NEAR_ID_AT, RecordCodec, SeqSource, seq_of
from tickwheel.stores.redis.scripts import Arg, ScriptCall
from tickwheel.stores.redis.shards import Shards

Replies: TypeAlias = list[Any]
Heads: TypeAlias = list[tuple[bytes, int]]  # (near-set member, shard)

RELEASE_LIMIT = 256  # expired leases returned per shard per claim (whole batches: maybe more)
PURGE_LIMIT = 1_000  # done-list entries a purge.lua call reads (16k/s with a claim a second)
PURGE_EVERY_MS = 1000  # claims purge at most this often (store clock); stats purges all
MAX_BATCH = 32
"""Claims of distinct queues that go out together at most: a script call on one shard takes at
most this many queues' timers, so it holds the server for a bounded time."""


@dataclass(frozen=True, slots=True)
class _Ask:
    """One queue's claim, arguments checked, as a batch carries it."""

    queue: str
    horizon_ms: int
    limit: int
    lease_ms: int
    now_ms: int


@dataclass(frozen=True, slots=True)
class _Unanswered:
    """A claim sent whose replies did not all come back: claim.lua's arguments for its queue
    on each shard it ran on, the members it chose, and until when to send it again."""

    parts: dict[int, tuple[Arg, ...]]
    chosen: Heads
    deadline_ms: int


class Claimer:
    """Claims for one store; it also deletes done timers past their retention, at most once
    every `PURGE_EVERY_MS` of claims."""

    def __init__(self, shards: Shards, records: RecordCodec, seq: SeqSource) -> None:
        self._shards = shards
        self._records = records
        self._seq = seq
        self._next_purge_ms = 0
        self._rid_prefix = uuid.uuid4().hex[:12]
        self._rids = itertools.count()
        self._unanswered: dict[str, _Unanswered] = {}
        self._asks: Coalescer[_Ask, list[Lease]] = Coalescer(self._claim_batch, MAX_BATCH)

    async def claim(
        self, queue: str, horizon_ms: int, limit: int, lease_ms: int, now_ms: int
    ) -> list[Lease]:
        """Lease up to `limit` timers of `queue` due by `horizon_ms` (arguments checked).

        If the last claim of `queue` went unanswered and its leases still hold, it is sent
        again instead and its leases are returned (at most its own limit, maybe fewer).
        """
        unanswered = self._unanswered.pop(queue, None)
        if unanswered is not None and now_ms < unanswered.deadline_ms:
            (leases,) = await self._send([queue], [unanswered])
            return leases
        return await self._asks.submit(_Ask(queue, horizon_ms, limit, lease_ms, now_ms))

    async def _claim_batch(self, asks: list[_Ask]) -> list[list[Lease]]:
        """Claim for each ask; a queue asked for twice (two consumers of one store) is claimed
        again after its first claim, so that the second takes the timers after the first's."""
        first: dict[str, int] = {}
        again = []
        for n, ask in enumerate(asks):
            if first.setdefault(ask.queue, n) != n:
                again.append(n)
        if not again:
            return await self._claim_distinct(asks)
        results = dict(
            zip(
                first.values(),
                await self._claim_distinct([asks[n] for n in first.values()]),
                strict=True,
            )
        )
        results.update(zip(again, await self._claim_batch([asks[n] for n in again]), strict=True))
        return [results[n] for n in range(len(asks))]

    async def _claim_distinct(self, asks: list[_Ask]) -> list[list[Lease]]:
        """Claim for asks of distinct queues: one peek round for all, then one claim round."""
        now = max(ask.now_ms for ask in asks)
        chosen = await self._choose(asks, now)
        claims: list[tuple[int, _Unanswered]] = []
        for n, (ask, heads) in enumerate(zip(asks, chosen, strict=True)):
            if not heads:
                continue
            # lease seqs number the claims in (due, seq) order across shards: the leases are
            # returned in that order, and come back in it should they expire
            seqs = SeqSource.formats(self._seq.take(len(heads)), len(heads))
            by_shard: dict[int, list[str]] = {}
            for seq, (_, shard) in zip(seqs, heads, strict=True):
                by_shard.setdefault(shard, []).append(seq)
            rid = f"{self._rid_prefix}.{next(self._rids)}"
            parts: dict[int, tuple[Arg, ...]] = {
                s: (ask.queue, ask.horizon_ms, now, ask.lease_ms, "".join(ss), rid)
                for s, ss in by_shard.items()
            }
            claims.append((n, _Unanswered(parts, heads, now + ask.lease_ms)))
        results: list[list[Lease]] = [[] for _ in asks]
        if claims:
            sent = await self._send([asks[n].queue for n, _ in claims], [c for _, c in claims])
            for (n, _), leases in zip(claims, sent, strict=True):
                results[n] = leases
        return results

    async def _send(self, queues: list[str], claims: list[_Unanswered]) -> list[list[Lease]]:
        """Run claims (of distinct queues) in one claim.lua call per shard and decode each
        one's leases; if that fails, keep each to send again."""
        on_shard: dict[int, list[int]] = {}
        for n, claim in enumerate(claims):
            for shard in claim.parts:
                on_shard.setdefault(shard, []).append(n)
        calls: list[ScriptCall] = []
        for shard, ns in on_shard.items():
            args: list[Arg] = []
            for n in ns:
                args += claims[n].parts[shard]
            calls.append(self._shards.call("claim", shard, args))
        try:
            replies = await self._shards.run_many(calls)
        except StoreUnavailable:
            for queue, claim in zip(queues, claims, strict=True):
                self._unanswered[queue] = claim
            raise
        claimed: list[dict[int, Replies]] = [{} for _ in claims]
        for (shard, ns), reply in zip(on_shard.items(), replies, strict=True):
            for n, flat in zip(ns, reply, strict=True):
                claimed[n][shard] = flat
        return [self._leases(c, claim) for c, claim in zip(claimed, claims, strict=True)]

    def _leases(self, by_shard: dict[int, Replies], claim: _Unanswered) -> list[Lease]:
        """Decode one claim's (id, record) pairs, per shard, into leases in the order it chose
        them."""
        deadline = claim.deadline_ms
        leases = []
        unpack = self._records.unpack
        for raw_id, raw in _in_order(by_shard, claim.chosen):
            timer = unpack(raw_id.decode(), raw)
            leases.append(new_lease(timer, timer.attempt, deadline))
        return leases

    async def purge_all(self, now_ms: int) -> None:
        """Delete every done timer whose retention has ended, `PURGE_LIMIT` per call."""
        todo = list(range(self._shards.count))
        while todo:
            replies = await self._shards.run_many([self._purge(s, now_ms) for s in todo])
            todo = [s for s, read in zip(todo, replies, strict=True) if read == PURGE_LIMIT]

    async def _choose(self, asks: Sequence[_Ask], now: int) -> list[Heads]:
        """Return, for each ask, (member, shard) of its `limit` earliest due timers over all
        shards.

        Expired leases return to their queues first. Each shard shows an ask's share and a
        margin; a shard all of whose shown timers made the cut shows `limit` in a second round.
        A shard whose slots the horizon reaches hold more than one call moves is asked again
        first. Each round is one peek.lua call per shard, for every ask it has to show.
        """
        count = self._shards.count
        # a shard's share of the limit plus a margin: ids hash evenly, so a shard rarely holds
        # more than a quarter over its share of the earliest
        asked = [
            dict.fromkeys(range(count), min(ask.limit, -(-5 * ask.limit // (4 * count)) + 16))
            for ask in asks
        ]
        shown: list[dict[int, list[bytes]]] = [{} for _ in asks]
        chosen: list[Heads] = [[] for _ in asks]
        wanted = {(n, s) for n in range(len(asks)) for s in range(count)}
        calls: list[ScriptCall] = []
        if now >= self._next_purge_ms:
            calls = [self._purge(s, now) for s in range(count)]
            self._next_purge_ms = now + PURGE_EVERY_MS
        released = False
        touched: set[int] = set()  # asks shown something since their timers were last chosen
        while wanted:
            on_shard: dict[int, list[int]] = {}
            for n, s in sorted(wanted):
                on_shard.setdefault(s, []).append(n)
                touched.add(n)
            peeks = [self._peek(s, ns, asks, asked, now) for s, ns in on_shard.items()]
            replies = (await self._shards.run_many(calls + peeks))[len(calls) :]
            calls = []
            expired = {s: reply[0] for s, reply in zip(on_shard, replies, strict=True)}
            if not released and any(expired.values()):
                # as in the reference store, they return before anything is claimed (once
                # per claim: those beyond RELEASE_LIMIT in a shard wait for the next claim)
                await self._release(now, expired)
                released = True
                continue
            moving = set()
            for (s, ns), reply in zip(on_shard.items(), replies, strict=True):
                for k, n in enumerate(ns):
                    if reply[2 + 2 * k]:  # a slot too big to move in one call: peek again
                        moving.add((n, s))
                    else:
                        shown[n][s] = reply[1 + 2 * k]
            if moving:
                wanted = moving
                continue
            wanted = set()
            for n in touched:
                limit = asks[n].limit
                # one sort of all shown (~1.5 x limit) is 5x faster here than heapq.nsmallest
                chosen[n] = sorted(
                    itertools.chain.from_iterable(
                        zip(due, itertools.repeat(shard)) for shard, due in shown[n].items()
                    )
                )[:limit]
                taken = Counter(shard for _, shard in chosen[n])
                for s, due in shown[n].items():
                    if taken[s] == len(due) == asked[n][s] < limit:  # it may hold more
                        asked[n][s] = limit
                        wanted.add((n, s))
            touched = set()
        return chosen

    def _peek(
        self,
        shard: int,
        ns: list[int],
        asks: Sequence[_Ask],
        asked: list[dict[int, int]],
        now: int,
    ) -> ScriptCall:
        args: list[Arg] = [now, RELEASE_LIMIT]
        for n in ns:
            args += (asks[n].queue, asks[n].horizon_ms, asked[n][shard])
        return self._shards.call("peek", shard, args)

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
            calls.append(self._shards.call("release", shard, args))
        await self._shards.run_many(calls)

    def _purge(self, shard: int, now: int) -> ScriptCall:
        return self._shards.call("purge", shard, (now, PURGE_LIMIT))


def _in_order(by_shard: dict[int, Replies], chosen: Heads) -> list[tuple[bytes, bytes]]:
    """The (id, record) pairs shards leased, in the order `chosen` lists their members.

    A shard leases in the order it showed, under the lease seqs it was given in the chosen
    order: when every shard leased as many as were chosen there, the next pair of each chosen
    member's shard is its place, which is also the order of their lease seqs.
    """
    pairs = {shard: zip(flat[::2], flat[1::2], strict=True) for shard, flat in by_shard.items()}
    wanted = Counter(shard for _, shard in chosen)
    if all(len(flat) == 2 * wanted[shard] for shard, flat in by_shard.items()):
        return [next(pairs[shard]) for _, shard in chosen]
    claimed = list(itertools.chain.from_iterable(pairs.values()))
    place = {member[NEAR_ID_AT[member[0]] :]: n for n, (member, _) in enumerate(chosen)}
    if all(raw_id in place for raw_id, _ in claimed):
        claimed.sort(key=lambda pair: place[pair[0]])
    else:  # a shard leased other timers than it showed (they changed in between)
        claimed.sort(key=lambda pair: seq_of(pair[1]))
    return claimed
