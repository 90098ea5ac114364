"""What only the SQLite store promises: one file that survives kill -9, shared by processes."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tickwheel.errors import Closed, LeaseLost, StoreUnavailable
from tickwheel.model import State, Timer
from tickwheel.schedule import Schedule
from tickwheel.stores import Lease, StoreSettings
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.sqlite import SqliteStore, queries, queue_table, schema

from .conftest import ManualClock

SRC = Path(__file__).resolve().parents[2] / "src"

ADD_THEN_HANG = """
import asyncio, sys, time
from tickwheel.model import Timer
from tickwheel.stores.sqlite import SqliteStore

async def main():
    store = SqliteStore(sys.argv[1])
    for n in range(1000):
        await store.add(Timer(id=f"t{n:04}", due_ms=1_700_000_000_000 + n))
    print("added", flush=True)
    time.sleep(60)  # killed here: the store is never closed

asyncio.run(main())
"""

CLAIM_UNTIL_EMPTY = """
import asyncio, sys, time
from tickwheel.stores.sqlite import SqliteStore

async def main():
    store = SqliteStore(sys.argv[1])
    await store.stats()  # connected before the start line, so both start claiming together
    time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
    while leases := await store.claim("default", store.now_ms(), 3, 600_000):
        print("\\n".join(lease.timer.id for lease in leases))
    await store.close()

asyncio.run(main())
"""

HOLD_THE_LOCK_IN_TURNS = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
end = time.monotonic() + float(sys.argv[2])
conn.execute("BEGIN IMMEDIATE")
print("holding", flush=True)
while time.monotonic() < end:
    time.sleep(0.04)
    conn.execute("COMMIT")
    time.sleep(0.001)  # the gap another connection must find
    conn.execute("BEGIN IMMEDIATE")
conn.execute("COMMIT")
print("done", flush=True)
"""


async def _python(code: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )


async def test_a_killed_process_loses_no_committed_timer(tmp_path: Path) -> None:
    path = tmp_path / "timers.db"
    child = await _python(ADD_THEN_HANG, str(path))
    assert child.stdout is not None
    line = await asyncio.wait_for(child.stdout.readline(), timeout=30)
    child.kill()  # SIGKILL: no atexit, no close, no checkpoint
    assert await child.wait() == -9
    assert line == b"added\n"

    store = SqliteStore(path)
    try:
        assert (await store.stats()).counts[State.SCHEDULED] == 1000
        page = await store.list(limit=1000)
        assert [t.id for t in page.timers] == [f"t{n:04}" for n in range(1000)]
    finally:
        await store.close()


async def test_processes_sharing_a_file_never_claim_one_timer_twice(tmp_path: Path) -> None:
    path = tmp_path / "timers.db"
    store = SqliteStore(path)
    ids = [f"t{n:04}" for n in range(2000)]
    now = store.now_ms()
    await asyncio.gather(*(store.add(Timer(id=i, due_ms=now - 1000)) for i in ids))

    start = time.time() + 1.5  # both children past their imports by then
    children = [await _python(CLAIM_UNTIL_EMPTY, str(path), str(start)) for _ in range(2)]
    outputs = await asyncio.wait_for(asyncio.gather(*(c.communicate() for c in children)), 60)
    claimed = []
    for child, (out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err.decode()
        claimed.append(out.decode().split())

    first, second = claimed
    assert len(first) + len(second) == len(ids)
    assert sorted(first + second) == ids
    # each claimed some, or they did not run side by side and the test proved nothing
    assert first, "the second process claimed everything"
    assert second, "the first process claimed everything"
    stats = await store.stats()
    assert stats.counts[State.LEASED] == len(ids)
    assert {t.attempt for t in (await store.list(State.LEASED, limit=1000)).timers} == {1}
    await store.close()


async def test_reopening_the_file_keeps_every_state(tmp_path: Path) -> None:
    path, clock = tmp_path / "timers.db", ManualClock()
    settings = StoreSettings(retention_ms=60_000)
    first = SqliteStore(path, settings, clock=clock)
    for timer_id in "abcd":
        await first.add(Timer(id=timer_id, due_ms=clock.now_ms, payload={"n": timer_id}))
    await first.add(Timer(id="e", due_ms=clock.now_ms + 5000))
    acked, killed, retried, held = await first.claim("default", clock.now_ms, 4, 10_000)
    await first.ack(acked)
    await first.kill(killed, "HTTP 400")
    await first.retry(retried, clock.now_ms + 1000, "HTTP 503")
    before = (await first.list()).timers
    await first.close()

    second = SqliteStore(path, settings, clock=clock)
    try:
        assert (await second.list()).timers == before
        assert [t.state for t in before] == [
            State.DONE,
            State.DEAD,
            State.SCHEDULED,
            State.LEASED,
            State.SCHEDULED,
        ]
        # the lease taken before the restart still expires, and its token goes stale
        clock.advance(10_000)
        again = await second.claim("default", clock.now_ms, 10, 10_000)
        assert [(lease.timer.id, lease.token) for lease in again] == [("d", 2), ("c", 2), ("e", 1)]
        with pytest.raises(LeaseLost):
            await second.ack(held)
        assert await second.replay("b") is True
        done = await second.get("a")
        assert done is not None
        assert done.state is State.DONE
    finally:
        await second.close()


async def test_construction_does_no_io_and_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "timers.db"
    store = SqliteStore(path)
    assert not path.exists()
    await store.get("x")
    await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
    conn.close()


async def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    await store.add(Timer(id="t", due_ms=0))
    await store.close()
    await store.close()
    with pytest.raises(Closed):
        await store.get("t")
    with pytest.raises(Closed):
        await store.claim("default", 0, 1, 1000)


async def test_an_unusable_file_is_store_unavailable(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path)  # a directory
    with pytest.raises(StoreUnavailable) as caught:
        await store.get("t")
    assert isinstance(caught.value.__cause__, sqlite3.Error)
    await store.close()


async def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "timers.db"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    store = SqliteStore(path)
    with pytest.raises(StoreUnavailable, match="schema version 99"):
        await store.stats()
    await store.close()


async def test_a_lock_held_too_long_is_store_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "BUSY_TIMEOUT_MS", 100)
    path = tmp_path / "timers.db"
    store = SqliteStore(path)
    await store.stats()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            await store.add(Timer(due_ms=0))
        assert (await store.stats()).counts[State.SCHEDULED] == 0  # readers are not blocked
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await store.add(Timer(due_ms=0))
    await store.close()


@pytest.mark.latency
async def test_a_write_takes_a_short_gap_between_another_process_transactions(
    tmp_path: Path,
) -> None:
    # SQLite's own busy handler sleeps up to 100 ms between tries and missed such gaps
    path = tmp_path / "timers.db"
    store = SqliteStore(path)
    await store.stats()
    holder = await _python(HOLD_THE_LOCK_IN_TURNS, str(path), "4")
    assert holder.stdout is not None
    assert await holder.stdout.readline() == b"holding\n"
    began = time.monotonic()
    await store.add(Timer(id="waited", due_ms=0))
    waited_s = time.monotonic() - began
    assert await holder.stdout.readline() == b"done\n"  # the holder kept its turns meanwhile
    await holder.wait()
    assert waited_s < 0.25  # one turn of the holder is 0.04 s
    assert (await store.get("waited")) is not None
    await store.close()


async def test_idempotent_add_compares_payloads_as_stored(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    first = await store.add(Timer(id="t", due_ms=5, payload={"a": 1, "b": (1, 2)}))
    again = await store.add(Timer(id="t", due_ms=5, payload={"b": [1, 2], "a": 1}))
    assert again.payload == {"a": 1, "b": [1, 2]}
    assert again.created_ms == first.created_ms
    await store.close()


async def test_claim_reads_the_due_index_not_the_table(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "timers.db")
    await store.stats()
    await store.close()
    conn = sqlite3.connect(tmp_path / "timers.db")
    params = {"queue": "q", "horizon": 1, "limit": 5, "deadline": 1, "now": 1, "seq": 0}
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + queries.CLAIM, params)]
    conn.close()
    assert any("USING INDEX timers_due" in step for step in plan), plan
    assert not any(step.startswith("SCAN timers") for step in plan), plan


async def test_a_version_1_file_is_migrated(tmp_path: Path) -> None:
    """Version 2 added first_claimed_ms and the per-queue lease index; old rows read as unset.
    Version 3's schedules table, version 4's flow control, version 5's due-queue index and
    settings versions, and version 6's indexes of done and dead timers by queue come on the
    same way."""
    path = tmp_path / "timers.db"
    later = (
        "timers_lease_queue",
        "schedules",
        "timers_paused",
        "queue_settings",
        "limits",
        "versions",
        "queue_heads",
        "timers_head",
        "attempts",
        "timers_done_queue",
        "timers_dead_queue",
    )
    with sqlite3.connect(path) as conn:
        for statement in schema.SCHEMA:
            if not any(name in statement for name in later):
                without = statement.replace(",\n        deferrals INTEGER NOT NULL DEFAULT 0", "")
                conn.execute(without.replace(",\n        first_claimed_ms INTEGER", ""))
        conn.execute("PRAGMA user_version = 1")
        conn.execute(
            "INSERT INTO timers (id, queue, state, due_ms, seq, attempt, created_ms, updated_ms,"
            " spec) VALUES ('old', 'default', 0, 5, 1, 0, 1, 1, '[null,7,null]')"
        )
    conn.close()
    store = SqliteStore(path)
    try:
        got = await store.get("old")
        assert got is not None
        assert (got.payload, got.first_claimed_ms, got.deferrals) == (7, None, 0)
        (lease,) = await store.claim("default", 10, 1, 1000)
        assert lease.timer.first_claimed_ms is not None
        assert await store.next_due_ms("default") == lease.deadline_ms
        assert (await store.list_schedules()).schedules == []
        before = await store.settings_versions()
        await store.set_limit("api.example.com", Limit(rate=1))
        assert (await store.settings_versions())[1] == before[1] + 1
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
    conn.close()


# version 2's schema as that release wrote it, to migrate from
_VERSION_2 = (
    """CREATE TABLE timers (
        id TEXT NOT NULL UNIQUE,
        queue TEXT NOT NULL,
        state INTEGER NOT NULL,
        due_ms INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        deadline_ms INTEGER,
        attempt INTEGER NOT NULL,
        created_ms INTEGER NOT NULL,
        updated_ms INTEGER NOT NULL,
        last_error TEXT,
        spec TEXT NOT NULL,
        first_claimed_ms INTEGER
    )""",
    "CREATE INDEX timers_due ON timers (queue, due_ms, seq) WHERE state = 0",
    "CREATE INDEX timers_lease ON timers (deadline_ms, seq) WHERE state = 1",
    "CREATE INDEX timers_lease_queue ON timers (queue, deadline_ms) WHERE state = 1",
    "CREATE INDEX timers_done ON timers (deadline_ms) WHERE state = 2",
    "CREATE INDEX timers_dead ON timers (id) WHERE state = 3",
    "PRAGMA user_version = 2",
)


async def test_a_version_2_file_is_migrated_and_keeps_its_timers(tmp_path: Path) -> None:
    """Version 3 added the schedules table; every timer of a version 2 file stays as it was."""
    path, clock = tmp_path / "timers.db", ManualClock()
    now = clock.now_ms
    hook = '[["https://example.com/x","POST",null,null],null,null]'
    rows = [  # id, state, due, seq, deadline, attempt, last_error, spec, first_claimed
        ("a", 0, now, 1, None, 0, None, "[null,1,null]", None),
        ("b", 1, now, 1, now + 10_000, 1, None, "[null,2,null]", now),
        ("c", 2, now - 5, 1, now + 60_000, 1, None, "[null,3,null]", now - 5),
        ("d", 3, now - 9, 1, None, 3, "HTTP 400", hook, now - 9),
    ]
    with sqlite3.connect(path) as conn:
        for statement in _VERSION_2:
            conn.execute(statement)
        conn.executemany(
            "INSERT INTO timers (id, queue, state, due_ms, seq, deadline_ms, attempt, created_ms,"
            " updated_ms, last_error, spec, first_claimed_ms)"
            " VALUES (?, 'default', ?, ?, ?, ?, ?, 1, 1, ?, ?, ?)",
            rows,
        )
    conn.close()
    store = SqliteStore(path, StoreSettings(retention_ms=60_000), clock=clock)
    try:
        timers = (await store.list()).timers
        assert [(t.id, t.state, t.attempt, t.last_error) for t in timers] == [
            ("a", State.SCHEDULED, 0, None),
            ("b", State.LEASED, 1, None),
            ("c", State.DONE, 1, None),
            ("d", State.DEAD, 3, "HTTP 400"),
        ]
        assert [t.payload for t in timers[:3]] == [1, 2, 3]
        assert timers[3].callback is not None
        assert timers[3].callback.url == "https://example.com/x"
        (lease,) = await store.claim("default", now, 10, 10_000)
        assert (lease.timer.id, lease.token) == ("a", 1)
        await store.ack(Lease(timers[1], 1, now + 10_000))  # a lease from before still holds
        assert await store.replay("d") is True
        await store.add_schedule(Schedule(id="s", every_s=10, start_ms=now, payload=0))
        assert [s.schedule.id for s in (await store.list_schedules()).schedules] == ["s"]
        assert await store.get(f"s@{now}") is not None
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
    conn.close()


async def test_a_version_3_file_is_migrated_to_flow_control(tmp_path: Path) -> None:
    """Version 4 added paused timers, queue settings and host limits; the state codes of a
    version 3 file (done 2, dead 3) read as they did."""
    path, clock = tmp_path / "timers.db", ManualClock()
    now = clock.now_ms
    with sqlite3.connect(path) as conn:
        for statement in _VERSION_2[:-1]:
            conn.execute(statement)
        conn.execute("CREATE TABLE schedules (id TEXT PRIMARY KEY, record TEXT NOT NULL)")
        conn.execute("PRAGMA user_version = 3")
        conn.executemany(
            "INSERT INTO timers (id, queue, state, due_ms, seq, deadline_ms, attempt, created_ms,"
            " updated_ms, spec) VALUES (?, 'q', ?, ?, 1, ?, 1, 1, 1, '[null,1,null]')",
            [("a", 0, now, None), ("c", 2, now, now + 60_000), ("d", 3, now, None)],
        )
    conn.close()
    store = SqliteStore(path, StoreSettings(retention_ms=60_000), clock=clock)
    try:
        assert [(t.id, t.state) for t in (await store.list()).timers] == [
            ("a", State.SCHEDULED),
            ("c", State.DONE),
            ("d", State.DEAD),
        ]
        assert await store.pause("a")
        (info,) = await store.queue_infos()
        assert (info.counts[State.PAUSED], info.counts[State.DONE], info.counts[State.DEAD]) == (
            1,
            1,
            1,
        )
        await store.set_queue("q", QueueSettings(paused=True))
        await store.set_limit("example.com", Limit(rate=5.0))
        assert await store.limits() == {"example.com": Limit(rate=5.0)}
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
    conn.close()


async def test_a_version_4_file_gets_its_due_queue_index(tmp_path: Path) -> None:
    """Version 5 added the due-queue index; a version 4 file's queues are listed in it."""
    path, clock = tmp_path / "timers.db", ManualClock()
    now = clock.now_ms
    with sqlite3.connect(path) as conn:
        for statement in _VERSION_2[:-1]:
            conn.execute(statement)
        conn.execute("CREATE TABLE schedules (id TEXT PRIMARY KEY, record TEXT NOT NULL)")
        conn.execute("CREATE INDEX timers_paused ON timers (queue) WHERE state = 4")
        conn.execute("CREATE TABLE queue_settings (queue TEXT PRIMARY KEY, record TEXT NOT NULL)")
        conn.execute("CREATE TABLE limits (host TEXT PRIMARY KEY, record TEXT NOT NULL)")
        conn.execute("PRAGMA user_version = 4")
        conn.executemany(
            "INSERT INTO timers (id, queue, state, due_ms, seq, deadline_ms, attempt, created_ms,"
            " updated_ms, spec) VALUES (?, ?, ?, ?, 1, ?, 1, 1, 1, '[null,1,null]')",
            [
                ("a", "later", 0, now + 5_000, None),
                ("b", "soon", 0, now + 1_000, None),
                ("c", "held", 1, now, now + 3_000),
                ("d", "done", 2, now, now + 60_000),
            ],
        )
    conn.close()
    store = SqliteStore(path, StoreSettings(retention_ms=60_000), clock=clock)
    try:
        found = await store.due_queues(now + 10_000, 10)
        assert found.queues == ["soon", "held", "later"]
    finally:
        await store.close()


async def test_a_version_4_file_is_migrated_to_count_deferrals(tmp_path: Path) -> None:
    """Version 5 added the deferrals column; a leased timer of a version 4 file keeps its
    lease token and defers without spending an attempt."""
    path, clock = tmp_path / "timers.db", ManualClock()
    with sqlite3.connect(path) as conn:
        for statement in schema.SCHEMA[:-1]:
            if not any(
                name in statement
                for name in (
                    "queue_heads",
                    "versions",
                    "attempts",
                    "timers_done_queue",
                    "timers_dead_queue",
                )
            ):
                conn.execute(
                    statement.replace(",\n        deferrals INTEGER NOT NULL DEFAULT 0", "")
                )
        conn.execute("PRAGMA user_version = 4")
        conn.execute(
            "INSERT INTO timers (id, queue, state, due_ms, seq, attempt, created_ms, updated_ms,"
            " spec) VALUES ('old', 'default', 0, ?, 1, 3, 1, 1, '[null,7,null]')",
            (clock.now_ms,),
        )
    conn.close()
    store = SqliteStore(path, clock=clock)
    try:
        (lease,) = await store.claim("default", clock.now_ms, 1, 1000)
        assert (lease.token, lease.timer.deferrals) == (4, 0)
        await store.defer(lease, clock.now_ms, "held")
        got = await store.get("old")
        assert got is not None
        assert (got.attempt, got.deferrals, got.attempts_spent) == (4, 1, 3)
        # version 6's attempt history comes on too
        (lease,) = await store.claim("default", clock.now_ms, 1, 1000)
        attempt = Attempt(attempt=4, at_ms=clock.now_ms, worker="w", outcome="ack", status=200)
        await store.ack(lease, attempt)
        assert await store.attempts("old") == [attempt]
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
    conn.close()


async def test_a_version_6_file_is_migrated_to_page_the_queue_table(tmp_path: Path) -> None:
    """Version 7 added the indexes of done and dead timers by queue; a version 6 file's done
    and dead timers are then counted a page at a time."""
    path, clock = tmp_path / "timers.db", ManualClock()
    with sqlite3.connect(path) as conn:
        for statement in schema.SCHEMA[:-1]:
            if "timers_done_queue" not in statement and "timers_dead_queue" not in statement:
                conn.execute(statement)
        conn.execute("PRAGMA user_version = 6")
        conn.executemany(
            "INSERT INTO timers (id, queue, state, due_ms, seq, deadline_ms, attempt, created_ms,"
            " updated_ms, spec) VALUES (?, ?, ?, 0, 1, ?, 1, 1, 1, '[null,1,null]')",
            [("d", "finished", 2, clock.now_ms + 60_000), ("x", "failed", 3, None)],
        )
    conn.close()
    store = SqliteStore(path, StoreSettings(retention_ms=60_000), clock=clock)
    try:
        page = await store.list_queues()
        assert [(i.name, i.counts[State.DONE], i.counts[State.DEAD]) for i in page.queues] == [
            ("failed", 0, 1),
            ("finished", 1, 0),
        ]
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (schema.SCHEMA_VERSION,)
    conn.close()


def test_a_page_of_the_queue_table_reads_partial_indexes(tmp_path: Path) -> None:
    """Each state's names and counts come from its partial index led by queue."""
    with sqlite3.connect(tmp_path / "plan.db") as conn:
        for statement in schema.SCHEMA:
            conn.execute(statement)
        params = {"after": "", "limit": 10, "now": 0, "first": "a", "last": "z"}
        queries_ = [*queue_table.NAMES, queue_table.SCHEDULED_RANGE]
        for query in [*queries_, *queue_table.COUNTS_RANGE.values()]:
            plan = [row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", params)]
            reads = [step for step in plan if re.match(r"(SCAN|SEARCH) timers\b", step)]
            assert reads, (query, plan)
            assert all("INDEX timers_" in step for step in reads), (query, plan)
    conn.close()


def test_counts_per_queue_read_partial_indexes(tmp_path: Path) -> None:
    """queue_infos counts each state over its partial index, not the table."""
    with sqlite3.connect(tmp_path / "plan.db") as conn:
        for statement in schema.SCHEMA:
            conn.execute(statement)
        queries_ = [queries.QUEUE_SCHEDULED, *queries.QUEUE_COUNTS.values()]
        for query in queries_:
            plan = " ".join(
                row[-1] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", {"now": 0})
            )
            assert "INDEX timers_" in plan, (query, plan)
    conn.close()


@pytest.fixture
def umask() -> Iterator[Callable[[int], int]]:
    """Set the process's umask for one test, and put the old one back."""
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o000, 0o277], ids=lambda mask: f"umask-{mask:03o}")
async def test_a_new_file_and_its_wal_are_private_whatever_the_umask(
    tmp_path: Path, umask: Callable[[int], int], mask: int
) -> None:
    """Callbacks may carry credentials: the file, its -wal and its -shm are 0600 from birth."""
    umask(mask)  # 0o277 would leave 0400, a file SQLite cannot write
    path = tmp_path / "timers.db"
    store = SqliteStore(path)
    try:
        await store.add(Timer(id="t", due_ms=store.now_ms() + 60_000))
        names = ("timers.db", "timers.db-wal", "timers.db-shm")
        assert {name: _mode(tmp_path / name) for name in names} == dict.fromkeys(names, 0o600)
    finally:
        await store.close()


async def test_an_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "timers.db"
    path.touch()
    path.chmod(0o640)  # an operator's choice, say a group of readers: not ours to change
    store = SqliteStore(path)
    try:
        await store.stats()
    finally:
        await store.close()
    assert _mode(path) == 0o640


async def test_a_file_that_cannot_be_created_is_store_unavailable(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "missing" / "timers.db")
    try:
        with pytest.raises(StoreUnavailable, match="cannot create"):
            await store.stats()
    finally:
        await store.close()
