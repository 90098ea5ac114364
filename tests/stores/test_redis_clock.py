"""`ServerClock` on a real redis-server's ``TIME``: the quickest sample is kept, never early."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aredis

from tickwheel.model import Timer
from tickwheel.stores.redis import RedisStore
from tickwheel.stores.redis import clock as server_clock
from tickwheel.stores.redis.clock import RETRY_S, ServerClock

ServerTime = Callable[[], Awaitable[tuple[int, int]]]
# a reply held up on its way back, as by other commands' replies in flight before it
SLOW_S = 0.2


@pytest.fixture
async def client(redis_server: Any) -> AsyncIterator[aredis.Redis]:
    connection = aredis.Redis.from_url(redis_server.url)
    await connection.ping()  # connected: a first sample's round trip is one command's
    try:
        yield connection
    finally:
        await connection.aclose()


def server_time(client: aredis.Redis, delay_s: float = 0.0) -> ServerTime:
    """The server's ``TIME``, its reply seen `delay_s` after it arrives."""

    async def read() -> tuple[int, int]:
        seconds, micros = await client.time()
        if delay_s:
            await asyncio.sleep(delay_s)
        return int(seconds), int(micros)

    return read


async def server_ms(client: aredis.Redis) -> float:
    seconds, micros = await client.time()
    return int(seconds) * 1000 + int(micros) / 1000


async def behind_ms(clock: ServerClock, client: aredis.Redis) -> float:
    """How far `clock` runs behind the server: read before ``TIME``, so never negative."""
    ours = clock()
    return await server_ms(client) - ours


async def test_a_slow_sample_does_not_replace_a_quick_one(client: aredis.Redis) -> None:
    clock = ServerClock()
    await clock.sync(server_time(client))
    quick = clock.round_trip_ms
    assert quick is not None
    await clock.sync(server_time(client, SLOW_S))
    assert clock.round_trip_ms == quick, "the sample with the smaller round trip is kept"
    assert 0 <= await behind_ms(clock, client) < SLOW_S * 1000 / 2


async def test_a_slow_first_sample_is_replaced_by_a_quick_one(client: aredis.Redis) -> None:
    clock = ServerClock(refresh_s=3600)
    await clock.sync(server_time(client, SLOW_S))
    assert await behind_ms(clock, client) >= SLOW_S * 1000 * 0.9, "a slow sample runs behind"
    await clock.sync(server_time(client))  # a quick one, well within refresh_s
    assert clock.round_trip_ms is not None
    assert clock.round_trip_ms < SLOW_S * 1000 / 2
    assert 0 <= await behind_ms(clock, client) < SLOW_S * 1000 / 2


async def test_a_poor_sample_is_retried_ever_less_often_until_a_good_one(
    client: aredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1_024.0]
    monkeypatch.setattr(server_clock, "_local_ms", lambda: now[0])
    clock = ServerClock(refresh_s=3600)

    async def timed(delay_ms: float) -> None:
        """A sample whose round trip is `delay_ms` on the local clock the test drives."""

        async def read() -> tuple[int, int]:
            now[0] += delay_ms
            return await server_time(client)()

        await clock.sync(read)

    await timed(0.25)
    now[0] += RETRY_S * 1000
    assert not clock.stale(), "a quick sample is good until refresh_s"
    now[0] += clock.refresh_s * 1000  # it ages out; the next sample is slow
    await timed(40.5)
    assert clock.round_trip_ms == 40.5, "an aged-out sample gives way even to a slow one"
    assert not clock.stale(), "no retry sooner than RETRY_S"
    now[0] += RETRY_S * 1000
    assert clock.stale(), "a slow sample is retried"
    await timed(20.5)
    assert clock.round_trip_ms == 20.5, "a quicker sample replaces it"
    now[0] += RETRY_S * 1000
    assert not clock.stale(), "still slow: the next retry waits twice as long"
    now[0] += RETRY_S * 1000
    assert clock.stale()
    await timed(0.375)
    assert clock.round_trip_ms == 0.375
    now[0] += RETRY_S * 1000 * 8
    assert not clock.stale(), "a good sample is kept until refresh_s"


async def test_a_sample_that_shows_the_kept_one_ahead_replaces_it(client: aredis.Redis) -> None:
    clock = ServerClock(refresh_s=3600)
    ahead = 5_000

    async def early_time() -> tuple[int, int]:
        seconds, micros = await server_time(client)()
        return divmod(seconds * 1_000_000 + micros + ahead * 1000, 1_000_000)

    await clock.sync(early_time)  # the server as it read before its clock stepped back
    offset = clock.offset_ms
    assert offset is not None
    await clock.sync(server_time(client, SLOW_S))  # slower, but proves the kept offset ahead
    assert clock.offset_ms is not None
    assert clock.offset_ms < offset - ahead / 2


async def test_never_ahead_of_the_server_whatever_the_round_trips(client: aredis.Redis) -> None:
    clock = ServerClock(refresh_s=0.05)
    for i in range(40):
        await clock.sync(server_time(client, SLOW_S / 10 if i % 3 == 0 else 0.0))
        assert await behind_ms(clock, client) >= 0
        await asyncio.sleep(0.01)


async def test_concurrent_calls_send_no_second_time_while_a_sync_is_in_flight(
    redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = RedisStore.from_url(redis_server.url, prefix="clock-herd")
    sent = in_flight = most = 0
    real = RedisStore._server_time

    async def counted(self: RedisStore) -> tuple[int, int]:
        nonlocal sent, in_flight, most
        sent += 1
        in_flight += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(SLOW_S)  # slow: the retries below find it in flight
            return await real(self)
        finally:
            in_flight -= 1

    try:
        await store.add(Timer(id="first", due_ms=store.now_ms() + 60_000))  # the first sync
        monkeypatch.setattr(RedisStore, "_server_time", counted)
        store_clock = store._server_clock
        assert store_clock is not None
        store_clock._rtt_ms = 1e9  # the kept sample is poor: every call would retry
        store_clock._retry_s = 0.0
        due = store.now_ms() + 60_000
        await asyncio.gather(*(store.add(Timer(id=f"t{i}", due_ms=due)) for i in range(32)))
        assert sent >= 1
        assert most == 1
    finally:
        await store.close()
