"""A worker fires a schedule's occurrences: each once, never early, none skipped while it runs;
misfire decides the ones missed while no worker ran; occurrence callbacks say which schedule and
which occurrence they are."""

from __future__ import annotations

import asyncio

import pytest

from engine.support import running, until
from engine.test_worker import QUICK, Recorder
from tickwheel.callbacks import HttpSettings
from tickwheel.callbacks.http import HttpTarget
from tickwheel.engine import Worker
from tickwheel.model import Callback, occurrence_of
from tickwheel.schedule import Misfire, Schedule
from tickwheel.stores import Store
from tickwheel.testing.receiver import Receiver

CALLBACK = Callback(url="https://hooks.example.com/t")


def every_second(store: Store, schedule_id: str, **fields: object) -> Schedule:
    start = store.now_ms() // 1000 * 1000 + 1000
    values: dict[str, object] = {"callback": CALLBACK, "every_s": 1, "start_ms": start}
    values.update(fields)
    return Schedule(id=schedule_id, **values)  # type: ignore[arg-type]


async def test_every_occurrence_fires_once_on_time_while_a_worker_runs(store: Store) -> None:
    schedule = every_second(store, "tick")
    await store.add_schedule(schedule)
    target = Recorder(store)
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(4, timeout_s=8)
    nominal = [occurrence_of(f.timer_id) for f in target.fired]
    assert nominal[:4] == [("tick", schedule.start_ms + k * 1000) for k in range(4)]
    assert len(set(nominal)) == len(nominal)
    assert min(f.late_ms for f in target.fired) >= 0
    state = await store.get_schedule("tick")
    assert state is not None
    assert state.runs == len(target.fired)
    assert state.recent[0] == max(ms for _, ms in nominal if ms)


@pytest.mark.latency  # its on-time bound: the parallel part's load made it 981 ms late once
async def test_occurrences_missed_while_no_worker_ran_follow_misfire(store: Store) -> None:
    schedules = {m: every_second(store, m.value, misfire=m) for m in Misfire}
    for schedule in schedules.values():
        await store.add_schedule(schedule)
    start = schedules[Misfire.ONCE].start_ms
    # no worker while three occurrences come and go
    await asyncio.sleep(max(0, start + 2500 - store.now_ms()) / 1000)
    target = Recorder(store)
    async with running(Worker(store, target, QUICK)):
        await asyncio.sleep(max(0, start + 3600 - store.now_ms()) / 1000)
    fired: dict[str, list[int]] = {m.value: [] for m in Misfire}
    for f in target.fired:
        occurrence = occurrence_of(f.timer_id)
        assert occurrence is not None
        fired[occurrence[0]].append(occurrence[1] - start)
    assert fired == {"skip": [3000], "once": [0, 3000], "all": [0, 1000, 2000, 3000]}
    on_time = [f for f in target.fired if f.timer_id.endswith(f"@{start + 3000}")]
    assert all(0 <= f.late_ms < 500 for f in on_time), on_time


async def test_an_occurrence_callback_names_its_schedule_and_nominal_time(
    store: Store, receiver: Receiver
) -> None:
    hook = Callback(url=f"{receiver.url}/tick")
    schedule = every_second(store, "named", callback=hook, jitter_s=0.2)
    await store.add_schedule(schedule)
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    try:
        async with running(Worker(store, target, QUICK)):
            await until(lambda: receiver.count >= 2, timeout_s=8)
    finally:
        await target.close()
    first = receiver.received[0]
    assert first.headers["tickwheel-schedule-id"] == "named"
    nominal = int(first.headers["tickwheel-occurrence"])
    assert nominal == schedule.start_ms
    assert first.timer_id == f"named@{nominal}"
    assert first.due_ms == schedule.due_ms(nominal) >= nominal
    assert first.at_ms >= first.due_ms


async def test_a_worker_sees_a_schedule_made_while_it_runs(store: Store) -> None:
    target = Recorder(store)
    async with running(Worker(store, target, QUICK)):
        await asyncio.sleep(0.1)
        await store.add_schedule(every_second(store, "late"))
        await target.wait_for(2, timeout_s=6)
    assert [occurrence_of(f.timer_id) is not None for f in target.fired] == [True] * len(
        target.fired
    )
