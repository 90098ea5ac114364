"""How `RedisStore.add` and `add_many` send timers to add.lua, and read its answers.

A call carries up to `ADD_BATCH` timers of one shard as one argument (`RecordCodec.lines`), and
add.lua writes each key of the batch with one variadic command. A large batch goes out in
pipelines of `ADD_CHUNK` timers, a few in flight while the next is encoded.
"""

from __future__ import annotations

import asyncio
from asyncio import FIRST_COMPLETED
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias, cast

from tickwheel.errors import NotReplicated, TimerExists
from tickwheel.model import Timer
from tickwheel.stores.coalesce import Coalescer
from tickwheel.stores.codec import encode_spec
from tickwheel.stores.rebuild import as_scheduled
from tickwheel.stores.redis.record import RecordCodec, SeqSource, base36, pack_new
from tickwheel.stores.redis.shards import Shards
from tickwheel.stores.redis.store_base import RedisStoreBase

Added: TypeAlias = list[Timer | TimerExists]

ADD_BATCH = 200  # timers per add.lua call: keeps each script call short
ADD_CHUNK = 2_000  # timers per add_many pipeline (an add.lua call per shard)
ADD_IN_FLIGHT = 3  # add_many pipelines sent at once


@dataclass(frozen=True, slots=True)
class AddCall:
    """One add.lua call: the shard, the timers' positions in the batch, their lines."""

    shard: int
    positions: list[int]
    lines: str


def plan(
    timers: Sequence[Timer], offset: int, now_ms: int, first_seq: int, shards: Shards
) -> list[AddCall]:
    """Split `timers` (from position `offset` of a batch whose seqs start at `first_seq`) into
    add.lua calls, in order within each shard, distinct ids per call."""
    lines = RecordCodec.lines(timers, now_ms, SeqSource.formats(first_seq + offset, len(timers)))
    by_shard: dict[int, list[int]] = {}
    for n, timer in enumerate(timers, offset):
        by_shard.setdefault(shards.of(timer.id), []).append(n)
    calls = []
    for shard, positions in by_shard.items():
        chunk: list[int] = []
        ids: set[str] = set()
        for n in positions:
            if len(chunk) == ADD_BATCH or timers[n - offset].id in ids:
                calls.append(AddCall(shard, chunk, "".join([lines[i - offset] for i in chunk])))
                chunk, ids = [], set()
            chunk.append(n)
            ids.add(timers[n - offset].id)
        calls.append(AddCall(shard, chunk, "".join([lines[i - offset] for i in chunk])))
    return calls


async def add(
    shards: Shards,
    records: RecordCodec,
    timers: Sequence[Timer],
    *,
    replace: bool,
    now_ms: int,
    first_seq: int,
) -> Added:
    """Add `timers` (checked, their seqs taken from `first_seq`); return each as stored, or
    the `TimerExists` its id raised, in order."""
    results: list[Timer | TimerExists | None] = [None] * len(timers)

    async def send(calls: list[AddCall]) -> None:
        script_calls = [shards.call("add", c.shard, (now_ms, int(replace), c.lines)) for c in calls]
        for call, reply in zip(calls, await shards.run_many(script_calls), strict=True):
            for n, result in zip(call.positions, reply, strict=True):
                results[n] = _added(records, timers[n], now_ms, result)

    if len(timers) <= ADD_CHUNK or len({timer.id for timer in timers}) < len(timers):
        # one pipeline: nothing to overlap, or an id repeats and the calls must run in order,
        # so that the later add sees the earlier
        await send(plan(timers, 0, now_ms, first_seq, shards))
    else:
        # chunks in flight while the next is encoded, so encoding overlaps Redis's work
        in_flight: set[asyncio.Task[None]] = set()
        try:
            for start in range(0, len(timers), ADD_CHUNK):
                chunk = plan(timers[start : start + ADD_CHUNK], start, now_ms, first_seq, shards)
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


async def add_one(
    shards: Shards, records: RecordCodec, timer: Timer, *, replace: bool, now_ms: int, seq: int
) -> Timer | TimerExists:
    """`add` of one timer, as lean as it goes: its record encoded once, then add_one.lua, which
    stores it unless a record holds its id; only then (or to replace) add.lua decides."""
    spec = encode_spec(timer)
    record = pack_new(timer, base36(now_ms), SeqSource.format(seq), spec)
    if not replace:
        stored = await shards.run("add_one", timer.id, (now_ms, timer.id, record))
        if stored is not None:
            return as_scheduled(timer, now_ms)
    line = f"{timer.id}\n{record}\n"
    (result,) = await shards.run("add", timer.id, (now_ms, int(replace), line))
    return _added(records, timer, now_ms, result)


def _added(
    records: RecordCodec, timer: Timer, now_ms: int, result: int | list[int] | bytes
) -> Timer | TimerExists:
    """What add.lua's `result` for `timer` means: stored (with this attempt, and these
    deferrals) or taken."""
    if isinstance(result, int):
        return as_scheduled(timer, now_ms, result)
    if isinstance(result, list):
        return as_scheduled(timer, now_ms, *result)
    existing = records.unpack(timer.id, result)
    return existing if existing.spec() == timer.spec() else TimerExists(timer.id)


class RedisAdding(RedisStoreBase):
    """The add calls of `RedisStore`: one (group commit) or many."""

    _adding: Coalescer[Timer, Timer]
    _replacing: Coalescer[Timer, Timer]

    async def _add_one(self, timer: Timer, replace: bool) -> Timer:
        """Add one timer; concurrent adds share a round trip (group commit)."""
        await self._ready()
        try:
            return await (self._replacing if replace else self._adding).submit(timer)
        except NotReplicated as error:  # its own id: others' timers may share the round trip
            raise error.of((timer.id,)) from None

    async def _add_many(self, timers: Sequence[Timer], replace: bool) -> list[Timer]:
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

    async def _add(self, timers: Sequence[Timer], replace: bool) -> Added:
        """Add `timers`, their due times checked already (by `add` before it queued: a batch
        of others' timers must not fail for one of them)."""
        await self._ready()
        now = await self._now()
        first_seq = self._seq.take(len(timers))
        if len(timers) == 1:
            one = await add_one(
                self._shards, self._records, timers[0], replace=replace, now_ms=now, seq=first_seq
            )
            return [one]
        return await add(
            self._shards, self._records, timers, replace=replace, now_ms=now, first_seq=first_seq
        )

    async def _add_new(self, timers: Sequence[Timer]) -> Added:
        return await self._add(timers, False)

    async def _add_replacing(self, timers: Sequence[Timer]) -> Added:
        return await self._add(timers, True)
