"""Targets that hang share connections fairly, and a deferral never costs an attempt.

Hanging servers accept and never answer (`RawServer(always(None))`); another loopback address
(127.0.0.2, 127.0.0.3, ...) is another host. The issue's rows: 70 ports of one host that never
answer held every connection and a healthy timer went dead of "no free connection"; a 503 with
a huge `Retry-After` on one path held the host and each deferral spent an attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
from engine.support import running, until
from engine.test_http import RawServer, always, ok, timer_for

from tickwheel.callbacks import httpclient
from tickwheel.callbacks.http import HttpTarget
from tickwheel.callbacks.settings import HttpSettings
from tickwheel.callbacks.shares import address_key
from tickwheel.engine import Worker, WorkerSettings, limiter
from tickwheel.engine.outcome import ACKED, Verdict
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import MemoryStore
from tickwheel.testing.receiver import Received, Receiver, Reply

# 16 connections: an origin 4, the ports of one address 8 (2 of them kept for first calls), a
# reserve of 4 for prompt origins
SMALL = HttpSettings(allow_private_targets=True, max_connections=16)
ONCE = RetryPolicy(max_attempts=1, timeout_s=30.0)  # any attempt spent on it would be its last


@contextlib.asynccontextmanager
async def servers(count: int, host: str = "127.0.0.1") -> AsyncIterator[list[RawServer]]:
    """`count` servers that accept and never answer, each on its own port of `host`."""
    async with contextlib.AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(RawServer(always(None), host=host))
            for _ in range(count)
        ]


async def fire_all(target: HttpTarget, hanging: list[RawServer], each: int) -> list[asyncio.Task]:
    return [
        asyncio.create_task(target.fire(timer_for(s.url, timer_id=f"h{n}-{i}", timeout_s=30), 1))
        for n, s in enumerate(hanging)
        for i in range(each)
    ]


async def stop(target: HttpTarget, tasks: list[asyncio.Task], hanging: list[RawServer]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await target.close()
    await until(lambda: sum(s.open for s in hanging) == 0, timeout_s=5)


async def prompt_fire(target: HttpTarget, url: str) -> tuple[object, float]:
    started = time.monotonic()
    outcome = await target.fire(timer_for(url, timeout_s=10), 1)
    return outcome, time.monotonic() - started


async def test_many_ports_of_one_host_that_never_answer_take_one_address_share() -> None:
    """12 ports x 4 callbacks would take all 16 connections; they get 8, and receivers that
    answer (one proven on the same host, one new on another host) answer at once."""
    target = HttpTarget(SMALL)
    async with (
        RawServer(always(ok())) as proven,
        RawServer(always(ok()), host="127.0.0.2") as fresh,
        servers(12) as hanging,
    ):
        assert await target.fire(timer_for(proven.url), 1) == ACKED  # it has answered before
        tasks = await fire_all(target, hanging, 4)
        await until(lambda: sum(s.requests for s in hanging) >= 8, timeout_s=5)
        await asyncio.sleep(0.3)
        held = sum(s.open for s in hanging)
        results = [await prompt_fire(target, server.url) for server in (proven, fresh)]
        await stop(target, tasks, hanging)
    assert held == 8  # two origins' worth for the whole host, however many ports
    for outcome, took_s in results:
        assert outcome == ACKED
        assert took_s < 1


async def test_a_new_port_of_a_host_whose_other_ports_hang_still_gets_its_first_call_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Four ports that never answer hold a call each, and ask for three more each, more than
    the rest of the address's 8: they get 6 in all, and a new port of the same host takes for
    its first call one of the 2 kept for first calls, and answers at once (it was handed back
    unsent, after a wait, while calls of the hanging ports could fill the whole share)."""
    monkeypatch.setattr(httpclient, "SLOT_WAIT_S", 0.5)
    target = HttpTarget(SMALL)
    async with servers(4) as hanging, RawServer(always(ok())) as fresh:
        first = await fire_all(target, hanging, 1)
        await until(lambda: sum(s.requests for s in hanging) >= 4, timeout_s=5)
        more = await fire_all(target, hanging, 3)
        await asyncio.sleep(0.2)
        held = sum(s.open for s in hanging)
        outcome, took_s = await prompt_fire(target, fresh.url)
        await stop(target, first + more, hanging)
    assert held == 6  # the address's 8 less the 2 kept
    assert outcome == ACKED
    assert took_s < 0.5


async def test_hanging_hosts_on_many_addresses_leave_the_reserve_to_prompt_origins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six hosts that never answer fill the 12 connections anyone may take; an origin proven
    prompt takes one of the 4 kept in reserve, and a new one waits, then is handed back
    unsent (no attempt spent) rather than failed."""
    monkeypatch.setattr(httpclient, "SLOT_WAIT_S", 0.5)
    target = HttpTarget(SMALL)
    async with contextlib.AsyncExitStack() as stack:
        proven = await stack.enter_async_context(RawServer(always(ok())))
        fresh = await stack.enter_async_context(RawServer(always(ok()), host="127.0.0.2"))
        hanging = [
            server
            for n in range(3, 9)
            for server in await stack.enter_async_context(servers(1, f"127.0.0.{n}"))
        ]
        assert await target.fire(timer_for(proven.url), 1) == ACKED
        tasks = await fire_all(target, hanging, 4)
        await until(lambda: sum(s.requests for s in hanging) >= 12, timeout_s=5)
        await asyncio.sleep(0.3)
        held = sum(s.open for s in hanging)
        proven_result = await prompt_fire(target, proven.url)
        fresh_outcome, _ = await prompt_fire(target, fresh.url)
        await stop(target, tasks, hanging)
    assert held == 12  # 16 less the reserve
    assert proven_result[0] == ACKED
    assert proven_result[1] < 0.5
    assert fresh_outcome.verdict is Verdict.DEFER  # type: ignore[attr-defined]


async def test_a_worker_delivers_prompt_timers_promptly_beside_70_hanging_ports() -> None:
    """The issue's row, through a worker: 70 ports that never answer, 4 timers each, and a
    prompt receiver's timers (one attempt allowed): these arrive within a second, and no
    timer dies of waiting for a connection."""
    store = MemoryStore()
    target = HttpTarget(SMALL)
    prompt = Receiver()
    await prompt.start()
    try:
        async with servers(70) as hanging:
            await store.add(
                Timer(id="warm", due_ms=store.now_ms(), callback=Callback(url=prompt.url))
            )
            worker = Worker(store, target, WorkerSettings(lookahead_ms=200, lease_ms=10_000))
            async with running(worker):
                await prompt.wait_for(1, timeout_s=5)  # the receiver has answered before
                now = store.now_ms()
                await store.add_many(
                    [
                        Timer(id=f"h{n}-{i}", due_ms=now, callback=Callback(url=s.url), retry=ONCE)
                        for n, s in enumerate(hanging)
                        for i in range(4)
                    ]
                )
                await until(lambda: sum(s.requests for s in hanging) >= 8, timeout_s=5)
                due = store.now_ms() + 200
                await store.add_many(
                    [
                        Timer(
                            id=f"p{i}",
                            due_ms=due + i * 50,
                            callback=Callback(url=prompt.url),
                            retry=ONCE,
                        )
                        for i in range(20)
                    ]
                )
                await prompt.wait_for(21, timeout_s=10)
                await asyncio.sleep(6)  # past a slot wait: the hanging ones were handed back
                held = sum(s.open for s in hanging)
                stats = await store.stats()
            await target.close()
    finally:
        await prompt.stop()
    late_ms = [r.at_ms - r.due_ms for r in prompt.received[1:] if r.due_ms is not None]
    assert len(late_ms) == 20
    assert max(late_ms) < 1000
    assert {r.attempt for r in prompt.received} == {1}
    assert held <= 8  # the address's share
    assert stats.counts.get(State.DEAD, 0) == 0  # handed back unsent, never failed


async def test_a_huge_retry_after_on_one_path_defers_the_host_without_spending_attempts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One path answers 503 with `Retry-After: 999999999999`; the other paths of the host are
    held (at most `MAX_HOLD_S`, shortened here) and handed back to the store, and when they
    are sent at last their attempt is still the first: none died of a hold it never tried."""
    monkeypatch.setattr(limiter, "MAX_HOLD_S", 2.0)
    monkeypatch.setattr(limiter, "HOLD_WAIT_S", 0.2)  # send the held ones back to the store

    def respond(request: Received) -> Reply:
        if request.path.startswith("/bad"):
            return Reply(503, {"Retry-After": "999999999999"})
        return Reply()

    store = MemoryStore()
    target = HttpTarget(HttpSettings(allow_private_targets=True))
    receiver = Receiver(respond=respond)
    await receiver.start()
    try:
        worker = Worker(store, target, WorkerSettings(lookahead_ms=200, lease_ms=10_000))
        async with running(worker):
            await store.add(
                Timer(id="bad", due_ms=store.now_ms(), callback=Callback(url=f"{receiver.url}/bad"))
            )
            await receiver.wait_for(1, timeout_s=5)
            due = store.now_ms() + 100
            await store.add_many(
                [
                    Timer(
                        id=f"g{i}",
                        due_ms=due,
                        callback=Callback(url=f"{receiver.url}/good"),
                        retry=ONCE,
                    )
                    for i in range(10)
                ]
            )
            await until(lambda: worker.metrics.deferred.total() >= 10, timeout_s=5)
            held = [await store.get(f"g{i}") for i in range(10)]
            await receiver.wait_for(11, timeout_s=10)
            await until(lambda: _all_done(store, 10), timeout_s=5)
        await target.close()
    finally:
        await receiver.stop()
    for timer in held:
        assert timer is not None
        assert timer.state is State.SCHEDULED
        assert timer.attempts_spent == 0  # deferred: claimed, never tried
    good = [r for r in receiver.received if r.path.startswith("/good")]
    assert len(good) == 10
    assert {r.attempt for r in good} == {1}


async def _all_done(store: MemoryStore, count: int) -> bool:
    got = [await store.get(f"g{i}") for i in range(count)]
    return all(t is not None and t.state is State.DONE for t in got)


def test_an_ipv6_site_is_one_address_however_many_addresses_it_uses() -> None:
    """A /64 is what one host or LAN is handed: its 2**64 addresses share one cap."""
    assert address_key("2001:db8:1:2::1") == address_key("2001:db8:1:2:ffff:ffff:ffff:ffff")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key("fe80::1%eth0") == "fe80::/64"
    assert address_key("203.0.113.7") == "203.0.113.7"
