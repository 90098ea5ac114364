"""Redis-specific tests: the key layout, Cluster placement, outages, the server clock, batches.

The behaviour every store shares is in test_contract.py (run against "redis" and
"redis-cluster" too); here is what only the Redis layout can get wrong.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest
import redis
from hypothesis import settings as hypothesis_settings
from hypothesis.stateful import invariant, run_state_machine_as_test

from tickwheel.errors import InvalidArgument, LeaseLost, StoreUnavailable, TimerExists
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import Store, StoreSettings
from tickwheel.stores.codec import encode_spec
from tickwheel.stores.redis import RedisStore, shard_of
from tickwheel.stores.redis import clock as server_clock
from tickwheel.stores.redis import store as redis_store

from .conftest import ManualClock
from .test_model_compare import StoreComparison

MINUTE = 60_000
YEAR_9999_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


class Server(Protocol):
    """What tests/conftest.py's standalone server and Cluster both offer."""

    @property
    def url(self) -> str: ...


def node_clients(server: Any) -> list[redis.Redis]:
    """Synchronous clients on every node: the Cluster's masters, or the one server."""
    return [node.client() for node in getattr(server, "nodes", [server])]


def inspector(server: Any) -> Any:
    """A synchronous client that sends each key to the node holding it."""
    if hasattr(server, "nodes"):
        port = server.nodes[0].port
        return redis.RedisCluster(host="127.0.0.1", port=port, decode_responses=True)
    return server.client()


def keys_by_node(server: Any, prefix: str) -> list[list[str]]:
    found = []
    for client in node_clients(server):
        with client:
            found.append(sorted(client.scan_iter(match=f"{{{prefix}:*", count=1000)))
    return found


def all_keys(server: Any, prefix: str) -> list[str]:
    with inspector(server) as client:
        return sorted(client.scan_iter(match=f"{{{prefix}:*", count=1000))


def assert_layout_consistent(server: Any, store: RedisStore) -> None:
    with inspector(server) as client:
        check_layout(client, store)


def check_layout(client: Any, store: RedisStore) -> None:
    """Check every shard's structures against its records (see keys.py for the layout).

    The bucket index lists exactly the non-empty buckets; each scheduled timer is in exactly
    its bucket, under <seq><id> with its due time; leases, expiries and state sets hold
    exactly the timers in their state.
    """
    keys = set(client.scan_iter(match=f"{{{store.prefix}:*", count=1000))
    for shard in range(store.shards):
        tag = store.shard_keys(shard).tag
        shard_keys = {key for key in keys if key.startswith(tag + ":")}
        if shard_keys:
            records = {i: r.split(",", 8) for i, r in client.hgetall(f"{tag}:r").items()}
            for r in records.values():
                r[6] = r[6] or "default"  # the default queue is stored as an empty field
            check_id_index(client, tag, shard_keys, set(records))
            dead = set(client.zrange(f"{tag}:dead", 0, -1))
            assert dead == {i for i, r in records.items() if r[0] == "3"}
            leases = dict(client.zrange(f"{tag}:l", 0, -1, withscores=True))
            assert set(leases) == {r[5] + i for i, r in records.items() if r[0] == "1"}
            by_queue: dict[str, dict[str, float]] = defaultdict(dict)
            for i, r in records.items():
                if r[0] == "1":
                    by_queue[f"{tag}:q:{r[6]}:l"][r[5] + i] = leases[r[5] + i]
            assert {key for key in shard_keys if key.endswith(":l") and ":q:" in key} == set(
                by_queue
            ), "each queue's lease zset holds exactly its leases"
            for key, members in by_queue.items():
                assert dict(client.zrange(key, 0, -1, withscores=True)) == members
            expiry = set(client.zrange(f"{tag}:x", 0, -1))
            assert expiry == {i for i, r in records.items() if r[0] == "2"}
            expected: dict[str, dict[str, float]] = defaultdict(dict)
            for timer_id, (code, _, due, _, _, seq, queue, _, _) in records.items():
                if code == "0":
                    expected[queue][seq + timer_id] = float(due)
            queues = set(expected)
            assert client.smembers(f"{tag}:queues") == queues
            buckets = {key for key in shard_keys if ":b:" in key}
            assert buckets == {
                f"{tag}:q:{queue}:b:{low}"
                for queue in queues
                for low in client.zrange(f"{tag}:q:{queue}:i", 0, -1)
            }, "the index lists exactly the non-empty due pages"
            for queue, members in expected.items():
                check_due_pages(client, f"{tag}:q:{queue}", members)
            indexes = {key for key in shard_keys if key.endswith(":i")}
            assert indexes == {f"{tag}:q:{queue}:i" for queue in queues}


def check_due_pages(client: Any, queue_key: str, members: dict[str, float]) -> None:
    """A queue's due pages hold its scheduled timers, each in the page whose range holds its
    due time, at most 128 a page unless all are due at one ms."""
    lows = client.zrange(f"{queue_key}:i", 0, -1, withscores=True)
    found: dict[str, float] = {}
    for n, (low, score) in enumerate(lows):
        assert low == str(int(score))
        page = dict(client.zrange(f"{queue_key}:b:{low}", 0, -1, withscores=True))
        assert page
        assert len(page) <= 128 or len(set(page.values())) == 1
        assert all(due >= score for due in page.values())
        if n + 1 < len(lows):
            assert all(due < lows[n + 1][1] for due in page.values())
        found.update(page)
    assert found == members


def check_id_index(client: Any, tag: str, shard_keys: set[str], ids: set[str]) -> None:
    """The id index holds every id once, in pages of at most 128 that partition the id order."""
    lows = client.zrange(f"{tag}:ids", 0, -1)
    pages = {key for key in shard_keys if key.startswith(f"{tag}:ids:")}
    assert pages == {f"{tag}:ids:{low}" for low in lows}, "the index lists exactly its pages"
    indexed: list[str] = []
    for n, low in enumerate(lows):
        members = client.zrange(f"{tag}:ids:{low}", 0, -1)
        assert 0 < len(members) <= 128
        assert all(m >= low for m in members)
        if n + 1 < len(lows):
            assert all(m < lows[n + 1] for m in members)
        indexed += members
    assert sorted(indexed) == sorted(ids)
    assert len(indexed) == len(ids)


@pytest.fixture(params=["redis_server", "redis_cluster"])
def server(request: pytest.FixtureRequest) -> Server:
    found: Server = request.getfixturevalue(request.param)
    return found


def open_store(server: Server, clock: ManualClock | None = None, **options: Any) -> RedisStore:
    prefix = options.pop("prefix", f"t{uuid.uuid4().hex[:12]}")
    return RedisStore.from_url(server.url, prefix=prefix, clock=clock, **options)


@pytest.fixture
async def store(server: Server, clock: ManualClock) -> AsyncIterator[RedisStore]:
    opened = open_store(server, clock, settings=StoreSettings(retention_ms=60_000))
    try:
        yield opened
    finally:
        await opened.close()


def at(clock: ManualClock, delay_ms: int, **fields: Any) -> Timer:
    return Timer(due_ms=clock.now_ms + delay_ms, **fields)


async def test_cluster_spreads_the_default_shards_over_every_master(redis_cluster: Any) -> None:
    """The seed's minute hash tag put a whole minute's timers on one node."""
    store = RedisStore.from_url(redis_cluster.url)  # the default prefix and 16 shards
    try:
        now = store.now_ms()
        timers = [Timer(due_ms=now + MINUTE + n % 1000) for n in range(10_000)]
        await store.add_many(timers)
        per_node = []
        for client, keys in zip(
            node_clients(redis_cluster), keys_by_node(redis_cluster, "tickwheel"), strict=True
        ):
            with client:
                per_node.append(sum(client.hlen(key) for key in keys if key.endswith(":r")))
            assert keys, "every master holds keys"
        assert sum(per_node) == 10_000
        assert all(count > 0 for count in per_node), per_node
        assert (await store.stats()).counts[State.SCHEDULED] == 10_000
    finally:
        await store.close()


async def test_every_key_of_a_shard_is_in_one_slot(redis_cluster: Any, clock: ManualClock) -> None:
    """Scripts build bucket and index keys from data; they must still share the shard's slot."""
    store = open_store(redis_cluster, clock)
    try:
        for n in range(200):
            await store.add(at(clock, n * 7_000, queue=f"q{n % 3}"))
        await store.add(at(clock, 0, id="dead"))
        await store.add(at(clock, 0, id="acked"))
        for lease in await store.claim("default", clock.now_ms, 10, 1000):
            if lease.timer.id == "dead":
                await store.kill(lease, "boom")
            else:
                await store.ack(lease)
        await store.claim("q1", clock.now_ms + 5 * MINUTE, 5, 1000)
        keys = all_keys(redis_cluster, store.prefix)
        kinds = {key.split("}:")[1].split(":")[0] for key in keys}
        assert kinds == {"r", "l", "x", "ids", "dead", "queues", "q"}
        slots: dict[str, set[int]] = defaultdict(set)
        with node_clients(redis_cluster)[0] as client:
            for key in keys:
                slots[key.split("}")[0]].add(client.execute_command("CLUSTER", "KEYSLOT", key))
        assert len(slots) == store.shards
        assert all(len(shard_slots) == 1 for shard_slots in slots.values())
        assert_layout_consistent(redis_cluster, store)
    finally:
        await store.close()


async def test_one_subscription_hears_wakes_from_every_cluster_node(
    redis_cluster: Any, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Classic PUBLISH is broadcast: a store subscribed on one node hears scripts on all."""
    first = min(redis_cluster.nodes, key=lambda node: node.port).port
    monkeypatch.setattr(
        "tickwheel.stores.redis.listen.random.choice",
        lambda nodes: next(node for node in nodes if node.port == first),
    )
    store = open_store(redis_cluster, clock)
    try:
        while await store.wait("q0", 0.05):
            pass  # subscribed
        for n in range(24):  # a queue each, so every add is its queue's earliest
            waiter = asyncio.create_task(store.wait(f"q{n}", 2))
            await asyncio.sleep(0.01)
            await store.add(at(clock, 0, id=f"t{n}", queue=f"q{n}"))
            assert await waiter is True, f"t{n}"
        nodes_with_records = [
            {key.split("}")[0] + "}" for key in keys if key.endswith(":r")}
            for keys in keys_by_node(redis_cluster, store.prefix)
        ]
        tags = {store.shard_keys(shard_of(f"t{n}", store.shards)).tag for n in range(24)}
        assert all(tags & on_node for on_node in nodes_with_records), "adds hit every node"
    finally:
        await store.close()


async def test_cancel_leaves_no_member_behind(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    far = await store.add(at(clock, 10 * MINUTE))
    assert len(all_keys(server, store.prefix)) > 0
    assert await store.cancel(far.id) is True
    assert all_keys(server, store.prefix) == []
    same_minute = [await store.add(at(clock, 10 * MINUTE + n)) for n in range(2)]
    assert await store.cancel(same_minute[0].id) is True
    assert_layout_consistent(server, store)
    assert await store.cancel(same_minute[1].id) is True
    assert all_keys(server, store.prefix) == [], "no bucket, index, queue or record is left"
    clock.advance(11 * MINUTE)
    assert await store.claim("default", clock.now_ms, 10, 1000) == []


async def test_bucket_index_holds_only_non_empty_buckets(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    ids = [(await store.add(at(clock, n * 20_000, queue=f"q{n % 2}"))).id for n in range(30)]
    assert_layout_consistent(server, store)
    await store.reschedule(ids[0], clock.now_ms + 30 * MINUTE)
    await store.cancel(ids[3])
    clock.advance(5 * MINUTE)
    leases = await store.claim("q0", clock.now_ms, 4, 1000)
    assert_layout_consistent(server, store)
    await store.retry(leases[0], clock.now_ms + MINUTE, "later")
    await store.kill(leases[1], "dead")
    await store.ack(leases[2])
    clock.advance(1000)  # the fourth lease expires and returns with the next claim
    await store.claim("q1", clock.now_ms, 100, 1000)
    assert_layout_consistent(server, store)
    clock.advance(MINUTE)  # the ack's retention ends
    await store.stats()
    assert_layout_consistent(server, store)


async def test_equal_due_times_are_claimed_in_insertion_order(
    store: RedisStore, clock: ManualClock
) -> None:
    ids = ["m", "c", "x", "a", "q", "b"]  # not in id order, and over several shards
    assert len({shard_of(i, store.shards) for i in ids}) > 1
    for timer_id in ids:
        await store.add(at(clock, 500, id=timer_id))
    assert await store.reschedule("c", clock.now_ms + 500) is True  # to the back of its ties
    clock.advance(500)
    first = await store.claim("default", clock.now_ms, 2, 100)
    rest = await store.claim("default", clock.now_ms, 10, 100)
    assert [lease.timer.id for lease in first + rest] == ["m", "x", "a", "q", "b", "c"]
    clock.advance(100)  # all leases expire; they come back in the order they were claimed
    again = await store.claim("default", clock.now_ms, 10, 100)
    assert [lease.timer.id for lease in again] == ["m", "x", "a", "q", "b", "c"]


async def test_claim_takes_the_global_earliest_when_one_shard_holds_most(
    store: RedisStore, clock: ManualClock
) -> None:
    """Each shard first shows a share of the limit; a shard that needs more is asked again."""
    crowded = [f"c{n}" for n in range(2000) if shard_of(f"c{n}", store.shards) == 0][:30]
    others = [f"o{n}" for n in range(200) if shard_of(f"o{n}", store.shards) != 0][:20]
    for n, timer_id in enumerate(crowded):
        await store.add(at(clock, 100 + n, id=timer_id))
    for n, timer_id in enumerate(others):
        await store.add(at(clock, 200 + n, id=timer_id))
    clock.advance(1000)
    leases = await store.claim("default", clock.now_ms, 40, 1000)
    assert [lease.timer.id for lease in leases] == crowded + others[:10]
    rest = await store.claim("default", clock.now_ms, 40, 1000)
    assert [lease.timer.id for lease in rest] == others[10:]


async def test_layout_arguments_are_checked(server: Server) -> None:
    for options in ({"prefix": "a{b}"}, {"prefix": ""}, {"shards": 0}, {"shards": 20_000}):
        with pytest.raises(InvalidArgument):
            open_store(server, **options)
    with pytest.raises(InvalidArgument):
        RedisStore.from_url("http://localhost:6379")


async def test_year_9999_due_times_round_trip_exactly(server: Server) -> None:
    clock = ManualClock(YEAR_9999_MS - 10_000)
    store = open_store(server, clock)
    try:
        added = await store.add(Timer(id="far", due_ms=YEAR_9999_MS))
        assert added.due_ms == YEAR_9999_MS
        got = await store.get("far")
        assert got is not None
        assert got.due_ms == YEAR_9999_MS
        assert got.created_ms == YEAR_9999_MS - 10_000
        assert (await store.stats()).earliest_due_ms == YEAR_9999_MS
        clock.now_ms = YEAR_9999_MS
        (lease,) = await store.claim("default", YEAR_9999_MS, 1, 1)
        assert (lease.timer.due_ms, lease.deadline_ms) == (YEAR_9999_MS, YEAR_9999_MS + 1)
        await store.retry(lease, YEAR_9999_MS + 1, "again")
        got = await store.get("far")
        assert got is not None
        assert (got.due_ms, got.updated_ms) == (YEAR_9999_MS + 1, YEAR_9999_MS)
        tag = store.shard_keys(shard_of("far", store.shards)).tag
        with inspector(server) as client:
            (low,) = client.zrange(f"{tag}:q:default:i", 0, -1)
            bucket = f"{tag}:q:default:b:{low}"
            (score,) = [s for _, s in client.zrange(bucket, 0, -1, withscores=True)]
        assert int(score) == YEAR_9999_MS + 1
    finally:
        await store.close()


async def test_the_spec_is_stored_verbatim_through_every_step(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    """Lua edits only the header: numbers in the payload keep their exact JSON text."""
    payload = {"f": 0.1, "big": 2**64 + 1, "tiny": 1e-300, "neg": -0.0, "s": 'ü|,\n"{x}'}
    callback = Callback(url="https://example.com/a?b=1", headers={"X-T": "a|b"}, body="é")
    timer = at(clock, 0, id="exact", payload=payload, callback=callback,
               retry=RetryPolicy(max_attempts=3, min_backoff_s=0.25))  # fmt: skip
    await store.add(timer)
    (lease,) = await store.claim("default", clock.now_ms, 1, 1000)
    await store.retry(lease, clock.now_ms, 'HTTP 503 | ü, "quoted"\nsecond line')
    (lease,) = await store.claim("default", clock.now_ms, 1, 1000)
    await store.kill(lease, "x" * 5000)
    assert await store.replay("exact") is True
    got = await store.get("exact")
    assert got is not None
    assert got.spec() == timer.spec()
    assert repr(got.payload) == repr(payload)
    assert got.last_error == "x" * 1023 + "…"
    assert (got.attempt, got.state) == (2, State.SCHEDULED)
    tag = store.shard_keys(shard_of("exact", store.shards)).tag
    with inspector(server) as client:
        raw = client.hget(f"{tag}:r", "exact")
    assert raw.endswith(encode_spec(timer))


async def test_add_many_stores_each_timer_as_add_would(
    store: RedisStore, clock: ManualClock
) -> None:
    callback = Callback(url="https://example.com/hook")
    timers = [at(clock, n * 997, callback=callback, payload=n % 3 or None) for n in range(1500)]
    stored = await store.add_many(timers)
    assert [t.id for t in stored] == [t.id for t in timers]
    for timer in stored[::97]:
        assert await store.get(timer.id) == timer
        assert timer.created_ms == clock.now_ms
    # a repeat is idempotent, even twice in one batch; another spec conflicts, after the rest
    clock.advance(1)
    again = await store.add_many([timers[0], timers[0], timers[1]])
    assert again == [stored[0], stored[0], stored[1]]
    late = at(clock, 5, id="late")
    with pytest.raises(TimerExists) as caught:
        await store.add_many([late, timers[2].evolve(payload="other")])
    assert caught.value.timer_id == timers[2].id
    assert await store.get("late") is not None
    replaced = await store.add_many([timers[3].evolve(payload="new")], replace=True)
    assert replaced[0].payload == "new"
    assert (await store.stats()).counts[State.SCHEDULED] == 1501


async def test_replacing_keeps_the_fencing_token_moving_on(
    store: RedisStore, clock: ManualClock
) -> None:
    await store.add(at(clock, 0, id="t", payload=1))
    (old,) = await store.claim("default", clock.now_ms, 1, 1000)
    (replaced,) = await store.add_many([at(clock, 0, id="t", payload=2)], replace=True)
    assert replaced.attempt == old.token == 1
    assert replaced == await store.get("t")
    (new,) = await store.claim("default", clock.now_ms, 1, 1000)
    assert new.token == 2
    with pytest.raises(LeaseLost):
        await store.ack(old)
    await store.ack(new)


async def test_an_outage_raises_store_unavailable_then_recovers(
    start_redis: Any, clock: ManualClock
) -> None:
    server = start_redis()
    store = open_store(server, clock, timeout_s=0.5)
    try:
        await store.add(at(clock, 0, id="before"))
        server.stop()
        for attempt in (store.add(at(clock, 0)), store.claim("default", clock.now_ms, 10, 100)):
            started = time.monotonic()
            with pytest.raises(StoreUnavailable) as caught:
                await attempt
            assert time.monotonic() - started < 3, "an outage must not hang"
            assert isinstance(caught.value.__cause__, redis.RedisError | OSError)
        server.start()  # same port, empty: it lost the data and the loaded scripts
        added = await store.add(at(clock, 0, id="after"))
        leases = await store.claim("default", clock.now_ms, 10, 100)
        assert [lease.timer.id for lease in leases] == [added.id]
        assert await store.get("before") is None
    finally:
        await store.close()


async def test_a_hung_server_times_out(start_redis: Any, clock: ManualClock) -> None:
    server = start_redis()
    store = open_store(server, clock, timeout_s=0.3)
    try:
        await store.add(at(clock, 0, id="t"))
        os.kill(server.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            with pytest.raises(StoreUnavailable):
                await store.claim("default", clock.now_ms, 10, 100)
            assert time.monotonic() - started < 2
        finally:
            os.kill(server.pid, signal.SIGCONT)
        (lease,) = await store.claim("default", clock.now_ms, 10, 100)
        assert lease.timer.id == "t"
    finally:
        await store.close()


@pytest.fixture
def local_ms(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The local monotonic clock the server clock builds on, set by the test."""
    now = [5_000.0]
    monkeypatch.setattr(server_clock, "_local_ms", lambda: now[0])
    return now


async def test_the_server_clock_is_used_when_none_is_injected(
    server: Server, local_ms: list[float]
) -> None:
    store = open_store(server, clock_refresh_s=3600)
    try:
        added = await store.add(Timer(id="soon", due_ms=store.now_ms() + 2000))
        with node_clients(server)[0] as client:
            seconds, micros = client.time()
        server_ms = seconds * 1000 + micros // 1000
        assert abs(store.now_ms() - server_ms) < 1000, "the offset to the server is applied"
        assert abs(added.created_ms - server_ms) < 1000
        assert await store.claim("default", store.now_ms(), 10, 1000) == []
        local_ms[0] += 2000  # the local clock runs on between measurements
        (lease,) = await store.claim("default", store.now_ms(), 10, 1000)
        assert lease.timer.id == "soon"
        assert lease.deadline_ms == store.now_ms() + 1000
    finally:
        await store.close()


async def test_the_server_clock_is_measured_again_and_never_steps_back(
    server: Server, local_ms: list[float]
) -> None:
    store = open_store(server, clock_refresh_s=0)  # measure before every call
    try:
        await store.stats()
        first = store.now_ms()
        local_ms[0] += 3_600_000  # the local clock jumps an hour ahead: the server does not
        assert store.now_ms() - first >= 3_600_000
        await store.stats()  # measured again: the server is an hour behind what we said
        assert store.now_ms() >= first + 3_600_000, "the clock never steps back"
        local_ms[0] -= 7_200_000
        await store.stats()
        await asyncio.sleep(0.01)
        assert store.now_ms() >= first + 3_600_000
    finally:
        await store.close()


class RedisComparison(StoreComparison):
    """`RedisStore` beside the reference, checking the key layout after every step."""

    server: Any = None

    def make_store(self, clock: ManualClock, settings: StoreSettings, tmp: Path) -> Store:
        self.inspector = inspector(self.server)
        return open_store(self.server, clock, settings=settings)

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.inspector.close()

    @invariant()
    def layout_consistent(self) -> None:
        assert isinstance(self.other, RedisStore)
        check_layout(self.inspector, self.other)


# the Cluster runs fewer examples: each step makes round trips to three servers
EXAMPLES = {"redis_server": 20, "redis_cluster": 8}


@pytest.mark.parametrize("backend", sorted(EXAMPLES))
def test_redis_matches_the_reference_store(request: pytest.FixtureRequest, backend: str) -> None:
    machine = type("Comparison", (RedisComparison,), {"server": request.getfixturevalue(backend)})
    run_state_machine_as_test(
        machine,
        settings=hypothesis_settings(
            max_examples=EXAMPLES[backend], stateful_step_count=25, deadline=None
        ),
    )


async def test_a_burst_of_calls_waits_for_a_connection_instead_of_failing(
    redis_server: Any,
) -> None:
    # 512 callbacks settling at once must not meet "Too many connections" (StoreUnavailable)
    store = RedisStore.from_url(
        redis_server.url, prefix=f"t{uuid.uuid4().hex[:12]}", max_connections=4
    )
    try:
        found = await asyncio.gather(*(store.get(f"missing-{i}") for i in range(300)))
        assert found == [None] * 300
    finally:
        await store.close()


async def test_id_index_pages_split_and_empty(
    server: Server, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids in any order fill pages of at most 128; list pages through them; emptied pages go."""
    monkeypatch.setattr(redis_store, "LIST_BUDGET", 100)  # a state filter resumes many times
    store = open_store(server, clock, shards=1, settings=StoreSettings(retention_ms=60_000))
    try:
        growing = [f"g{n:04}" for n in range(300)]  # appended: full pages stay full
        await store.add_many([at(clock, MINUTE, id=i) for i in growing])
        with inspector(server) as client:
            lows = client.zrange(f"{store.shard_keys(0).tag}:ids", 0, -1)
        assert len(lows) == 3, "appending ids fills each page before starting the next"
        shuffled = [f"r{(n * 7919) % 1000:04}" for n in range(1000)]  # splits in the middle
        for start in range(0, 1000, 150):
            await store.add_many([at(clock, MINUTE, id=i) for i in shuffled[start : start + 150]])
        for timer_id in reversed([f"a{n:03}" for n in range(200)]):  # each before the rest
            await store.add(at(clock, 2 * MINUTE, id=timer_id))
        assert_layout_consistent(server, store)
        everything = sorted([*growing, *shuffled, *(f"a{n:03}" for n in range(200))])
        seen: list[str] = []
        cursor = None
        while True:
            page = await store.list(limit=97, cursor=cursor)
            seen += [t.id for t in page.timers]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert seen == everything
        clock.advance(MINUTE)
        leases = await store.claim("default", clock.now_ms, 1300, 1000)
        for lease in leases[:3]:
            await store.kill(lease, "dead")
        await store.ack_many(leases[3:1000])  # the rest stay leased
        leased = sorted(lease.timer.id for lease in leases[1000:])
        # one state among many timers: each shard reads LIST_BUDGET ids per call and resumes
        assert [t.id for t in (await store.list(State.LEASED, limit=1000)).timers] == leased
        monkeypatch.setattr(redis_store, "LIST_BUDGET", 1000)  # few leases: the lease zset
        seen = []
        cursor = None
        while True:
            page = await store.list(State.LEASED, limit=97, cursor=cursor)
            seen += [t.id for t in page.timers]
            if page.cursor is None:
                break
            cursor = page.cursor
        assert seen == leased
        monkeypatch.setattr(redis_store, "LIST_BUDGET", 100)
        assert [t.id for t in (await store.list(State.SCHEDULED, limit=1000)).timers] == [
            f"a{n:03}" for n in range(200)
        ]
        dead = sorted(lease.timer.id for lease in leases[:3])
        assert [t.id for t in (await store.list(State.DEAD)).timers] == dead
        counts = (await store.stats()).counts
        assert [counts[s] for s in State] == [200, 300, 997, 3]
        for timer_id in [f"a{n:03}" for n in range(200)]:
            assert await store.cancel(timer_id)
        assert_layout_consistent(server, store)
        clock.advance(MINUTE)  # the acked timers' retention ends: stats purges them
        for _ in range(4):  # PURGE_LIMIT per shard per call
            await store.stats()
        assert len((await store.list(limit=1000)).timers) == 303
        assert_layout_consistent(server, store)
    finally:
        await store.close()


async def test_due_pages_split_and_keep_due_order(server: Server, clock: ManualClock) -> None:
    """Timers added in any due order fill pages of at most 128 and are claimed in due order."""
    store = open_store(server, clock, shards=1)
    try:
        timers = [at(clock, MINUTE + (n * 7919) % 100_000, id=f"r{n:04}") for n in range(700)]
        timers += [at(clock, MINUTE + 10 * n, id=f"g{n:04}") for n in range(300)]  # ascending
        timers += [at(clock, MINUTE - 5 * n, id=f"d{n:04}") for n in range(300)]  # descending
        timers += [at(clock, MINUTE + 50_000, id=f"t{n:04}") for n in range(200)]  # one due ms
        for start in range(0, len(timers), 130):
            await store.add_many(timers[start : start + 130])
        for timer in timers[::50]:  # one by one too: reschedule goes through enqueue
            assert await store.reschedule(timer.id, timer.due_ms)
        assert_layout_consistent(server, store)
        order = {timer.id: n for n, timer in enumerate(timers)}
        for timer in timers[::50]:
            order[timer.id] += len(timers)  # rescheduled: behind its ties
        expected = sorted(order, key=lambda i: (timers[order[i] % len(timers)].due_ms, order[i]))
        clock.advance(200_000)
        claimed = []
        while leases := await store.claim("default", clock.now_ms, 97, 60_000):
            claimed += [lease.timer.id for lease in leases]
            assert_layout_consistent(server, store)
        assert claimed == expected
    finally:
        await store.close()
