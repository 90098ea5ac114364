"""What only the PostgreSQL store does: timers written in the caller's transaction (``tx=``),
versioned migrations, claims shared by workers, wake-ups by NOTIFY, bounded purges; and the
model comparison against `MemoryStore`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from budget import examples
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis.stateful import run_state_machine_as_test
from pg_server import PostgresServer
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from tickwheel.cli import app
from tickwheel.errors import InvalidTimer, LeaseLost, StoreUnavailable, TimerExists
from tickwheel.model import State, Timer
from tickwheel.stores import Store, StoreSettings
from tickwheel.stores.postgres import PostgresStore, ops
from tickwheel.stores.postgres import queries as sql
from tickwheel.stores.postgres import schema as ddl
from tickwheel.stores.postgres.connect import migrate

from .conftest import ManualClock
from .test_model_compare import SCENARIOS, StoreComparison


def fresh_schema() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def schema() -> str:
    return fresh_schema()


@pytest.fixture
async def pg(postgres_server: PostgresServer, schema: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(postgres_server.url, StoreSettings(retention_ms=60_000), schema=schema)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def orders(postgres_server: PostgresServer, schema: str) -> str:
    """An application table beside the store, in the store's schema's database."""
    table = f"orders_{schema}"
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (id text PRIMARY KEY)")
    return table


async def count(url: str, table: str) -> int:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        row = await (await conn.execute(f"SELECT count(*) FROM {table}")).fetchone()
        assert row is not None
        return int(row[0])


# transactional scheduling


async def test_a_timer_added_in_a_committed_transaction_exists_and_fires(
    pg: PostgresStore, postgres_server: PostgresServer, orders: str
) -> None:
    conn = await psycopg.AsyncConnection.connect(postgres_server.url)
    async with conn, conn.transaction():
        await conn.execute(f"INSERT INTO {orders} (id) VALUES ('o1')")
        await pg.add(Timer(id="remind-o1", due_ms=pg.now_ms()), tx=conn)
        assert await pg.get("remind-o1") is None  # not committed yet: no one else sees it
    leases = await pg.claim("default", pg.now_ms(), 10, 30_000)
    assert [lease.timer.id for lease in leases] == ["remind-o1"]


async def test_a_rolled_back_transaction_leaves_no_timer(
    pg: PostgresStore, postgres_server: PostgresServer, orders: str
) -> None:
    async def order_that_fails(conn: psycopg.AsyncConnection[Any]) -> None:
        async with conn.transaction():
            await conn.execute(f"INSERT INTO {orders} (id) VALUES ('o1')")
            await pg.add(Timer(id="remind-o1", due_ms=pg.now_ms()), tx=conn)
            await pg.add_many([Timer(id=f"m{n}", due_ms=pg.now_ms()) for n in range(3)], tx=conn)
            raise ZeroDivisionError("the business write fails after the timers were added")

    async with await psycopg.AsyncConnection.connect(postgres_server.url) as conn:
        with pytest.raises(ZeroDivisionError):
            await order_that_fails(conn)
    assert await count(postgres_server.url, orders) == 0
    assert await pg.get("remind-o1") is None
    assert (await pg.stats()).counts[State.SCHEDULED] == 0
    assert await pg.claim("default", pg.now_ms(), 10, 30_000) == []


async def test_cancel_and_reschedule_follow_the_callers_transaction(
    pg: PostgresStore, postgres_server: PostgresServer
) -> None:
    await pg.add(Timer(id="a", due_ms=pg.now_ms() + 60_000))
    await pg.add(Timer(id="b", due_ms=pg.now_ms() + 60_000))

    async def rolled_back(conn: psycopg.AsyncConnection[Any]) -> None:
        async with conn.transaction():
            assert await pg.cancel("a", tx=conn)
            assert await pg.reschedule("b", pg.now_ms(), tx=conn)
            raise RuntimeError("rolled back")

    async with await psycopg.AsyncConnection.connect(postgres_server.url) as conn:
        with pytest.raises(RuntimeError):
            await rolled_back(conn)
        async with conn.transaction():
            assert await pg.reschedule("b", pg.now_ms(), tx=conn)
            assert await pg.cancel("a", tx=conn)
    assert await pg.get("a") is None
    timer = await pg.get("b")
    assert timer is not None
    assert timer.due_ms <= pg.now_ms()


async def test_a_refused_add_leaves_the_callers_transaction_usable(
    pg: PostgresStore, postgres_server: PostgresServer, orders: str
) -> None:
    await pg.add(Timer(id="t", due_ms=0, payload=1))
    conn = await psycopg.AsyncConnection.connect(postgres_server.url)
    async with conn, conn.transaction():
        with pytest.raises(TimerExists):
            await pg.add(Timer(id="t", due_ms=0, payload=2), tx=conn)
        await conn.execute(f"INSERT INTO {orders} (id) VALUES ('o1')")
    assert await count(postgres_server.url, orders) == 1


async def test_a_commit_wakes_a_waiting_worker_not_before(
    pg: PostgresStore, postgres_server: PostgresServer
) -> None:
    await pg.wait("default", 0.05)  # listening
    async with await psycopg.AsyncConnection.connect(postgres_server.url) as conn:
        async with conn.transaction():
            await pg.add(Timer(id="t", due_ms=pg.now_ms() + 50), tx=conn)
            waiter = asyncio.create_task(pg.wait("default", 5))
            await asyncio.sleep(0.1)
            assert not waiter.done()
        committed = time.monotonic()
    assert await waiter is True
    assert time.monotonic() - committed < 0.25


def test_sync_psycopg_and_sqlalchemy_sessions_schedule_in_their_transaction(
    postgres_server: PostgresServer, schema: str, orders: str
) -> None:
    store = PostgresStore(postgres_server.url, schema=schema)
    engine = create_engine(postgres_server.url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        # the README's example: the timer exists if and only if the order does
        with Session(engine) as session, session.begin():
            session.execute(text(f"INSERT INTO {orders} (id) VALUES ('o1')"))
            tx = session.connection().connection.driver_connection
            store.add_sync(Timer(id="remind-o1", due_ms=0), tx=tx)

        def order_that_fails() -> None:
            with Session(engine) as session, session.begin():
                session.execute(text(f"INSERT INTO {orders} (id) VALUES ('o2')"))
                tx = session.connection().connection.driver_connection
                store.add_sync(Timer(id="remind-o2", due_ms=0), tx=tx)
                raise ZeroDivisionError("the business write fails")

        with pytest.raises(ZeroDivisionError):
            order_that_fails()
        conn = psycopg.connect(postgres_server.url)
        with conn, conn.cursor() as cursor, conn.transaction():
            store.add_many_sync([Timer(id=f"c{n}", due_ms=0) for n in range(3)], tx=cursor)
            assert store.cancel_sync("c0", tx=conn)
            assert store.reschedule_sync("c1", 5, tx=conn)
        found = asyncio.run(_ids_and_close(store))
        assert found == ["c1", "c2", "remind-o1"]
    finally:
        engine.dispose()


async def test_the_transaction_forms_refuse_what_the_pool_forms_refuse(
    pg: PostgresStore, postgres_server: PostgresServer
) -> None:
    far = pg.now_ms() + pg.settings.max_horizon_ms + 60_000
    timer = Timer(id="far", due_ms=far)
    conn = await psycopg.AsyncConnection.connect(postgres_server.url)
    async with conn, conn.transaction():
        with pytest.raises(InvalidTimer, match="horizon"):
            await pg.add(timer, tx=conn)
        with pytest.raises(InvalidTimer, match="horizon"):
            await pg.add_many([timer], tx=conn)
        with pytest.raises(InvalidTimer, match="due_ms"):
            await pg.reschedule("far", -1, tx=conn)
    with psycopg.connect(postgres_server.url) as sync, sync.transaction():
        with pytest.raises(InvalidTimer, match="horizon"):
            pg.add_sync(timer, tx=sync)
        with pytest.raises(InvalidTimer, match="horizon"):
            pg.add_many_sync([timer], tx=sync)
        with pytest.raises(InvalidTimer, match="horizon"):
            pg.reschedule_sync("far", far, tx=sync)
    assert (await pg.list()).timers == []


async def _ids_and_close(store: PostgresStore) -> list[str]:
    try:
        return [timer.id for timer in (await store.list()).timers]
    finally:
        await store.close()


# migrations


def _one_more_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend this tickwheel has a second schema version."""
    step = ("CREATE TABLE {s}.extra (x integer)",)
    monkeypatch.setattr(ddl, "MIGRATIONS", (*ddl.MIGRATIONS, step))
    monkeypatch.setattr(ddl, "SCHEMA_VERSION", len(ddl.MIGRATIONS))


async def test_an_older_schema_says_what_to_run_and_migrate_moves_it_on_under_load(
    postgres_server: PostgresServer, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{postgres_server.url}?schema={schema}"
    now = ddl.SCHEMA_VERSION
    assert migrate(url) == (0, now)
    assert migrate(url) == (now, now)
    working = PostgresStore(url)
    await working.add(Timer(id="before", due_ms=0))
    _one_more_step(monkeypatch)
    stale = PostgresStore(url)
    needs = rf"version {now}.*needs {now + 1}.*tickwheel migrate --store"
    with pytest.raises(StoreUnavailable, match=needs):
        await stale.get("x")
    await stale.close()

    async def busy() -> int:  # a worker of the old version goes on while the schema moves
        done = 0
        for n in range(50):
            await working.add(Timer(id=f"w{n}", due_ms=0))
            for lease in await working.claim("default", working.now_ms(), 10, 30_000):
                await working.ack(lease)
                done += 1
        return done

    load = asyncio.create_task(busy())
    result = await asyncio.to_thread(CliRunner().invoke, app, ["migrate", "--store", url])
    assert result.exit_code == 0, result.output
    assert f"from version {now} to {now + 1}" in result.output
    assert await load == 51
    await working.close()
    migrated = PostgresStore(url)
    assert (await migrated.stats()).counts[State.DONE] == 51
    await migrated.close()


async def test_stores_meeting_a_fresh_schema_at_once_all_work(
    postgres_server: PostgresServer, schema: str
) -> None:
    """`serve` opens several connections to a new schema at once (API, worker, gauges): one
    creates it, the others wait on the migration lock and then find it made."""
    url = f"{postgres_server.url}?schema={schema}"
    stores = [PostgresStore(url) for _ in range(8)]
    try:
        await asyncio.gather(
            *(store.add(Timer(id=f"t{n}", due_ms=0)) for n, store in enumerate(stores))
        )
        assert (await stores[0].stats()).counts[State.SCHEDULED] == 8
    finally:
        for store in stores:
            await store.close()


async def test_a_newer_schema_is_refused(postgres_server: PostgresServer, schema: str) -> None:
    url = f"{postgres_server.url}?schema={schema}"
    migrate(url)
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f"UPDATE {schema}.schema_version SET version = 99")
    store = PostgresStore(url)
    with pytest.raises(StoreUnavailable, match="version 99, newer"):
        await store.stats()
    await store.close()


def test_migrate_on_other_stores_has_nothing_to_do(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["migrate", "--store", f"sqlite:///{tmp_path}/t.db"])
    assert result.exit_code == 0
    assert "nothing to migrate" in result.output


# claims, wake-ups, purges


async def test_workers_claim_disjoint_timers_concurrently(
    postgres_server: PostgresServer, schema: str
) -> None:
    stores = [PostgresStore(postgres_server.url, schema=schema) for _ in range(4)]
    try:
        await stores[0].add_many([Timer(id=f"t{n:04}", due_ms=0) for n in range(2000)])

        async def drain(store: PostgresStore) -> list[str]:
            got: list[str] = []
            while leases := await store.claim("default", store.now_ms(), 100, 30_000):
                got += [lease.timer.id for lease in leases]
                await store.ack_many(leases)
            return got

        claimed = await asyncio.gather(*(drain(store) for store in stores))
        every = [timer_id for ids in claimed for timer_id in ids]
        assert sorted(every) == [f"t{n:04}" for n in range(2000)]
    finally:
        for store in stores:
            await store.close()


@pytest.mark.latency
async def test_a_timer_due_sooner_wakes_a_sleeping_worker_on_time(
    postgres_server: PostgresServer, schema: str
) -> None:
    worker = PostgresStore(postgres_server.url, schema=schema)
    api = PostgresStore(postgres_server.url, schema=schema)
    try:
        await api.add(Timer(id="later", due_ms=worker.now_ms() + 60_000))
        assert await worker.claim("default", worker.now_ms(), 10, 30_000) == []
        await worker.wait("default", 0.05)  # listening; the next claim is a minute away
        waiter = asyncio.create_task(worker.wait("default", 60))
        await asyncio.sleep(0.02)
        due = worker.now_ms() + 50
        await api.add(Timer(id="soon", due_ms=due))
        assert await waiter is True
        await asyncio.sleep(max(0, due - worker.now_ms()) / 1000)
        leases = await worker.claim("default", worker.now_ms(), 10, 30_000)
        assert [lease.timer.id for lease in leases] == ["soon"]
        assert worker.now_ms() - due < 100
    finally:
        await worker.close()
        await api.close()


async def test_finished_timers_are_deleted_in_bounded_batches(
    postgres_server: PostgresServer, schema: str
) -> None:
    clock = ManualClock()
    store = PostgresStore(
        postgres_server.url, StoreSettings(retention_ms=1000), schema=schema, clock=clock
    )
    try:
        total = sql.PURGE_BATCH + 500
        await store.add_many([Timer(id=f"t{n}", due_ms=clock.now_ms) for n in range(total)])
        while leases := await store.claim("default", clock.now_ms, 1000, 30_000):
            assert all(await store.ack_many(leases))
        clock.advance(1000)

        async def rows() -> int:
            return await count(postgres_server.url, f"{schema}.timers")

        assert await rows() == total
        await store.claim("default", clock.now_ms, 1, 30_000)
        assert await rows() == 500
        await store.claim("default", clock.now_ms, 1, 30_000)
        assert await rows() == 0
    finally:
        await store.close()


async def test_a_settle_that_landed_unheard_counts_as_settled_when_sent_again(
    pg: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each settle commits, then its reply is lost (the connection cut after the commit); sent
    again, it counts as landed, not as a lost lease. A settle not in doubt still is one."""
    now = pg.now_ms()
    await pg.add_many([Timer(id=f"t{n}", due_ms=now) for n in range(5)])
    leases = {lease.timer.id: lease for lease in await pg.claim("default", now, 10, 30_000)}
    later = now + 60_000
    settles = {
        "t0": lambda: pg.ack(leases["t0"]),
        "t1": lambda: pg.retry(leases["t1"], later, "HTTP 500"),
        "t2": lambda: pg.defer(leases["t2"], later, "waiting"),
        "t3": lambda: pg.kill(leases["t3"], "HTTP 400"),
        "t4": lambda: pg.ack_many([leases["t4"]]),
    }
    run = pg._run

    async def unheard(*args: Any, **kwargs: Any) -> Any:
        await run(*args, **kwargs)
        raise StoreUnavailable("postgres store: the reply was lost")

    for settle in settles.values():
        monkeypatch.setattr(pg, "_run", unheard)
        with pytest.raises(StoreUnavailable):
            await settle()
        monkeypatch.setattr(pg, "_run", run)
        assert await settle() in (None, [True])
    with pytest.raises(LeaseLost):  # landed before, not in doubt: that lease is gone
        await pg.ack(leases["t0"])
    states = {n: (await pg.get(n)).state for n in settles}  # type: ignore[union-attr]
    assert states == {
        "t0": State.DONE,
        "t1": State.SCHEDULED,
        "t2": State.SCHEDULED,
        "t3": State.DEAD,
        "t4": State.DONE,
    }


async def test_a_store_on_a_server_that_is_down_is_unavailable() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:9/none")
    with pytest.raises(StoreUnavailable):
        await store.stats()
    await store.close()


# the model comparison


class PostgresComparison(StoreComparison):
    """`PostgresStore` beside the reference, on one schema emptied before each run (cheaper
    than making a schema per run)."""

    url: str = ""
    schema: str = ""

    def make_store(self, clock: ManualClock, settings: StoreSettings, tmp: Path) -> Store:
        tables = ", ".join(
            f"{self.schema}.{table}"
            for table in (
                "timers",
                "attempts",
                "schedules",
                "queue_settings",
                "limits",
                "queue_heads",
            )
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(
                f"TRUNCATE {tables}; ALTER SEQUENCE {self.schema}.timer_seq RESTART; "
                f"UPDATE {self.schema}.versions SET version = 0"
            )
        return PostgresStore(self.url, settings, schema=self.schema, clock=clock)


def comparison(url: str) -> type[PostgresComparison]:
    """A comparison class on a schema of its own, made now."""
    schema = fresh_schema()
    migrate(f"{url}?schema={schema}")
    return type("Comparison", (PostgresComparison,), {"url": url, "schema": schema})


@pytest.mark.timeout(300)
def test_postgres_matches_the_reference_store(postgres_server: PostgresServer) -> None:
    run_state_machine_as_test(
        comparison(postgres_server.url),
        settings=hypothesis_settings(
            max_examples=examples(full=20, ci=5),
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


@pytest.mark.parametrize("steps", SCENARIOS.values(), ids=SCENARIOS)
def test_scenario(postgres_server: PostgresServer, steps: list[tuple[str, dict[str, Any]]]) -> None:
    machine = comparison(postgres_server.url)()
    try:
        machine.same_timers()
        for name, arguments in steps:
            getattr(machine, name)(**arguments)
            machine.same_timers()
    finally:
        machine.teardown()


async def test_a_large_batch_with_taken_ids_falls_back_and_stores_the_rest(
    pg: PostgresStore,
) -> None:
    """From `PLAIN_FIRST` timers on, a batch is first tried as a plain INSERT; a taken id (or
    one twice in the batch) rolls that back and the batch goes one conflict at a time."""
    now = pg.now_ms()
    await pg.add(Timer(id="same", due_ms=now, payload=1))
    await pg.add(Timer(id="other", due_ms=now, payload=1))
    batch = [Timer(id=f"b{n}", due_ms=now) for n in range(ops.PLAIN_FIRST)]
    batch += [Timer(id="same", due_ms=now, payload=1), Timer(id="other", due_ms=now, payload=2)]
    batch += [Timer(id="twice", due_ms=now), Timer(id="twice", due_ms=now)]
    with pytest.raises(TimerExists) as refused:
        await pg.add_many(batch)
    assert refused.value.timer_id == "other"
    stats = await pg.stats()
    assert stats.counts[State.SCHEDULED] == ops.PLAIN_FIRST + 3
    fresh = [Timer(id=f"c{n}", due_ms=now) for n in range(ops.PLAIN_FIRST)]
    assert [timer.id for timer in await pg.add_many(fresh)] == [timer.id for timer in fresh]


async def test_defer_many_defers_each_lease_once_in_one_statement(pg: PostgresStore) -> None:
    now = pg.now_ms()
    await pg.add_many([Timer(id=f"d{n}", due_ms=now) for n in range(3)])
    first = await pg.claim("default", now, 3, 30_000)
    await pg.retry(first[2], now, "HTTP 503")
    (again,) = await pg.claim("default", pg.now_ms(), 3, 30_000)  # d2, token 2; first[2] stale
    deferrals = [
        (first[0], now + 5000, "held"),
        (first[0], now + 9000, "held again"),
        (first[2], now + 5000, "stale"),
        (first[1], now + 7000, "held"),
    ]
    assert await pg.defer_many(deferrals) == [True, False, False, True]
    d0, d1, d2 = [await pg.get(f"d{n}") for n in range(3)]
    assert d0 is not None
    assert d1 is not None
    assert d2 is not None
    assert (d0.state, d0.due_ms, d0.last_error, d0.deferrals) == (
        State.SCHEDULED,
        now + 5000,
        "held",
        1,
    )
    assert (d1.due_ms, d1.attempts_spent) == (now + 7000, 0)
    assert d2.state is State.LEASED
    assert again.timer.id == "d2"
    assert await pg.defer_many([]) == []
