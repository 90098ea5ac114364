"""Single `SqliteStore.add` calls from many tasks and threads share transactions, each answered
only once its transaction has committed; a lone add is written on its caller's thread when the
connection is free, and otherwise waits for nothing there."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from tickwheel.errors import Closed, TimerExists
from tickwheel.model import Timer
from tickwheel.stores.base import Lease
from tickwheel.stores.sqlite import SqliteStore
from tickwheel.stores.sqlite.group_commit import INLINE_MOST
from tickwheel.stores.sqlite.leasing import CLAIM_BATCH, ClaimAsk
from tickwheel.stores.sqlite.thread import INLINE_CHECKPOINT_EVERY

from .conftest import ManualClock

DUE_MS = int(time.time() * 1000) + 3_600_000  # an hour ahead of the store's wall clock
THREADS = 4
PER_THREAD = INLINE_MOST + 36  # a pass too large to write on its loop: the store's thread


def committed(path: Path, timer_id: str) -> bool:
    """Whether another connection sees `timer_id`: only a committed row is visible to it."""
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT 1 FROM timers WHERE id = ?", (timer_id,)).fetchone() is not None


def record_batches(store: SqliteStore) -> list[list[str]]:
    """Record the ids of every batch the store's group commit writes."""
    batches: list[list[str]] = []
    group = store._adding
    write = group._write

    def recording(timers: list[Timer]) -> list[Timer | Exception]:
        batches.append([timer.id for timer in timers])
        return list(write(timers))

    group._write = recording
    return batches


async def add_checked(store: SqliteStore, timer: Timer, seen: list[str]) -> None:
    """Add `timer` and check, as soon as it returns, that its row is committed."""
    stored = await store.add(timer)
    assert stored.id == timer.id
    if committed(store.path, timer.id):
        seen.append(timer.id)


async def test_concurrent_adds_share_transactions_each_committed_when_answered(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        await store.add(Timer(id="first", due_ms=DUE_MS))  # the file and schema exist
        batches = record_batches(store)
        seen: list[str] = []
        timers = [Timer(id=f"t{i:03}", due_ms=DUE_MS + i) for i in range(200)]
        await asyncio.gather(*(add_checked(store, timer, seen) for timer in timers))
        assert sorted(seen) == [timer.id for timer in timers], "answered only once committed"
        assert sorted(i for batch in batches for i in batch) == [t.id for t in timers]
        assert max(map(len, batches)) > 1, "adds in flight together share a transaction"
    finally:
        await store.close()


def in_thread(run: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def target() -> None:
        try:
            run()
        except BaseException as error:  # reported by the test's thread
            errors.append(error)

    return threading.Thread(target=target)


async def test_adds_from_threads_with_their_own_loops_share_transactions(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        await store.add(Timer(id="first", due_ms=DUE_MS))
        batches = record_batches(store)
        seen: list[str] = []
        errors: list[BaseException] = []
        start = threading.Barrier(THREADS)

        def adds(thread: int) -> None:
            async def main() -> None:
                start.wait()
                timers = [
                    Timer(id=f"th{thread}-{i:03}", due_ms=DUE_MS + i) for i in range(PER_THREAD)
                ]
                await asyncio.gather(*(add_checked(store, timer, seen) for timer in timers))

            asyncio.run(main())

        threads = [in_thread(lambda n=n: adds(n), errors) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        await asyncio.to_thread(lambda: [thread.join() for thread in threads])
        assert errors == []
        assert len(seen) == THREADS * PER_THREAD, "every add answered once committed"
        mixed = [batch for batch in batches if len({i.split("-")[0] for i in batch}) > 1]
        assert mixed, "a transaction carries adds of more than one thread"
        assert (await store.stats()).counts  # the store still serves its own loop
    finally:
        await store.close()


async def test_a_refused_add_fails_alone_in_its_batch(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        await store.add(Timer(id="taken", due_ms=DUE_MS))
        batches = record_batches(store)
        timers = [Timer(id=f"t{i}", due_ms=DUE_MS) for i in range(INLINE_MOST + 20)]
        timers.insert(10, Timer(id="taken", due_ms=DUE_MS + 1))  # another spec: a conflict
        results = await asyncio.gather(*map(store.add, timers), return_exceptions=True)
        assert [type(r) for r in results].count(TimerExists) == 1
        assert isinstance(results[10], TimerExists)
        assert all(committed(store.path, t.id) for t in timers if t.id != "taken")
        assert any("taken" in batch and len(batch) > 1 for batch in batches)
    finally:
        await store.close()


async def test_adds_of_one_loop_pass_commit_together_on_its_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        await store.add(Timer(id="taken", due_ms=DUE_MS))
        batches = record_batches(store)
        seen: list[str] = []
        timers = [Timer(id=f"t{i:02}", due_ms=DUE_MS) for i in range(INLINE_MOST - 1)]
        await asyncio.gather(*(add_checked(store, timer, seen) for timer in timers))
        assert sorted(seen) == [timer.id for timer in timers], "answered only once committed"
        assert batches == [], "written on the loop's thread, not the store's"
        # an id taken in such a pass: the others commit there, it is refused alone
        again = [Timer(id="taken", due_ms=DUE_MS + 1), Timer(id="free", due_ms=DUE_MS)]
        results = await asyncio.gather(*map(store.add, again), return_exceptions=True)
        assert isinstance(results[0], TimerExists)
        assert committed(store.path, "free")
        assert batches == [["taken"]]
    finally:
        await store.close()


async def test_an_add_on_a_closed_store_raises_closed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    await store.add(Timer(id="first", due_ms=DUE_MS))
    await store.close()
    with pytest.raises(Closed):
        await store.add(Timer(id="late", due_ms=DUE_MS))


def record_threads(store: SqliteStore) -> list[str]:
    """Record the name of the thread each lone inline add runs on."""
    names: list[str] = []
    inline = store._add_inline

    def recording(timer: Timer) -> Timer | None:
        names.append(threading.current_thread().name)
        return inline(timer)

    store._adding._inline = recording
    return names


async def test_a_lone_add_is_committed_on_the_callers_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        await store.add(Timer(id="first", due_ms=DUE_MS))  # the store's thread opens the file
        batches, threads = record_batches(store), record_threads(store)
        seen: list[str] = []
        for i in range(5):
            await add_checked(store, Timer(id=f"t{i}", due_ms=DUE_MS), seen)
        assert seen == [f"t{i}" for i in range(5)], "answered only once committed"
        assert batches == [], "nothing went to the store's thread"
        assert threads == [threading.current_thread().name] * 5
    finally:
        await store.close()


async def test_a_lone_add_over_a_taken_id_is_decided_on_the_stores_thread(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        first = await store.add(Timer(id="taken", due_ms=DUE_MS))
        batches = record_batches(store)
        assert await store.add(Timer(id="taken", due_ms=DUE_MS)) == first  # idempotent
        with pytest.raises(TimerExists):
            await store.add(Timer(id="taken", due_ms=DUE_MS + 1))
        assert batches == [["taken"], ["taken"]]
    finally:
        await store.close()


async def test_a_lone_add_never_waits_for_another_connections_write_lock(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    other = sqlite3.connect(tmp_path / "timers.db", isolation_level=None)
    try:
        await store.add(Timer(id="first", due_ms=DUE_MS))
        batches = record_batches(store)
        other.execute("BEGIN IMMEDIATE")  # another process holds SQLite's write lock
        adding = asyncio.create_task(store.add(Timer(id="later", due_ms=DUE_MS)))
        for _ in range(20):  # the loop keeps running while the add waits for the lock
            await asyncio.sleep(0.005)
        assert not adding.done()
        other.execute("COMMIT")
        assert (await adding).id == "later"
        assert batches == [["later"]], "the store's thread waited for the lock, not the loop"
    finally:
        other.close()
        await store.close()


async def test_a_lone_add_never_waits_for_the_connection(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        await store.add(Timer(id="first", due_ms=DUE_MS))
        batches = record_batches(store)
        with store._conn_lock:  # the store's thread is using the connection
            adding = asyncio.create_task(store.add(Timer(id="later", due_ms=DUE_MS)))
            await asyncio.sleep(0.05)
            assert not adding.done()
        assert (await adding).id == "later"
        assert batches == [["later"]]
    finally:
        await store.close()


async def test_inline_commits_leave_their_checkpoints_to_the_stores_thread(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    try:
        await store.add(Timer(id="first", due_ms=DUE_MS))
        threads = record_threads(store)
        checkpoints: list[str] = []
        checkpoint = store._checkpoint

        def recording() -> None:
            checkpoints.append(threading.current_thread().name)
            checkpoint()

        store._checkpoint = recording  # type: ignore[method-assign]
        for i in range(INLINE_CHECKPOINT_EVERY):
            await store.add(Timer(id=f"t{i}", due_ms=DUE_MS))
        assert store._checkpoints_off, "an inline commit does not checkpoint"
        assert set(threads) == {threading.current_thread().name}
        await store.stats()  # behind the checkpoint on the store's thread
        assert len(checkpoints) == 1
        assert checkpoints[0].startswith("tickwheel-sqlite")
        assert not store._checkpoints_off, "the store's thread checkpoints at commit again"
    finally:
        await store.close()


async def test_claims_made_while_the_thread_is_busy_share_a_transaction_each_its_own(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    store = SqliteStore(tmp_path / "timers.db", clock=clock)
    try:
        due = clock.now_ms + 1_000
        await store.add_many(
            [Timer(id=f"t{n:02}", due_ms=due + n, queue=f"q{n % 40:02}") for n in range(80)]
        )
        clock.advance(2_000)
        batches: list[list[str]] = []
        group = store._claims
        write = group._write

        def recording(asks: list[ClaimAsk]) -> Sequence[list[Lease] | BaseException]:
            batches.append([ask.queue for ask in asks])
            return write(asks)

        group._write = recording
        queues = [f"q{n:02}" for n in range(40)] + ["q00"]  # q00 twice: after its first claim
        claimed = await asyncio.gather(
            *(store.claim(queue, clock.now_ms, 1, 30_000) for queue in queues)
        )
        ids = [[lease.timer.id for lease in leases] for leases in claimed]
        assert ids == [[f"t{n:02}"] for n in range(40)] + [["t40"]]
        assert sorted(q for batch in batches for q in batch) == sorted(queues)
        assert len(batches) < len(queues) / 4, "claims in flight together share a transaction"
        assert max(map(len, batches)) <= CLAIM_BATCH
    finally:
        await store.close()
