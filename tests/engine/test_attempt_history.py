"""A worker records each callback attempt in its timer's history: status or error class,
latency, the first KiB of the body with control characters replaced, the next due time, and
who sent it; on every store the engine fixtures open, through a real receiver."""

from __future__ import annotations

import os
import socket

from engine.support import running, until
from tickwheel.callbacks import HttpSettings, HttpTarget
from tickwheel.engine import Worker, WorkerSettings
from tickwheel.engine.attempt_log import attempt_of
from tickwheel.engine.outcome import Outcome, Verdict
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import Lease, MemoryStore, Store, StoreSettings
from tickwheel.stores.attempt_record import Attempt
from tickwheel.testing.receiver import Received, Reply

from .conftest import MakeReceiver

QUICK = WorkerSettings(lookahead_ms=100, lease_ms=10_000, grace_s=1.0)
RETRY = RetryPolicy(max_attempts=3, min_backoff_s=0.05, max_backoff_s=0.05, timeout_s=2.0)


def test_attempt_of_builds_what_the_constructor_builds() -> None:
    """`attempt_of` builds the named tuple directly, field by field: it must stay the whole
    record, in order, whatever fields `Attempt` gains."""
    timer = Timer(id="t", due_ms=1_000, callback=Callback(url="https://example.com/"))
    lease = Lease(timer, token=3, deadline_ms=9_000)
    outcome = Outcome(Verdict.RETRY, "HTTP 503", status=503, error_class=None, body="busy")
    built = attempt_of(lease, outcome, 2_000, 0.0123456, "host:1")
    expected = Attempt(
        attempt=3, at_ms=2_000, worker="host:1", outcome="retry", status=503, latency_ms=12.346,
        body="busy",
    )  # fmt: skip
    assert built is not None
    assert len(built) == len(Attempt._fields)
    assert built._asdict() == expected._asdict()
    assert attempt_of(lease, Outcome(Verdict.DEFER), 2_000, 0.0, "host:1") is None


async def settled(store: Store, timer_id: str, state: State) -> bool:
    timer = await store.get(timer_id)
    return timer is not None and timer.state is state


async def test_each_attempt_is_recorded_with_what_came_of_it(
    store: Store, make_receiver: MakeReceiver
) -> None:
    answers = iter(
        [
            Reply(503, body="busy\x1b[2J\nnow" + "x" * 2000),
            Reply(200, body="ok"),
        ]
    )
    receiver = await make_receiver(respond=lambda received: next(answers))
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    callback = Callback(url=f"{receiver.url}/hook")
    await store.add(Timer(id="t", due_ms=store.now_ms(), callback=callback, retry=RETRY))
    async with running(Worker(store, target, QUICK)):
        await until(lambda: settled(store, "t", State.DONE))
    await target.close()
    done, failed = await store.attempts("t")
    assert (done.attempt, done.outcome, done.status, done.body) == (2, "ack", 200, "ok")
    assert done.next_due_ms is None
    assert (failed.attempt, failed.outcome, failed.status, failed.error) == (1, "retry", 503, None)
    assert failed.body is not None
    # the first KiB, control characters replaced but for line feeds
    assert failed.body.startswith("busy\ufffd[2J\nnow")
    assert len(failed.body.encode()) <= 1024 + 2
    assert failed.next_due_ms is not None
    assert failed.at_ms < failed.next_due_ms <= done.at_ms
    assert failed.worker == done.worker == f"{socket.gethostname()}:{os.getpid()}"
    assert 0 < failed.latency_ms < 2000


async def test_a_failure_without_a_status_records_its_class_and_the_last_one_dead(
    store: Store,
) -> None:
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    # nothing listens on port 9 of loopback (discard): the connection is refused
    callback = Callback(url="http://127.0.0.1:9/hook")
    policy = RetryPolicy(max_attempts=2, min_backoff_s=0.01, max_backoff_s=0.01, timeout_s=1.0)
    await store.add(Timer(id="t", due_ms=store.now_ms(), callback=callback, retry=policy))
    async with running(Worker(store, target, QUICK)):
        await until(lambda: settled(store, "t", State.DEAD))
    await target.close()
    last, first = await store.attempts("t")
    assert (last.attempt, last.outcome, last.status, last.error) == (
        2,
        "dead",
        None,
        "connection_refused",
    )
    assert (first.outcome, first.error) == ("retry", "connection_refused")
    assert last.next_due_ms is None


async def test_a_store_keeping_no_history_records_none(make_receiver: MakeReceiver) -> None:
    store = MemoryStore(StoreSettings(attempt_history=0))
    receiver = await make_receiver(respond=lambda received: Reply(204))
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    await store.add(Timer(id="t", due_ms=store.now_ms(), callback=Callback(url=receiver.url)))
    async with running(Worker(store, target, QUICK)):
        await until(lambda: settled(store, "t", State.DONE))
    await target.close()
    assert await store.attempts("t") == []


async def test_acks_batched_together_each_record_their_own_attempt(
    store: Store, make_receiver: MakeReceiver
) -> None:
    def answer(received: Received) -> Reply:
        return Reply(200, body=f"for {received.timer_id}")

    receiver = await make_receiver(respond=answer)
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    now = store.now_ms()
    callback = Callback(url=receiver.url)
    await store.add_many([Timer(id=f"t{n}", due_ms=now, callback=callback) for n in range(50)])
    async with running(Worker(store, target, QUICK)):
        await until(lambda: all_done(store, 50))
    await target.close()
    for n in range(50):
        [attempt] = await store.attempts(f"t{n}")
        assert (attempt.status, attempt.body) == (200, f"for t{n}")


async def all_done(store: Store, count: int) -> bool:
    return (await store.stats()).counts.get(State.DONE, 0) == count
