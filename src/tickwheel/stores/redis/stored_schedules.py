"""How `RedisStore` keeps durable schedules: each in the shard of its id, beside its occurrences.

A schedule is a field of its shard's schedules hash holding `encode_schedule`'s text, and a
member of the shard's id index, which lists them in id order (`keys.py`). A change is planned
in Python (`schedule.plan_*`) from what was read, then schedule_step.lua applies it only if
what it was planned from is unchanged: the schedule's value, for an update the pending
occurrence's state, for an advance the lease. Otherwise it is read and planned again, at most
`CAS_ATTEMPTS` times. Lua never decodes a schedule; it compares and writes whole values.

`advance` is on every claim's path: occurrences of all shards are read in one pipeline and
written in another, one script call per shard (per `STEP_BATCH`); plain timers cost nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, TypeAlias

from tickwheel.errors import (
    CapReached,
    InvalidArgument,
    NotReplicated,
    ScheduleExists,
    StoreUnavailable,
)
from tickwheel.model import Timer, occurrence_id, occurrence_of
from tickwheel.schedule import Schedule, ScheduleState, plan_advance
from tickwheel.stores.base import Lease, SchedulePage, StoreSettings
from tickwheel.stores.contract import create_step, update_step
from tickwheel.stores.redis.record import RecordCodec, SeqSource
from tickwheel.stores.redis.shards import Shards
from tickwheel.stores.redis.store_base import RedisStoreBase
from tickwheel.stores.schedule_codec import ScheduleCodec, encode_schedule

CAS_ATTEMPTS = 5  # plans a change gets before it gives up on a schedule that keeps changing
STEP_BATCH = 500  # reads or steps per script call

APPLIED, LEASE_LOST, CHANGED = 1, 0, -1  # schedule_step.lua's answer per step
NOT_CHECKED = "*"  # the pending occurrence's state, when the step does not depend on it

# what schedule_get.lua read: the schedule's value and a timer's record, each None if absent
Read: TypeAlias = tuple[str | None, bytes | None]


def step_args(
    schedule_id: str,
    expect: str | None,
    value: str,
    *,
    cancel: str = "",
    cancel_state: str = NOT_CHECKED,
    occurrence: str = "",
    lease: Lease | None = None,
    drop: bool = False,
) -> str:
    """One step as schedule_step.lua reads it: a line of its short fields, then the long ones
    (the script's header says what each is)."""
    expect = expect or ""
    leased, token = ("", "") if lease is None else (lease.timer.id, lease.token)
    # lengths in bytes: a schedule or record may hold any character, though most are ASCII
    sizes = " ".join(
        [str(len(f) if f.isascii() else len(f.encode())) for f in (expect, value, occurrence)]
    )
    return (
        f"{schedule_id} {cancel} {cancel_state} {leased} {token} {int(drop)} {sizes}\n"
        f"{expect}{value}{occurrence}"
    )


class _Move(NamedTuple):
    """An occurrence's step in `advance`: what was read, the state to write, the successor."""

    schedule_id: str
    read: str
    state: ScheduleState
    add: Timer | None
    lease: Lease
    fire: bool


def holds(record: bytes | None, token: int) -> bool:
    """Whether a timer's record is leased under `token`, read from its header alone."""
    if record is None or not record.startswith(b"1,"):
        return False
    return int(record.split(b",", 2)[1]) == token


def _contended(schedule_id: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"schedule {schedule_id!r} changed under each of {CAS_ATTEMPTS} attempts to write it "
        "(other writers keep changing it); try again"
    )


class Schedules:
    """The schedules of one Redis store: reads, compare-and-set writes, listing."""

    def __init__(
        self,
        shards: Shards,
        records: RecordCodec,
        seq: SeqSource,
        settings: StoreSettings,
        now: Callable[[], Awaitable[int]],
    ) -> None:
        self._shards = shards
        self._records = records
        self._seq = seq
        self._settings = settings
        self._now = now
        self._codec = ScheduleCodec()

    async def add(self, schedule: Schedule) -> ScheduleState:
        schedule_id = schedule.id
        for _ in range(CAS_ATTEMPTS):
            now = await self._now()
            [(value, _)] = await self._read([(schedule_id, "")], now)
            if value is not None:
                existing = self._codec.decode(schedule_id, value)
                if existing.schedule.spec() == schedule.spec():
                    return existing
                raise ScheduleExists(schedule_id)
            cap = self._settings.max_schedules
            if await self.count() >= cap:
                raise CapReached("schedules", cap, "id")
            step = create_step(schedule, now, self._settings)
            state = step.state
            assert state is not None  # a creation always writes the schedule
            args = step_args(
                schedule_id, None, encode_schedule(state), occurrence=self._lines([step.add], now)
            )
            if await self._step(schedule_id, args, now) == APPLIED:
                return state
        raise _contended(schedule_id)

    async def count(self) -> int:
        """How many schedules the store holds: one script call per shard, in one pipeline."""
        shards = self._shards
        calls = [shards.schedule_call("schedule_count", n, ()) for n in range(shards.count)]
        return sum(int(n) for n in await shards.run_many(calls))

    async def get(self, schedule_id: str) -> ScheduleState | None:
        now = await self._now()
        [(value, _)] = await self._read([(schedule_id, "")], now)
        return None if value is None else self._codec.decode(schedule_id, value)

    async def update(self, schedule: Schedule) -> ScheduleState | None:
        schedule_id = schedule.id
        pending_id = ""  # the pending occurrence as last read: read it with the schedule
        # each attempt reads once more when the schedule's pending occurrence moved meanwhile
        for _ in range(2 * CAS_ATTEMPTS):
            now = await self._now()
            [(value, record)] = await self._read([(schedule_id, pending_id)], now)
            if value is None:
                return None
            state = self._codec.decode(schedule_id, value)
            pending_now = "" if state.next_ms is None else occurrence_id(schedule_id, state.next_ms)
            if pending_now != pending_id:
                pending_id = pending_now
                continue
            pending = None if record is None else self._records.unpack(pending_id, record)
            step = update_step(state, schedule, now, pending, self._settings)
            changed = step.state
            assert changed is not None  # an update always writes the schedule
            args = step_args(
                schedule_id,
                value,
                encode_schedule(changed),
                cancel=pending_id,
                cancel_state="" if record is None else record[:1].decode(),
                occurrence=self._lines([step.add], now),
            )
            if await self._step(schedule_id, args, now) == APPLIED:
                return changed
        raise _contended(schedule_id)

    async def delete(self, schedule_id: str) -> bool:
        for _ in range(CAS_ATTEMPTS):
            now = await self._now()
            [(value, _)] = await self._read([(schedule_id, "")], now)
            if value is None:
                return False
            state = self._codec.decode(schedule_id, value)
            pending = "" if state.next_ms is None else occurrence_id(schedule_id, state.next_ms)
            # a leased occurrence runs on (its advance finds no schedule); one scheduled goes
            args = step_args(schedule_id, value, "", cancel=pending)
            if await self._step(schedule_id, args, now) == APPLIED:
                return True
        raise _contended(schedule_id)

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        """Record the progress of every claimed occurrence among `leases`; say which to fire.

        Two round trips whatever the shards: one reads each occurrence's schedule with the
        occurrence's record, one applies every step; steps that met a change go again.
        """
        fire = [True] * len(leases)
        todo: list[tuple[int, str, int]] = []  # (position, schedule id, nominal ms)
        for n, lease in enumerate(leases):
            occurrence = occurrence_of(lease.timer.id)
            if occurrence is not None:
                todo.append((n, *occurrence))
        for _ in range(CAS_ATTEMPTS):
            if not todo:
                return fire
            now = await self._now()
            reads = await self._read([(sid, leases[n].timer.id) for n, sid, _ in todo], now)
            planned: list[tuple[int, str, int]] = []
            moves: list[_Move] = []
            for item, (value, record) in zip(todo, reads, strict=True):
                n, schedule_id, nominal_ms = item
                lease = leases[n]
                if not holds(record, lease.token):
                    fire[n] = False  # no longer this lease's: its holder decides
                    continue
                state = None if value is None else self._codec.decode(schedule_id, value)
                step = plan_advance(state, nominal_ms, now, lease.timer.first_claimed_ms)
                fire[n] = step.fire
                if step.state is None or value is None:
                    continue  # decided before, or no longer pending: it just fires
                planned.append(item)
                moves.append(_Move(schedule_id, value, step.state, step.add, lease, step.fire))
            if not moves:
                return fire
            lines = self._lines_of([move.add for move in moves], now)
            calls = [
                (
                    move.schedule_id,
                    step_args(
                        move.schedule_id,
                        move.read,
                        encode_schedule(move.state),
                        occurrence=line,
                        lease=move.lease,
                        drop=not move.fire,
                    ),
                )
                for move, line in zip(moves, lines, strict=True)
            ]
            todo = []
            for item, status in zip(planned, await self._steps(calls, now), strict=True):
                if status == LEASE_LOST:
                    fire[item[0]] = False
                elif status == CHANGED:
                    todo.append(item)
        if todo:
            raise _contended(todo[0][1])
        return fire

    async def page(self, limit: int, cursor: str | None) -> SchedulePage:
        """Page through the schedules shard by shard, by id within a shard (`limit` checked).

        The cursor's shard is asked alone first; if the page is not full, every shard after it
        at once. A cursor is ``<shard>:<ZRANGEBYLEX bound>``.
        """
        shard, bound = self._where(cursor)
        found: list[ScheduleState] = []
        asking = range(shard, shard + 1)
        while shard < self._shards.count and len(found) < limit:
            need = limit - len(found)
            calls = [
                self._shards.schedule_call("schedule_scan", s, (bound if s == shard else "-", need))
                for s in asking
            ]
            for s, flat in zip(asking, await self._shards.run_many(calls), strict=True):
                ids = [flat[i].decode() for i in range(0, len(flat), 2)]
                took = min(limit - len(found), len(ids))
                found += [self._codec.decode(ids[i], flat[2 * i + 1]) for i in range(took)]
                if took == len(ids) < need:
                    shard, bound = s + 1, "-"  # it had no more
                else:
                    shard, bound = s, f"({ids[took - 1]}"  # the page is full
                if len(found) == limit:
                    break
            asking = range(shard, self._shards.count)
        more = shard < self._shards.count
        return SchedulePage(found, f"{shard}:{bound}" if more else None)

    def _where(self, cursor: str | None) -> tuple[int, str]:
        if cursor is None:
            return 0, "-"
        shard, _, bound = cursor.partition(":")
        if not (
            shard.isdigit()
            and int(shard) < self._shards.count
            and (bound == "-" or (bound.startswith("(") and len(bound) > 1))
        ):
            raise InvalidArgument("cursor", f"not a cursor this store returned: {cursor!r}")
        return int(shard), bound

    def _lines(self, timers: Sequence[Timer | None], now: int) -> str:
        """The add.lua line of one new occurrence, '' for none."""
        return self._lines_of(timers, now)[0]

    def _lines_of(self, timers: Sequence[Timer | None], now: int) -> list[str]:
        """The add.lua lines of new occurrences, '' where there is none; seqs taken in order."""
        new = [timer for timer in timers if timer is not None]
        if not new:
            return [""] * len(timers)
        seqs = SeqSource.formats(self._seq.take(len(new)), len(new))
        encoded = iter(RecordCodec.lines(new, now, seqs))
        return ["" if timer is None else next(encoded) for timer in timers]

    async def _read(self, reads: Sequence[tuple[str, str]], now: int) -> list[Read]:
        """Read (schedule id, timer id) pairs ('' for no timer), one pipeline for all shards."""
        pairs = await self._by_shard(
            "schedule_get", [(sid, f"{sid} {tid}\n") for sid, tid in reads], now, width=2
        )
        return [(None if value is None else value.decode(), record) for value, record in pairs]

    async def _step(self, schedule_id: str, args: str, now: int) -> int:
        [status] = await self._steps([(schedule_id, args)], now)
        return status

    async def _steps(self, steps: Sequence[tuple[str, str]], now: int) -> list[int]:
        """Apply steps (schedule id, `step_args`), one pipeline for all shards; their statuses."""
        answers = await self._by_shard("schedule_step", steps, now, width=1)
        return [int(status) for (status,) in answers]

    async def _by_shard(
        self, script: str, items: Sequence[tuple[str, str]], now: int, width: int
    ) -> list[tuple[Any, ...]]:
        """Run `script` over items (schedule id, its text), one call per shard (per
        `STEP_BATCH`) taking their texts joined, all in one pipeline; return each item's
        `width` answers, in order. Items of one schedule run in their order."""
        by_shard: dict[int, list[int]] = {}
        for n, (schedule_id, _) in enumerate(items):
            by_shard.setdefault(self._shards.of(schedule_id), []).append(n)
        batches = [
            (shard, positions[start : start + STEP_BATCH])
            for shard, positions in by_shard.items()
            for start in range(0, len(positions), STEP_BATCH)
        ]
        calls = [
            self._shards.schedule_call(
                script, shard, (now, "".join([items[n][1] for n in positions]))
            )
            for shard, positions in batches
        ]
        answers: list[tuple[Any, ...]] = [()] * len(items)
        for (_, positions), reply in zip(batches, await self._shards.run_many(calls), strict=True):
            for i, n in enumerate(positions):
                answers[n] = tuple(reply[i * width : (i + 1) * width])
        return answers


class RedisSchedules(RedisStoreBase):
    """The schedule calls of `RedisStore`, and `advance`, which moves a series on."""

    _schedules: Schedules

    async def add_schedule(self, schedule: Schedule) -> ScheduleState:
        await self._ready()
        try:
            return await self._schedules.add(schedule)
        except NotReplicated as error:
            raise error.of((schedule.id,)) from None

    async def get_schedule(self, schedule_id: str) -> ScheduleState | None:
        await self._ready()
        return await self._schedules.get(schedule_id)

    async def _list_schedules(self, limit: int, cursor: str | None) -> SchedulePage:
        """Page through the schedules shard by shard, by id within a shard: each once."""
        await self._ready()
        return await self._schedules.page(limit, cursor)

    async def update_schedule(self, schedule: Schedule) -> ScheduleState | None:
        await self._ready()
        try:
            return await self._schedules.update(schedule)
        except NotReplicated as error:
            raise error.of((schedule.id,)) from None

    async def delete_schedule(self, schedule_id: str) -> bool:
        await self._ready()
        try:
            return await self._schedules.delete(schedule_id)
        except NotReplicated as error:
            raise error.of((schedule_id,)) from None

    async def advance(self, leases: Sequence[Lease]) -> list[bool]:
        """Move claimed occurrences' schedules on (`Schedules`): two round trips for any
        number of shards, none when no lease is an occurrence."""
        await self._ready()
        return await self._schedules.advance(leases)
