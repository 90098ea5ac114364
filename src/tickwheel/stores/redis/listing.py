"""How `RedisStore.list` pages through the timers, and `RedisStore.stats` and
`RedisStore.queue_infos` count them.

The store keeps no index by id, which would cost memory for every pending timer, so a page
walks the shards in order: in each, dead letters by id (their set is ordered), leased timers by
id (sorted from the lease batches), the others in records-hash order as HSCAN gives it, with
SCAN's guarantee. The queue and due filters are applied by scan.lua, so a match to skip is a
timer that passed them. A cursor is ``<shard>:<matches to skip>:<where in the shard>``.

Each shard counts its timers per state and queue in its counts hash (``<code>|<queue>``
fields); stats.lua returns them with each queue's earliest due time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tickwheel.errors import InvalidArgument
from tickwheel.model import State, Timer
from tickwheel.stores.base import Page, Stats
from tickwheel.stores.codec import state_code, state_of
from tickwheel.stores.redis.record import RecordCodec
from tickwheel.stores.redis.shards import Shards
from tickwheel.stores.redis.store_base import RedisStoreBase

SCAN_STEPS = 50  # HSCAN steps (of ~100 records, ~2 ms of Redis) a scan.lua call takes at most


async def list_page(
    shards: Shards,
    records: RecordCodec,
    state: State | None,
    limit: int,
    cursor: str | None,
    now_ms: int,
    filters: tuple[str, str, str] = ("", "", ""),
) -> Page:
    """Return a page of timers in `state` (any if None) after `cursor` (arguments checked),
    passing `filters` (scan.lua's queue, due from and due before, '' for none).

    A timer present for the whole walk is listed; one added or deleted meanwhile may or may
    not be.
    """
    if state is State.LEASED:
        return await _list_leased(shards, records, now_ms, limit, cursor, filters)
    code = "" if state is None else str(state_code(state))
    begin = "-" if state is State.DEAD else "0"
    shard, skip, position = _where(shards, cursor, begin)
    timers: list[Timer] = []
    # the cursor's shard alone while it has more (on a large store it fills the page, or
    # a rare state takes it many calls); once it ends, every shard after it at once
    asked = 1
    while shard < shards.count and len(timers) < limit:
        need = limit - len(timers)
        asking = range(shard, min(shard + asked, shards.count))
        calls = [
            shards.call(
                "scan",
                s,
                (position, skip, need, code, now_ms, SCAN_STEPS, *filters)
                if s == asking[0]
                else (begin, 0, need, code, now_ms, SCAN_STEPS, *filters),
            )
            for s in asking
        ]
        asked = shards.count
        for s, (flat, after, after_skip, done) in zip(
            asking, await shards.run_many(calls), strict=True
        ):
            if len(flat) // 2 > limit - len(timers):
                shard, skip, position = s, 0, begin  # asked for too many: ask it again
                break
            timers += [
                records.unpack(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)
            ]
            if not done:
                shard, skip, position = s, after_skip, after.decode()
                asked = 1
                break
            shard, skip, position = s + 1, 0, begin
    more = shard < shards.count
    return Page(timers, f"{shard}:{skip}:{position}" if more else None)


async def _list_leased(
    shards: Shards,
    records: RecordCodec,
    now_ms: int,
    limit: int,
    cursor: str | None,
    filters: tuple[str, str, str],
) -> Page:
    """Leased timers shard by shard, by id within a shard: each shard's lease batches
    list its timers in flight, which the store sorts (Lua compares by locale)."""
    shard, _, position = _where(shards, cursor, "-")
    after = position[1:]  # "(<id>": the last one listed
    code = str(state_code(State.LEASED))
    asking = range(shard, shards.count)
    calls = [shards.call("scan", s, ("-", 0, limit, code, now_ms, 0, *filters)) for s in asking]
    timers: list[Timer] = []
    for s, (flat, *_) in zip(asking, await shards.run_many(calls), strict=True):
        held = sorted(
            (flat[i].decode(), flat[i + 1])
            for i in range(0, len(flat), 2)
            if s != shard or flat[i].decode() > after
        )
        need = limit - len(timers)
        timers += [records.unpack(timer_id, raw) for timer_id, raw in held[:need]]
        if len(held) > need:
            return Page(timers, f"{s}:0:({held[need - 1][0]}" if need else f"{s}:0:-")
    return Page(timers, None)


def _where(shards: Shards, cursor: str | None, begin: str) -> tuple[int, int, str]:
    """Read a `list` cursor: shard, matches to skip, and where in the shard."""
    if cursor is None:
        return 0, 0, begin
    shard, _, rest = cursor.partition(":")
    skip, _, position = rest.partition(":")
    if not (shard.isdigit() and skip.isdigit() and position and int(shard) < shards.count):
        raise InvalidArgument("cursor", f"not a cursor this store returned: {cursor!r}")
    return int(shard), int(skip), position


@dataclass(slots=True)
class Counts:
    """What stats.lua found over every shard: timers per queue and state, and each queue's
    earliest scheduled due time."""

    per_queue: dict[str, dict[State, int]] = field(default_factory=dict)
    earliest: dict[str, int] = field(default_factory=dict)

    def stats(self) -> Stats:
        counts = dict.fromkeys(State, 0)
        for per_state in self.per_queue.values():
            for state, n in per_state.items():
                counts[state] += n
        return Stats(counts, min(self.earliest.values(), default=None))


async def count(shards: Shards, now_ms: int) -> Counts:
    """Count the timers per queue and state and find each queue's earliest, over every shard."""
    replies: dict[int, list[Any]] = {}
    todo = list(range(shards.count))
    while todo:  # again where a slot too big to move in one call hid the earliest
        calls = [shards.call("stats", s, (now_ms,)) for s in todo]
        replies.update(zip(todo, await shards.run_many(calls), strict=True))
        todo = [s for s in todo if not replies[s][2]]
    found = Counts()
    for flat_counts, flat_dues, _ in replies.values():
        for i in range(0, len(flat_counts), 2):
            code, _, queue = flat_counts[i].decode().partition("|")
            per_state = found.per_queue.get(queue)
            if per_state is None:
                per_state = found.per_queue[queue] = dict.fromkeys(State, 0)
            per_state[state_of(int(code))] += int(flat_counts[i + 1])
        for i in range(0, len(flat_dues), 2):
            queue, due = flat_dues[i].decode(), int(flat_dues[i + 1])
            if due < found.earliest.get(queue, due + 1):
                found.earliest[queue] = due
    return found


class RedisListing(RedisStoreBase):
    """The list and count calls of `RedisStore`."""

    async def _list(
        self,
        state: State | None,
        limit: int,
        cursor: str | None,
        queue: str | None,
        due_from_ms: int | None,
        due_to_ms: int | None,
    ) -> Page:
        """Page through the timers shard by shard (`py` says in which order): a timer
        present for the whole walk is listed; one added or deleted meanwhile may or may not be."""
        await self._ready()
        now = await self._now()
        filters = (
            queue or "",
            "" if due_from_ms is None else str(due_from_ms),
            "" if due_to_ms is None else str(due_to_ms),
        )
        return await list_page(self._shards, self._records, state, limit, cursor, now, filters)

    async def stats(self) -> Stats:
        await self._ready()
        now = await self._now()
        await self._claimer.purge_all(now)
        return (await count(self._shards, now)).stats()
