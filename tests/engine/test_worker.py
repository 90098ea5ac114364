"""`Worker`: claims due timers, fires each on its ms through a target, settles by the outcome.

The target here is a real `Target` that records what it was asked to fire and answers with a
scripted outcome; the HTTP target is tested against a real receiver in test_http.py and in
test_failures.py.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.support import running, until
from tickwheel.engine import ACKED, Metrics, Outcome, Verdict, Worker, WorkerSettings
from tickwheel.errors import InvalidArgument, StoreUnavailable
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import Lease, MemoryStore, Store, StoreSettings
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.sqlite import SqliteStore

pytestmark = pytest.mark.latency  # tight bounds on real time: `make test` runs these after the rest

CALLBACK = Callback(url="https://hooks.example.com/t")
FAST_RETRY = RetryPolicy(max_attempts=5, min_backoff_s=0.01, max_backoff_s=0.02, timeout_s=1.0)
QUICK = WorkerSettings(lookahead_ms=200, lease_ms=10_000, grace_s=1.0)


@dataclass(frozen=True)
class Fired:
    timer_id: str
    attempt: int
    at_ms: int  # by the store's clock
    late_ms: int


class Recorder:
    """A target that records each attempt and answers with `answer(timer, attempt)`."""

    def __init__(
        self, store: Store, answer: Callable[[Timer, int], Outcome] = lambda t, a: ACKED
    ) -> None:
        self.store = store
        self.answer = answer
        self.fired: list[Fired] = []
        self.running = 0
        self.most_running = 0
        self.hold_s = 0.0
        self.changed = asyncio.Event()

    async def fire(self, timer: Timer, attempt: int) -> Outcome:
        now = self.store.now_ms()
        self.fired.append(Fired(timer.id, attempt, now, now - timer.due_ms))
        self.changed.set()
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if self.hold_s:
                await asyncio.sleep(self.hold_s)
            return self.answer(timer, attempt)
        finally:
            self.running -= 1

    async def close(self) -> None:
        pass

    async def wait_for(self, count: int, timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s):
            while len(self.fired) < count:
                self.changed.clear()
                await self.changed.wait()


async def state_of(store: Store, timer_id: str, state: State) -> bool:
    stored = await store.get(timer_id)
    return stored is not None and stored.state is state


async def leased(store: Store, count: int) -> bool:
    return (await store.stats()).counts.get(State.LEASED, 0) >= count


def timers(store: Store, count: int, spread_ms: int, **fields: Any) -> list[Timer]:
    start = store.now_ms() + 50
    return [
        Timer(due_ms=start + i * spread_ms // count, callback=CALLBACK, **fields)
        for i in range(count)
    ]


async def test_every_timer_fires_once_on_its_ms_and_never_early(store: Store) -> None:
    target = Recorder(store)
    added = await store.add_many(timers(store, 300, 1500))
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(300)
        await asyncio.sleep(0.1)  # nothing more arrives
    assert sorted(f.timer_id for f in target.fired) == sorted(t.id for t in added)
    assert min(f.late_ms for f in target.fired) >= 0
    lateness = sorted(f.late_ms for f in target.fired)
    assert lateness[len(lateness) * 9 // 10] <= 50, lateness[-20:]  # tolerant: a busy CI box
    stats = await store.stats()
    assert stats.counts[State.DONE] == 300


async def test_a_timer_added_for_now_fires_within_a_few_ms_of_an_idle_worker(
    store: Store,
) -> None:
    target = Recorder(store)
    async with running(Worker(store, target, WorkerSettings(lookahead_ms=200, lease_ms=10_000))):
        await asyncio.sleep(0.3)  # the worker found nothing and sleeps
        timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK))
        added_ms = store.now_ms()
        await target.wait_for(1)
        fired_ms = store.now_ms()
    assert target.fired[0].timer_id == timer.id
    assert fired_ms - added_ms <= 100  # a few ms here; a wide margin for a loaded CI machine


async def test_past_due_timers_are_caught_up_not_skipped(store: Store) -> None:
    target = Recorder(store)
    now = store.now_ms()
    past = await store.add_many(
        [Timer(due_ms=now - age, callback=CALLBACK) for age in (1, 1000, 3_600_000)]
    )
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(3)
    assert {f.timer_id for f in target.fired} == {t.id for t in past}


async def test_failed_attempts_retry_with_backoff_then_succeed(store: Store) -> None:
    def fail_three_times(timer: Timer, attempt: int) -> Outcome:
        return ACKED if attempt == 4 else Outcome(Verdict.RETRY, f"HTTP 500: try {attempt}")

    target = Recorder(store, fail_three_times)
    timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK, retry=FAST_RETRY))
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(4)
        await asyncio.sleep(0.05)
    assert [f.attempt for f in target.fired] == [1, 2, 3, 4]
    assert all(f.late_ms >= 0 for f in target.fired)
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.state is State.DONE


async def test_a_permanent_failure_dead_letters_at_once_with_the_error(store: Store) -> None:
    target = Recorder(store, lambda t, a: Outcome(Verdict.KILL, "HTTP 400: bad request"))
    timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK, retry=FAST_RETRY))
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(1)
        await asyncio.sleep(0.1)
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.state is State.DEAD
    assert stored.last_error == "HTTP 400: bad request"
    assert len(target.fired) == 1


async def test_exhausted_retries_dead_letter_and_replay_fires_again(store: Store) -> None:
    failing = True

    def answer(timer: Timer, attempt: int) -> Outcome:
        return Outcome(Verdict.RETRY, "HTTP 503: down") if failing else ACKED

    target = Recorder(store, answer)
    policy = RetryPolicy(max_attempts=3, min_backoff_s=0.01, max_backoff_s=0.01, timeout_s=1)
    timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK, retry=policy))
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(3)
        await asyncio.sleep(0.1)
        stored = await store.get(timer.id)
        assert stored is not None
        assert stored.state is State.DEAD
        assert stored.last_error == "gave up after attempt 3: HTTP 503: down"
        failing = False
        assert await store.replay(timer.id)
        await target.wait_for(4)
        await asyncio.sleep(0.05)
    assert len(target.fired) == 4
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.state is State.DONE


async def test_retry_after_from_the_server_delays_the_next_attempt(store: Store) -> None:
    def answer(timer: Timer, attempt: int) -> Outcome:
        return ACKED if attempt == 2 else Outcome(Verdict.RETRY, "HTTP 429", retry_after_s=0.5)

    target = Recorder(store, answer)
    policy = RetryPolicy(max_attempts=3, min_backoff_s=0.01, max_backoff_s=2, timeout_s=1)
    await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK, retry=policy))
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(2)
    assert target.fired[1].at_ms - target.fired[0].at_ms >= 500


async def test_a_timer_without_callback_is_dead_lettered_by_an_http_worker(store: Store) -> None:
    target = Recorder(store)
    timer = await store.add(Timer(due_ms=store.now_ms(), payload={"to": "x"}))
    async with running(Worker(store, target, QUICK)):
        await until(lambda: state_of(store, timer.id, State.DEAD))
    stored = await store.get(timer.id)
    assert stored is not None
    assert not target.fired
    assert stored.last_error is not None
    assert "no callback" in stored.last_error


async def test_stop_hands_back_unfired_timers_at_their_own_due_time(store: Store) -> None:
    target = Recorder(store)
    # all within the lookahead, and far enough ahead to be claimed before they are due
    due_ms = store.now_ms() + 1000
    added = await store.add_many([Timer(due_ms=due_ms + n, callback=CALLBACK) for n in range(20)])
    worker = Worker(store, target, WorkerSettings(lookahead_ms=5000, lease_ms=60_000))
    task = asyncio.create_task(worker.run())
    await until(lambda: leased(store, 20))
    worker.stop()
    await task
    assert not target.fired
    for timer in added:
        stored = await store.get(timer.id)
        assert stored is not None
        assert (stored.state, stored.due_ms) == (State.SCHEDULED, timer.due_ms)
    # another worker fires them all, on time
    second = Recorder(store)
    async with running(Worker(store, second, QUICK)):
        await second.wait_for(20)
    assert {f.timer_id for f in second.fired} == {t.id for t in added}


async def test_stop_waits_for_running_callbacks_then_hands_back_the_rest(store: Store) -> None:
    target = Recorder(store)
    target.hold_s = 5.0  # longer than the grace period
    timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK))
    worker = Worker(store, target, WorkerSettings(lookahead_ms=200, lease_ms=60_000, grace_s=0.3))
    task = asyncio.create_task(worker.run())
    await target.wait_for(1)
    worker.stop()
    async with asyncio.timeout(3):
        await task
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.state is State.SCHEDULED
    assert stored.due_ms <= store.now_ms()


async def test_back_pressure_holds_at_most_max_in_flight(store: Store) -> None:
    target = Recorder(store)
    target.hold_s = 0.02
    await store.add_many(timers(store, 100, 10))
    settings = WorkerSettings(lookahead_ms=200, lease_ms=10_000, max_in_flight=10, batch=5)
    worker = Worker(store, target, settings)
    most_leased = 0
    async with running(worker):
        while len(target.fired) < 100:
            leased = (await store.stats()).counts.get(State.LEASED, 0)
            most_leased = max(most_leased, leased)
            await asyncio.sleep(0.005)
    assert most_leased <= 10
    assert target.most_running <= 10


async def test_concurrency_bounds_callbacks_running_at_once(store: Store) -> None:
    target = Recorder(store)
    target.hold_s = 0.05
    await store.add_many(timers(store, 40, 1))
    async with running(Worker(store, target, WorkerSettings(lookahead_ms=200, concurrency=4))):
        await target.wait_for(40)
    assert target.most_running == 4


async def test_a_long_callback_keeps_its_lease_past_lease_ms(store: Store) -> None:
    target = Recorder(store)
    target.hold_s = 1.5
    timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK))
    settings = WorkerSettings(lookahead_ms=100, lease_ms=500)
    async with running(Worker(store, target, settings)):
        await target.wait_for(1)
        await asyncio.sleep(0.8)  # past the first lease
        # a second claimer finds nothing: the lease is renewed while the callback runs
        assert await store.claim("default", store.now_ms(), 10, 1000) == []
        await asyncio.sleep(1.0)
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.state is State.DONE
    assert len(target.fired) == 1


async def test_two_workers_share_a_store_without_double_firing(store: Store) -> None:
    first, second = Recorder(store), Recorder(store)
    added = await store.add_many(timers(store, 400, 1000))
    async with running(Worker(store, first, QUICK)), running(Worker(store, second, QUICK)):
        await until(lambda: len(first.fired) + len(second.fired) >= 400)
        await asyncio.sleep(0.2)
    ids = [f.timer_id for f in first.fired + second.fired]
    assert sorted(ids) == sorted(t.id for t in added)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("queues", ()),
        ("queues", "default"),
        ("batch", 0),
        ("lease_ms", 100),
        ("grace_s", float("nan")),
        ("concurrency", True),
    ],
)
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(InvalidArgument) as info:
        WorkerSettings(**{field: value})
    assert info.value.argument == field


async def test_metrics_count_what_the_worker_did(store: Store) -> None:
    def answer(timer: Timer, attempt: int) -> Outcome:
        if timer.payload == "dies":
            return Outcome(Verdict.KILL, "HTTP 404")
        return ACKED if attempt > 1 or timer.payload != "flaky" else Outcome(Verdict.RETRY, "5xx")

    target = Recorder(store, answer)
    now = store.now_ms()
    for payload in ("ok", "ok", "flaky", "dies"):
        await store.add(Timer(due_ms=now, callback=CALLBACK, payload=payload, retry=FAST_RETRY))
    metrics = Metrics()
    async with running(Worker(store, target, QUICK, metrics=metrics)):
        await target.wait_for(5)
        await until(lambda: state_count(store, State.DONE, 3))

    def sample(name: str) -> float:
        value = metrics.registry.get_sample_value(name, {"queue": "default"})
        return 0.0 if value is None else value

    assert sample("tickwheel_fired_total") == 5
    assert sample("tickwheel_acked_total") == 3
    assert sample("tickwheel_retried_total") == 1
    assert sample("tickwheel_dead_lettered_total") == 1
    assert sample("tickwheel_lateness_seconds_count") == 5
    every = metrics.registry.get_sample_value(
        "tickwheel_lateness_seconds_bucket", {"queue": "default", "le": "+Inf"}
    )
    within_a_minute = metrics.registry.get_sample_value(
        "tickwheel_lateness_seconds_bucket", {"queue": "default", "le": "60"}
    )
    assert every == within_a_minute == 5
    assert metrics.registry.get_sample_value("tickwheel_in_flight") == 0


async def state_count(store: Store, state: State, count: int) -> bool:
    return (await store.stats()).counts.get(state, 0) >= count


@pytest.mark.parametrize(
    "error", [UnicodeError("label empty or too long"), RuntimeError("a bug in the target")]
)
async def test_an_exception_from_the_target_is_a_failed_attempt_that_ends_dead(
    store: Store, error: Exception
) -> None:
    def answer(timer: Timer, attempt: int) -> Outcome:
        raise error

    target = Recorder(store, answer)
    policy = RetryPolicy(max_attempts=2, min_backoff_s=0.01, max_backoff_s=0.02, timeout_s=1)
    timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK, retry=policy))
    async with running(Worker(store, target, QUICK)):
        await until(lambda: state_of(store, timer.id, State.DEAD), timeout_s=5)
    assert [f.attempt for f in target.fired] == [1, 2]
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.last_error == f"gave up after attempt 2: {type(error).__name__}: {error}"


HORIZON_MS = 60_000


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def near_horizon_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Store]:
    """A store on each backend that accepts due times at most a minute ahead."""
    settings = StoreSettings(max_horizon_ms=HORIZON_MS)
    opened: Store
    if request.param == "memory":
        opened = MemoryStore(settings)
    elif request.param == "sqlite":
        opened = SqliteStore(tmp_path / "timers.db", settings)
    else:
        url = request.getfixturevalue("redis_server").url
        opened = RedisStore.from_url(url, settings, prefix=f"h{uuid.uuid4().hex[:10]}")
    yield opened
    await opened.close()


async def test_a_backoff_past_the_store_s_horizon_retries_at_the_horizon(
    near_horizon_store: Store,
) -> None:
    store = near_horizon_store
    target = Recorder(store, lambda t, a: Outcome(Verdict.RETRY, "HTTP 503: down"))
    policy = RetryPolicy(max_attempts=5, min_backoff_s=3600, max_backoff_s=3600, timeout_s=1)
    timer = await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK, retry=policy))
    async with running(Worker(store, target, WorkerSettings(lookahead_ms=100, lease_ms=500))):
        await target.wait_for(1)
        failed_ms = store.now_ms()
        await until(lambda: state_of(store, timer.id, State.SCHEDULED), timeout_s=3)
        await asyncio.sleep(1.2)  # over two leases: an unsettled timer would fire again
    assert len(target.fired) == 1
    stored = await store.get(timer.id)
    assert stored is not None
    assert stored.last_error == "HTTP 503: down"
    assert failed_ms + HORIZON_MS - 1000 <= stored.due_ms <= store.now_ms() + HORIZON_MS


class Hostile(MemoryStore):
    """A memory store that can hand out short leases and fail extends, by timer payload."""

    def __init__(self, *, claim_lease_ms: int | None = None) -> None:
        super().__init__()
        self.claim_lease_ms = claim_lease_ms
        self.extend_errors: dict[Any, Exception] = {}
        self.extended: list[tuple[Any, int]] = []  # (payload, at_ms)

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        return await super().claim(queue, horizon_ms, limit, self.claim_lease_ms or lease_ms)

    async def extend(self, lease: Lease, lease_ms: int) -> Lease:
        error = self.extend_errors.get(lease.timer.payload)
        if error is not None:
            raise error
        self.extended.append((lease.timer.payload, self.now_ms()))
        return await super().extend(lease, lease_ms)


async def test_a_failed_renewal_does_not_stop_the_renewal_of_other_leases() -> None:
    store = Hostile()
    store.extend_errors["breaks"] = RuntimeError("a bug in the store")
    target = Recorder(store)
    target.hold_s = 2.5  # five leases
    now = store.now_ms()
    await store.add(Timer(due_ms=now, callback=CALLBACK, payload="breaks", retry=FAST_RETRY))
    # another receiver: one never heard from gets one call at a time until it answers
    elsewhere = Callback(url="https://elsewhere.example.com/t")
    kept = await store.add(
        Timer(due_ms=now + 1, callback=elsewhere, payload="kept", retry=FAST_RETRY)
    )
    async with running(Worker(store, target, WorkerSettings(lookahead_ms=100, lease_ms=500))):
        await until(lambda: state_of(store, kept.id, State.DONE), timeout_s=6)
    assert [f.attempt for f in target.fired if f.timer_id == kept.id] == [1]


async def test_a_timer_whose_lease_is_about_to_lapse_is_renewed_before_it_fires() -> None:
    store = Hostile(claim_lease_ms=300)  # as if the claim's reply took most of the lease
    store.extend_errors["stuck"] = StoreUnavailable("extend: connection refused")
    target = Recorder(store)
    now = store.now_ms()
    for payload in ("renewed", "stuck"):
        await store.add(Timer(due_ms=now + 50, callback=CALLBACK, payload=payload))
    async with running(Worker(store, target, WorkerSettings(lookahead_ms=200, lease_ms=10_000))):
        await target.wait_for(1)
        await asyncio.sleep(1.0)  # the stuck timer's lease lapses, is claimed again, ...
    [fired] = target.fired
    stored = await store.get(fired.timer_id)
    assert stored is not None
    assert stored.payload == "renewed"
    renewed_at_ms = [at_ms for payload, at_ms in store.extended if payload == "renewed"]
    assert renewed_at_ms
    assert renewed_at_ms[0] <= fired.at_ms


class CountsRenewals(MemoryStore):
    """A memory store that notes how many leases each `extend_many` call renews."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    async def extend_many(self, leases: Sequence[Lease], lease_ms: int) -> list[Lease | None]:
        self.batches.append(len(leases))
        return await super().extend_many(leases, lease_ms)


async def test_the_leases_a_worker_holds_are_renewed_together() -> None:
    store = CountsRenewals()
    target = Recorder(store)
    target.hold_s = 1.5  # the first call holds its origin; the rest wait, held, in the worker
    now = store.now_ms()
    await store.add_many(
        [Timer(due_ms=now, callback=CALLBACK, payload=n, retry=FAST_RETRY) for n in range(30)]
    )
    async with running(Worker(store, target, WorkerSettings(lookahead_ms=100, lease_ms=1000))):
        await until(lambda: sum(store.batches) >= 30, timeout_s=5)
    # a store call per renewal pass, not one per lease
    assert len(store.batches) * 4 <= sum(store.batches)


class SyncsLate(MemoryStore):
    """A store with a server clock whose first two reads meet an outage."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs = 0
        self.claims_before_sync = 0

    async def sync_clock(self) -> None:
        self.syncs += 1
        if self.syncs < 3:
            raise StoreUnavailable("TIME: connection refused")

    async def claim(self, queue: str, horizon_ms: int, limit: int, lease_ms: int) -> list[Lease]:
        if self.syncs < 3:
            self.claims_before_sync += 1
        return await super().claim(queue, horizon_ms, limit, lease_ms)


async def test_a_store_s_server_clock_is_read_before_anything_is_claimed() -> None:
    store = SyncsLate()
    target = Recorder(store)
    await store.add(Timer(due_ms=store.now_ms(), callback=CALLBACK))
    async with running(Worker(store, target, QUICK)):
        await target.wait_for(1)
    assert store.syncs == 3
    assert store.claims_before_sync == 0


async def test_an_overloaded_worker_leaves_its_backlog_in_the_store_and_fires_in_due_order() -> (
    None
):
    store = MemoryStore()
    recorder = Recorder(store)
    recorder.hold_s = 0.01
    settings = WorkerSettings(batch=20, concurrency=4, lookahead_ms=100, lease_ms=1000, grace_s=1)
    due_ms = store.now_ms() + 100
    timers = [Timer(id=f"t{n:03}", due_ms=due_ms, callback=CALLBACK) for n in range(300)]
    await store.add_many(timers)
    worker = Worker(store, recorder, settings)
    most_held = 0
    async with running(worker):
        async with asyncio.timeout(20):
            while len(recorder.fired) < len(timers):
                most_held = max(most_held, worker.metrics.in_flight)
                await asyncio.sleep(0.002)
    # the rest waited in the store, not on leases here: concurrency + 2 x batch, and as much
    # again for a queue whose callbacks are answered
    assert most_held <= 2 * (4 + 2 * 20)
    fired = [f.timer_id for f in recorder.fired]
    assert len(set(fired)) == len(fired) == len(timers)
    assert worker.metrics.leases_lost == 0


async def test_a_full_worker_still_claims_the_next_timer_of_a_prompt_queue() -> None:
    store = MemoryStore()
    recorder = Recorder(store)
    settings = WorkerSettings(batch=20, concurrency=4, lookahead_ms=3000, lease_ms=10_000)
    worker = Worker(store, recorder, settings)
    async with running(worker):
        await store.add(Timer(due_ms=store.now_ms(), queue="payments", callback=CALLBACK))
        await recorder.wait_for(1)  # its callbacks are answered
        now = store.now_ms()
        # over 30 queues: past half its room, a queue new to the worker claims one at a time
        flood = [
            Timer(due_ms=now + 2000, queue=f"flood-{n % 30}", callback=CALLBACK) for n in range(300)
        ]
        await store.add_many(flood)
        await until(lambda: worker.metrics.in_flight >= 4 + 2 * 20)  # the worker is full
        payment = await store.add(
            Timer(due_ms=store.now_ms() + 300, queue="payments", callback=CALLBACK)
        )
        await recorder.wait_for(2)
        second = recorder.fired[1]
        assert second.timer_id == payment.id
        assert 0 <= second.late_ms < 200
        await recorder.wait_for(len(flood) + 2)


async def test_a_timer_to_a_target_that_answers_goes_out_first_beside_a_flood_to_new_ones() -> None:
    store = MemoryStore()
    recorder = Recorder(store)
    async with running(Worker(store, recorder, QUICK)):
        await store.add(Timer(id="warm", due_ms=store.now_ms(), callback=CALLBACK))
        await recorder.wait_for(1)  # hooks.example.com has answered
        due_ms = store.now_ms() + 400
        # added first, due at the same ms: claim order would send every one of them first
        flood = [
            Timer(
                id=f"new-{n}", due_ms=due_ms, callback=Callback(url=f"https://n{n}.example.net/t")
            )
            for n in range(500)
        ]
        await store.add_many([*flood, Timer(id="known", due_ms=due_ms, callback=CALLBACK)])
        await recorder.wait_for(2 + len(flood))
    assert [fired.timer_id for fired in recorder.fired[:2]] == ["warm", "known"]
