"""Redis-specific tests: the key layout, Cluster placement, outages, the server clock, batches.

The behaviour every store shares is in test_contract.py (run against "redis" and
"redis-cluster" too); here is what only the Redis layout can get wrong.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from importlib import metadata
from itertools import pairwise
from pathlib import Path
from typing import Any, Protocol

import pytest
import redis
from budget import examples
from hypothesis import settings as hypothesis_settings
from hypothesis.stateful import invariant, run_state_machine_as_test

from tickwheel.errors import InvalidArgument, LeaseLost, StoreUnavailable, TimerExists
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores import Lease, Store, StoreSettings, in_doubt
from tickwheel.stores.base import Limit, QueueSettings
from tickwheel.stores.codec import encode_limit, encode_spec
from tickwheel.stores.redis import RedisStore, listing, shard_of
from tickwheel.stores.redis import clock as server_clock
from tickwheel.stores.redis.scripts import with_lib
from tickwheel.stores.wake import Wakeups

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

    Each scheduled timer is in exactly one place: its queue's near set (under
    <due length><due><seq><id>, with its due time) or the minute or day slot of its due time;
    slot indexes list exactly the non-empty slots; lease batches, counts, dead letters and the
    done list agree with the records' states.
    """
    keys = set(client.scan_iter(match=f"{{{store.prefix}:*", count=1000))
    for shard in range(store.shards):
        tag = store.shard_keys(shard).tag
        shard_keys = {key for key in keys if key.startswith(tag + ":")}
        if shard_keys:
            check_shard(client, tag, shard_keys)


def check_shard(client: Any, tag: str, shard_keys: set[str]) -> None:
    records = {i: r.split(",", 8) for i, r in client.hgetall(f"{tag}:r").items()}
    for r in records.values():
        r[6] = r[6] or "default"  # the default queue is stored as an empty field
    counts = client.hgetall(f"{tag}:n")
    per_queue: dict[str, int] = {}
    for r in records.values():
        per_queue[f"{r[0]}|{r[6]}"] = per_queue.get(f"{r[0]}|{r[6]}", 0) + 1
    kept = {name: int(n) for name, n in counts.items() if re.fullmatch(r"\d\|.*", name)}
    assert kept == per_queue, "counts per state and queue"
    named = {name.partition("|")[2] for name in kept}
    assert set(client.zrange(f"{tag}:qn", 0, -1)) == named, "the index of queue names"
    heads = dict(client.zrange(f"{tag}:h", 0, -1, withscores=True))
    for r in records.values():
        if r[0] == "0":  # a queue's head is never later than its scheduled timers
            assert heads.get(r[6], math.inf) <= int(r[2], 36), "the queue's head"
    assert set(client.zrange(f"{tag}:dead", 0, -1)) == {
        i for i, r in records.items() if r[0] == "3"
    }
    done = set()
    for done_list in (f"{tag}:x", f"{tag}:xo"):  # plain timers, schedules' occurrences
        expiry = None
        for entry in client.lrange(done_list, 0, -1):  # @<expiry>, then the ids acked with it
            if entry.startswith("@"):
                expiry = entry[1:]
            else:
                assert expiry is not None, "each id follows its expiry mark"
                assert ("@" in entry) == done_list.endswith("o"), "each kind in its list"
                done.add((expiry, entry))
    assert {(r[5], i) for i, r in records.items() if r[0] == "2"} <= done
    # leases: batches named <deadline>|<queue>, counted, listed, indexed
    batches: dict[str, set[str]] = defaultdict(set)
    for i, r in records.items():
        if r[0] == "1":
            batches[f"{r[5][9:]}|{r[6]}"].add(i)  # seq: <lease seq><deadline>
    assert {n: int(c) for n, c in counts.items() if "|" in n and n not in kept} == {
        n: len(m) for n, m in batches.items()
    }, "each batch counts the leases it holds"
    assert dict(client.zrange(f"{tag}:l", 0, -1, withscores=True)) == {
        n: float(n.split("|")[0]) for n in batches
    }
    by_queue: dict[str, set[str]] = defaultdict(set)
    for name, members in batches.items():
        deadline, queue = name.split("|")
        by_queue[queue].add(deadline)
        assert members <= set(client.lrange(f"{tag}:b:{queue}:{deadline}", 0, -1))
    assert {k for k in shard_keys if k.startswith(f"{tag}:b:")} == {
        f"{tag}:b:{n.split('|')[1]}:{n.split('|')[0]}" for n in batches
    }
    assert {k for k in shard_keys if ":q:" in k and k.endswith(":l")} == {
        f"{tag}:q:{q}:l" for q in by_queue
    }
    for queue, deadlines in by_queue.items():
        assert set(client.zrange(f"{tag}:q:{queue}:l", 0, -1)) == deadlines
    # scheduled timers: each in its near set or in the slot of its due time, once
    expected: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for i, r in records.items():
        if r[0] == "0":
            expected[r[6]].append((i, r[2]))
    queues = client.smembers(f"{tag}:queues")
    assert queues >= set(expected), "day slots may keep a queue listed with stale entries"
    for queue in queues:
        timers = dict(expected.get(queue, []))
        near = dict(client.zrange(f"{tag}:q:{queue}:n", 0, -1, withscores=True))
        placed: dict[str, list[str]] = defaultdict(list)
        for member, due in near.items():
            key = int(member[0], 36) + 1  # <length of the due><due, base 36><seq><id>
            timer_id = member[key + 9 :]
            assert records[timer_id][2] == member[1:key]
            assert records[timer_id][5] + timer_id == member[key:]
            assert int(records[timer_id][2], 36) == due
            placed[timer_id].append("near")
        for level, width in ((1, 60_000), (2, 86_400_000)):
            starts = client.zrange(f"{tag}:q:{queue}:i{level}", 0, -1)
            slots = {k for k in shard_keys if k.startswith(f"{tag}:q:{queue}:{level}:")}
            assert slots == {f"{tag}:q:{queue}:{level}:{s}" for s in starts}, "index = slots"
            for start in starts:
                for timer_id in client.lrange(f"{tag}:q:{queue}:{level}:{start}", 0, -1):
                    due = int(timers[timer_id], 36) if timer_id in timers else None
                    if level == 1:  # minute slots hold exactly their scheduled timers
                        assert due is not None, timer_id
                        assert due - due % width == int(start), timer_id
                        placed[timer_id].append("minute slot")
                    elif due is not None and due - due % width == int(start):
                        placed[timer_id].append("day slot")  # else a stale entry
        assert set(placed) == set(timers), "every scheduled timer is in its place"
        for timer_id, places in placed.items():
            # (a day slot may also list a timer since moved nearer: moving it is idempotent)
            assert places.count("near") + places.count("minute slot") <= 1, (timer_id, places)


@pytest.fixture(params=["redis_server", "redis_cluster"])
def server(request: pytest.FixtureRequest) -> Server:
    found: Server = request.getfixturevalue(request.param)
    return found


def open_store(server: Server, clock: ManualClock | None = None, **options: Any) -> RedisStore:
    """A store on a new prefix in 16 shards (on a standalone server too, where a new prefix
    gets 1): what this module checks is the work across shards."""
    prefix = options.pop("prefix", f"t{uuid.uuid4().hex[:12]}")
    options.setdefault("shards", 16)
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
        assert kinds == {"r", "l", "x", "n", "dead", "queues", "q", "b", "c", "h", "qn"}
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


async def test_a_new_connection_reads_no_package_metadata(
    redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py read its package's metadata for each new connection (0.8 ms): a burst of
    callers filling the pool held the event loop for tens of ms."""
    store = open_store(redis_server)
    reads = 0
    version = metadata.version

    def counting(name: str) -> str:
        nonlocal reads
        reads += 1
        return version(name)

    monkeypatch.setattr(metadata, "version", counting)
    try:
        assert await asyncio.gather(*(store.get(f"x{n}") for n in range(20))) == [None] * 20
        assert reads == 0
    finally:
        await store.close()


async def test_an_add_over_many_queues_wakes_them_in_one_message_a_shard(
    redis_server: Any, clock: ManualClock
) -> None:
    """A message a queue made a 1,000-queue add a flood every worker read one by one."""
    store = open_store(redis_server, clock)
    client = redis_server.client()
    pubsub = client.pubsub()
    try:
        pubsub.subscribe(f"{store.prefix}:wake")
        assert pubsub.get_message(timeout=1)["type"] == "subscribe"
        waiter = asyncio.create_task(store.wait("q7", 2))
        await asyncio.sleep(0.05)
        await store.add_many([at(clock, 0, id=f"t{n}", queue=f"q{n % 50}") for n in range(400)])
        assert await waiter is True
        messages = []
        while (message := pubsub.get_message(timeout=0.2)) is not None:
            messages.append(message["data"])
        assert len(messages) <= store.shards
        assert {name for text in messages for name in text.split(" ")} == {
            f"q{n}" for n in range(50)
        }
    finally:
        pubsub.close()
        client.close()
        await store.close()


async def test_a_flood_of_wakes_gives_other_tasks_turns_while_it_is_read(
    redis_server: Any, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Buffered messages are read without suspending: 5,000 held the event loop throughout."""
    heard = 0
    notify = Wakeups.notify

    def counting(self: Wakeups, queue: str) -> None:
        nonlocal heard
        heard += 1
        notify(self, queue)

    monkeypatch.setattr(Wakeups, "notify", counting)
    store = open_store(redis_server, clock)
    client = redis_server.client()
    try:
        while await store.wait("q0", 0.05):
            pass  # subscribed
        last = asyncio.create_task(store.wait("last", 5))
        seen: list[int] = []

        async def ticker() -> None:
            while not last.done():
                seen.append(heard)
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        flood = "for n = 1, 5000 do redis.call('PUBLISH', KEYS[1], 'f' .. n) end"
        client.eval(flood + " redis.call('PUBLISH', KEYS[1], 'last')", 1, f"{store.prefix}:wake")
        assert await last is True
        await ticking
        assert heard >= 5001
        assert max(b - a for a, b in pairwise(seen)) <= 100
    finally:
        client.close()
        await store.close()


async def test_cancel_leaves_no_member_behind_within_the_hour(
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


async def test_slot_indexes_hold_only_non_empty_slots(
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
        with inspector(server) as client:  # due on a minute: the slot's name is exact
            assert client.zrange(f"{tag}:q:default:i1", 0, -1) == [str(YEAR_9999_MS + 1)]
            assert client.lrange(f"{tag}:q:default:1:{YEAR_9999_MS + 1}", 0, -1) == ["far"]
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
EXAMPLES = {
    "redis_server": examples(full=20, ci=5),
    "redis_cluster": examples(full=8, ci=2),
}


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


async def test_list_walks_every_shard_and_state(
    server: Server, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages cross shards and HSCAN steps; a state filter resumes where its budget ran out."""
    monkeypatch.setattr(listing, "SCAN_STEPS", 1)  # one HSCAN step per call
    store = open_store(server, clock, shards=4, settings=StoreSettings(retention_ms=60_000))
    try:
        ids = [f"r{(n * 7919) % 1500:04}" for n in range(1500)]
        for start in range(0, 1500, 250):
            await store.add_many(
                [at(clock, MINUTE + n, id=i) for n, i in enumerate(ids)][start : start + 250]
            )
        for timer_id in reversed([f"a{n:03}" for n in range(200)]):
            await store.add(at(clock, 2 * MINUTE, id=timer_id))
        everything = sorted([*ids, *(f"a{n:03}" for n in range(200))])
        assert await walk(store, None, 97) == everything
        clock.advance(MINUTE + 1500)
        leases = await store.claim("default", clock.now_ms, 1300, 1000)
        for lease in leases[:3]:
            await store.kill(lease, "dead")
        await store.ack_many(leases[3:1000])  # the rest stay leased
        leased = sorted(lease.timer.id for lease in leases[1000:])
        assert await walk(store, State.LEASED, 97) == leased
        assert await walk(store, State.LEASED, 1000) == leased
        assert await walk(store, State.SCHEDULED, 50) == sorted(
            [f"a{n:03}" for n in range(200)]
            + [i for i in ids if i not in set(leased) | {lease.timer.id for lease in leases[:1000]}]
        )
        dead = sorted(lease.timer.id for lease in leases[:3])
        assert await walk(store, State.DEAD, 2) == dead
        assert len(await walk(store, State.DONE, 300)) == 997
        counts = (await store.stats()).counts
        assert [counts[s] for s in State] == [400, 300, 0, 997, 3]
        assert_layout_consistent(server, store)
        clock.advance(MINUTE)  # the acked timers' retention ends: stats purges them all
        assert (await store.stats()).counts[State.DONE] == 0
        assert await walk(store, State.DONE, 300) == []
        assert len(await walk(store, None, 1000)) == 703
        assert_layout_consistent(server, store)
    finally:
        await store.close()


async def walk(store: RedisStore, state: State | None, limit: int) -> list[str]:
    """The ids of every page of `store.list(state)`, sorted; no page holds more than limit."""
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list(state, limit=limit, cursor=cursor)
        assert len(page.timers) <= limit
        assert all(state in (None, t.state) for t in page.timers)
        seen += [t.id for t in page.timers]
        if page.cursor is None:
            assert len(seen) == len(set(seen)), "no timer twice"
            return sorted(seen)
        cursor = page.cursor


async def test_slots_and_cascades_keep_due_order(server: Server, clock: ManualClock) -> None:
    """Timers in near sets, minute slots and day slots are claimed in (due, seq) order as the
    clock moves through the hour and the days."""
    store = open_store(server, clock, shards=2)
    try:
        hour, day = 60 * MINUTE, 24 * 60 * MINUTE
        timers = [at(clock, (n * 7919) % (3 * day), id=f"r{n:04}") for n in range(700)]
        timers += [at(clock, hour + 10 * n, id=f"g{n:04}") for n in range(300)]  # ascending
        timers += [at(clock, 2 * day - 5 * n, id=f"d{n:04}") for n in range(300)]  # descending
        timers += [at(clock, 50_000, id=f"t{n:04}") for n in range(200)]  # one due ms, near
        for start in range(0, len(timers), 130):
            await store.add_many(timers[start : start + 130])
        for timer in timers[::50]:  # one by one too: reschedule takes it out and puts it back
            assert await store.reschedule(timer.id, timer.due_ms)
        assert_layout_consistent(server, store)
        order = {timer.id: n for n, timer in enumerate(timers)}
        for timer in timers[::50]:
            order[timer.id] += len(timers)  # rescheduled: behind its ties
        expected = sorted(order, key=lambda i: (timers[order[i] % len(timers)].due_ms, order[i]))
        claimed = []
        for _ in range(80):  # an hour at a time: day slots move down as they come near
            clock.advance(hour)
            while leases := await store.claim("default", clock.now_ms, 97, 60_000):
                claimed += [lease.timer.id for lease in leases]
                await store.ack_many(leases)
            assert_layout_consistent(server, store)
        assert claimed == expected
    finally:
        await store.close()


async def test_a_slot_too_big_for_one_call_moves_over_several(
    server: Server, clock: ManualClock
) -> None:
    """A minute holding more timers than a script call moves (4,000) is still claimed whole,
    in order, and its earliest is found: each call moves a part."""
    store = open_store(server, clock, shards=1)
    try:
        start = clock.now_ms + 3 * MINUTE
        start -= start % MINUTE
        timers = [
            at(clock, 0, id=f"t{n:05}").evolve(due_ms=start + (n * 7919) % 9000)
            for n in range(9000)
        ]
        for first in range(0, len(timers), 1000):
            await store.add_many(timers[first : first + 1000])
        assert (await store.stats()).earliest_due_ms == start
        assert await store.next_due_ms("default") == start
        clock.now_ms = start + MINUTE
        leases = await store.claim("default", clock.now_ms, 10_000, 60_000)
        assert [lease.timer.id for lease in leases] == [
            t.id for t in sorted(timers, key=lambda t: t.due_ms)
        ]
        assert_layout_consistent(server, store)
    finally:
        await store.close()


def script_calls(server: Any) -> int:
    with server.client() as client:
        stats = client.info("commandstats")
    return sum(
        int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("evalsha", "eval")
    )


def command_calls(server: Any, name: str) -> int:
    with server.client() as client:
        stats = client.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


async def test_a_claim_reads_the_keys_of_only_the_shards_that_hold_its_queue(
    redis_server: Any, clock: ManualClock
) -> None:
    """A claim peeks at every shard, but a shard where the queue has no head holds nothing of
    it and is passed over: a queue with one timer in 16 shards costs one shard's reads, not 16
    (a crowd of small queues' claims was most of Redis's time beside a flood)."""
    server = redis_server
    store = open_store(server, clock)
    try:
        assert store.shards == 16
        await store.add(at(clock, 0, id="lone", queue="lone"))
        await store.due_queues(clock.now_ms, 10)  # the heads are kept from the first look on
        before = command_calls(server, "zrange")
        (lease,) = await store.claim("lone", clock.now_ms, 1, 60_000)
        assert lease.timer.id == "lone"
        assert command_calls(server, "zrange") - before <= 16  # 119 when every shard was read
        assert_layout_consistent(server, store)
    finally:
        await store.close()


async def test_a_claim_reads_little_of_the_shards_it_passes_over(
    redis_server: Any, clock: ManualClock
) -> None:
    """A claim of a queue due in every shard peeks at each: the peek of a shard showing due
    timers leaves its head (the claim sets it where it takes), and a wheel level read empty
    is not read again in the call (a thousand flooding queues' claims were most of Redis's
    time: 119 sorted-set reads for one timer, now 38)."""
    server = redis_server
    store = open_store(server, clock)
    try:
        await store.add_many([at(clock, 0, id=f"t{n}", queue="wide") for n in range(64)])
        await store.due_queues(clock.now_ms, 10)
        before = command_calls(server, "zrange")
        assert len(await store.claim("wide", clock.now_ms, 1, 60_000)) == 1
        assert command_calls(server, "zrange") - before <= 16 * 2 + 6
        assert (await store.due_queues(clock.now_ms, 10)).queues == ["wide"]
        assert len(await store.claim("wide", clock.now_ms, 100, 60_000)) == 63
        assert (await store.due_queues(clock.now_ms, 10)).queues == []
        assert_layout_consistent(server, store)
    finally:
        await store.close()


async def test_renewing_many_leases_is_one_script_call_per_shard(
    redis_server: Any, clock: ManualClock
) -> None:
    """A worker renews the leases it holds together (`extend_many`): one call per shard
    that holds some, not a round trip and a script call per lease."""
    server = redis_server
    store = open_store(server, clock)
    try:
        await store.add_many([at(clock, 0, id=f"t{n}") for n in range(200)])
        leases = await store.claim("default", clock.now_ms, 200, 60_000)
        before = command_calls(server, "evalsha")
        renewed = await store.extend_many(leases, 120_000)
        assert command_calls(server, "evalsha") - before <= store.shards
        assert all(lease is not None for lease in renewed)
        assert_layout_consistent(server, store)
    finally:
        await store.close()


async def test_a_bulk_fill_due_later_today_does_not_hold_back_a_due_timer(
    redis_server: Any, clock: ManualClock
) -> None:
    """Timers due later today go to minute slots, not to today's day slot, which the next claim
    would have to move down whole (4,000 entries a call) before claiming anything later than
    its start: 20,000 timers due in an hour held a timer due now back for six calls (48 s at
    10M)."""
    server = redis_server
    store = open_store(server, clock, shards=1)
    try:
        hour = 60 * MINUTE
        clock.now_ms += 2 * hour - clock.now_ms % (24 * hour)  # 02:00: today began 2 h ago
        fill = [at(clock, hour + 5 * MINUTE + n, id=f"fill{n:05}") for n in range(20_000)]
        for first in range(0, len(fill), 1000):
            await store.add_many(fill[first : first + 1000])
        await store.add(at(clock, 0, id="due-now"))
        before = script_calls(server)
        leases = await store.claim("default", clock.now_ms, 10, 60_000)
        assert [lease.timer.id for lease in leases] == ["due-now"]
        assert script_calls(server) - before <= 3  # peek, claim (and a purge): nothing moved
        assert_layout_consistent(server, store)
    finally:
        await store.close()


async def test_a_big_day_slot_coming_near_does_not_hold_back_a_due_timer(
    redis_server: Any, clock: ManualClock
) -> None:
    """Tomorrow's day slot moves down in the hour before midnight, a budget a call, only after
    what the claim needs: a timer due at 23:30 is claimed by the first call."""
    server = redis_server
    store = open_store(server, clock, shards=1)
    try:
        hour, day = 60 * MINUTE, 24 * 60 * MINUTE
        clock.now_ms += 2 * day - clock.now_ms % day - 2 * hour  # 22:00
        tomorrow = [at(clock, 4 * hour + n, id=f"tomorrow{n:05}") for n in range(20_000)]
        for first in range(0, len(tomorrow), 1000):
            await store.add_many(tomorrow[first : first + 1000])
        clock.now_ms += hour
        due = await store.add(at(clock, 30 * MINUTE, id="at-23-30"))  # in its minute slot
        clock.now_ms = due.due_ms
        before = script_calls(server)
        leases = await store.claim("default", clock.now_ms, 10, 60_000)
        assert [lease.timer.id for lease in leases] == ["at-23-30"]
        assert script_calls(server) - before <= 3
        await store.ack_many(leases)
        assert_layout_consistent(server, store)
        clock.now_ms += 3 * hour
        claimed = []
        while leases := await store.claim("default", clock.now_ms, 5000, 60_000):
            claimed += [lease.timer.id for lease in leases]
        assert claimed == [timer.id for timer in tomorrow]
    finally:
        await store.close()


async def test_cancelled_timers_in_a_day_slot_are_dropped_when_it_comes_near(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    """Cancelling leaves a day slot's entry stale (no scan of a day's timers); it is dropped,
    never fired, when the slot moves down, and rescheduling within the day fires once."""
    day = 24 * 60 * MINUTE
    kept = await store.add(at(clock, 2 * day, id="kept"))
    gone = await store.add(at(clock, 2 * day + 1, id="gone"))
    moved = await store.add(at(clock, 2 * day + 2, id="moved"))
    assert await store.cancel(gone.id)
    assert await store.reschedule(moved.id, moved.due_ms + 5)
    assert (await store.stats()).counts[State.SCHEDULED] == 2
    assert_layout_consistent(server, store)
    clock.advance(2 * day + 10)
    leases = await store.claim("default", clock.now_ms, 10, 1000)
    assert [lease.timer.id for lease in leases] == [kept.id, moved.id]
    assert await store.claim("default", clock.now_ms, 10, 1000) == []
    assert_layout_consistent(server, store)


async def test_leased_pages_cross_shards_at_any_limit(
    store: RedisStore, clock: ManualClock
) -> None:
    """A page that one shard fills exactly goes on at the start of the next shard."""
    ids = [f"l{n}" for n in range(12)]
    for timer_id in ids:
        await store.add(at(clock, 0, id=timer_id))
    assert len({shard_of(i, store.shards) for i in ids}) > 2
    await store.claim("default", clock.now_ms, 100, 60_000)
    for limit in (1, 2, 3, 5):
        assert await walk(store, State.LEASED, limit) == sorted(ids)


def test_a_script_carries_the_lib_definitions_it_uses_and_those_they_use() -> None:
    lib = (
        "-- header\n\n"
        "local A, B = KEYS[1], KEYS[2]\n"
        "-- says a\n"
        "local function a()\n  return A\nend\n"
        "local function unused()\n  return B\nend\n"
        "local function b()\n  return a()\nend\n"
    )
    script = with_lib(lib, "return b()\n")
    assert script == (
        "local A, B = KEYS[1], KEYS[2]\n"
        "-- says a\n"
        "local function a()\n  return A\nend\n"
        "local function b()\n  return a()\nend\n"
        "return b()\n"
    )


@pytest.mark.parametrize("paged", [False, True])
async def test_counts_of_a_keyspace_from_before_queues_were_counted_are_recounted(
    server: Server, store: RedisStore, clock: ManualClock, paged: bool
) -> None:
    """A keyspace written before counts were kept per queue has one bare <code> field per
    state; the first stats, queue_infos or page of queues recounts each such shard from its
    records, counting also what changed since the upgrade."""
    for n in range(20):
        await store.add(at(clock, 0, id=f"a{n}", queue="a"))
        await store.add(at(clock, 0, id=f"b{n}", queue="b"))
    await store.claim("a", clock.now_ms, 5, 1000)
    with inspector(server) as client:
        for shard in range(store.shards):
            key = f"{store.shard_keys(shard).tag}:n"
            old: dict[str, int] = {}
            for name, n in client.hgetall(key).items():
                if re.fullmatch(r"\d\|.*", name):
                    client.hdel(key, name)
                    old[name[0]] = old.get(name[0], 0) + int(n)
            if old:
                client.hset(key, mapping=old)
    await store.add(at(clock, 0, id="late", queue="b"))  # counted per queue, the rest is not
    if paged:
        assert [i.name for i in (await store.list_queues(1)).queues] == ["a"]
    infos = {info.name: info.counts for info in await store.queue_infos()}
    assert (infos["a"][State.SCHEDULED], infos["a"][State.LEASED]) == (15, 5)
    assert infos["b"][State.SCHEDULED] == 21
    assert (await store.stats()).counts[State.SCHEDULED] == 36
    assert_layout_consistent(server, store)


async def test_a_keyspace_without_the_index_of_queue_names_gets_it_built_by_a_page(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    """A keyspace written before each shard kept an index of its queue names gets the index
    built from its counts by the first page read, once; a name left in it is dropped."""
    await store.add_many([at(clock, 1000, id=f"t{n}", queue=f"q{n:02}") for n in range(40)])
    (lease,) = await store.claim("q07", clock.now_ms + 1000, 1, 1000)
    await store.kill(lease, "boom")
    expected = await store.queue_infos()
    with inspector(server) as client:
        for shard in range(store.shards):
            tag = store.shard_keys(shard).tag
            client.delete(f"{tag}:qn", f"{tag}:qnv")
            client.zadd(f"{tag}:qn", {"gone": 0})
    assert (await store.list_queues(1000)).queues == expected
    assert await store.queue_info("q07") == expected[7]
    assert_layout_consistent(server, store)


async def test_queue_settings_are_paged_through_their_index_built_once(
    server: Server, store: RedisStore
) -> None:
    """Each settings write keeps the index of queues with settings; a store written before it
    existed gets it built from the hash by the first page read, a stale name dropped."""
    for n in range(30):
        await store.pause_queue(f"s{n:02}", True)
    await store.set_queue_limit("s05", Limit(rate=1))
    await store.pause_queue("s05", False)  # its limit keeps it listed
    await store.pause_queue("s03", False)  # nothing left: it goes
    await store.set_queue("s07", QueueSettings())
    expected = await store.queue_infos()
    assert len(expected) == 28
    tag = "{" + store.prefix + ":queue-settings}"
    names, built = f"{tag}:names", f"{tag}:built"
    with inspector(server) as client:
        assert client.zrange(names, 0, -1) == [info.name for info in expected]
        client.delete(names, built)
        client.zadd(names, {"gone": 0})
    listed, cursor = [], None
    while True:
        page = await store.list_queues(9, cursor)
        listed += page.queues
        if page.cursor is None:
            break
        cursor = page.cursor
    assert listed == expected


def lose_reply_of(store: RedisStore, script: str) -> list[int]:
    """Make the next pipeline that runs `script` run in Redis, then fail as a dropped
    connection would: the caller gets `StoreUnavailable` and never the reply. Returns a list
    that counts the replies lost."""
    shards = store._shards
    real_many, real_one = shards.run_many, shards.run
    lost: list[int] = []

    def lose(name: str) -> None:
        if not lost and name == script:
            lost.append(1)
            raise StoreUnavailable(f"the reply to {script} was lost (injected)")

    async def run_many(calls: Any) -> Any:
        replies = await real_many(calls)
        lose(calls[0][0] if calls else "")
        return replies

    async def run(name: str, timer_id: str, args: Any) -> Any:
        reply = await real_one(name, timer_id, args)
        lose(name)
        return reply

    shards.run_many = run_many  # type: ignore[method-assign]
    shards.run = run  # type: ignore[method-assign]
    return lost


async def test_a_claim_whose_reply_was_lost_returns_its_leases_when_sent_again(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    """The next claim of the queue sends the lost one again (same request id): it returns
    what that one leased and still holds (not a timer settled meanwhile), and nothing new;
    the claim after takes the next timers."""
    for n in range(20):
        await store.add(at(clock, n, id=f"t{n:02}"))
    clock.advance(20)
    lost = lose_reply_of(store, "claim")
    with pytest.raises(StoreUnavailable):
        await store.claim("default", clock.now_ms, 5, 10_000)
    assert lost == [1]
    leased = (await store.list(state=State.LEASED)).timers
    assert {t.id for t in leased} == {f"t{n:02}" for n in range(5)}
    settled = await store.get("t00")
    assert settled is not None
    await store.ack(Lease(settled, 1, clock.now_ms + 10_000))  # as a second sender would
    clock.advance(3)
    again = await store.claim("default", clock.now_ms, 100, 10_000)
    assert [(lease.timer.id, lease.token) for lease in again] == [
        (f"t{n:02}", 1) for n in range(1, 5)
    ]
    assert {lease.deadline_ms for lease in again} == {clock.now_ms - 3 + 10_000}
    following = await store.claim("default", clock.now_ms, 100, 10_000)
    assert [lease.timer.id for lease in following] == [f"t{n:02}" for n in range(5, 20)]
    for lease in again:
        await store.ack(lease)
    assert_layout_consistent(server, store)


async def test_a_lost_claim_is_not_sent_again_once_its_leases_lapsed(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    """Past its leases' deadline the lost claim is dropped: the leases lapse and come back
    with the next attempt, as a dead worker's would."""
    for n in range(3):
        await store.add(at(clock, 0, id=f"t{n}"))
    lose_reply_of(store, "claim")
    with pytest.raises(StoreUnavailable):
        await store.claim("default", clock.now_ms, 3, 1000)
    clock.advance(1000)
    leases = await store.claim("default", clock.now_ms, 10, 1000)
    assert sorted((lease.timer.id, lease.token) for lease in leases) == [
        ("t0", 2),
        ("t1", 2),
        ("t2", 2),
    ]
    assert_layout_consistent(server, store)


async def test_a_request_id_claims_afresh_once_redis_forgot_it(
    server: Server, clock: ManualClock
) -> None:
    """claim.lua remembers a request's leases for the lease's length (Redis time): sent again
    later, the request is new to it and claims the next timers (of the shards it names: one
    here)."""
    store = open_store(server, clock, shards=1)
    try:
        for n in range(4):
            await store.add(at(clock, n, id=f"t{n}"))
        clock.advance(10)
        lose_reply_of(store, "claim")
        with pytest.raises(StoreUnavailable):
            await store.claim("default", clock.now_ms, 2, 50)
        await asyncio.sleep(0.2)  # the request id's key expires in Redis; the store's clock stands
        again = await store.claim("default", clock.now_ms, 10, 50)
        assert [(lease.timer.id, lease.token) for lease in again] == [("t2", 1), ("t3", 1)]
    finally:
        await store.close()


@pytest.mark.parametrize("settle", ["ack", "retry", "defer", "kill"])
async def test_a_settle_whose_reply_was_lost_succeeds_when_sent_again(
    server: Server, store: RedisStore, clock: ManualClock, settle: str
) -> None:
    """An ack, retry or kill that landed but whose reply was lost is sent again by its caller:
    it reports success (its own landing), not `LeaseLost`, and changes nothing more. Without
    a lost reply, settling twice is still `LeaseLost`."""
    await store.add(at(clock, 0, id="t"))
    await store.add(at(clock, 0, id="u"))
    leases = await store.claim("default", clock.now_ms, 2, 10_000)
    lease, other = sorted(leases, key=lambda lease: lease.timer.id)

    async def send(lease: Any) -> None:
        if settle == "ack":
            await store.ack(lease)
        elif settle == "retry":
            await store.retry(lease, clock.now_ms + 5000, "boom")
        elif settle == "defer":
            await store.defer(lease, clock.now_ms + 5000, "held")
        else:
            await store.kill(lease, "boom")

    lose_reply_of(store, settle)
    with pytest.raises(StoreUnavailable):
        await send(lease)
    await send(lease)  # no LeaseLost
    got = await store.get("t")
    assert got is not None
    want = {"ack": State.DONE, "retry": State.SCHEDULED, "kill": State.DEAD}.get(
        settle, State.SCHEDULED
    )
    assert (got.state, got.attempt) == (want, 1)
    if settle in ("retry", "defer"):
        assert got.due_ms == clock.now_ms + 5000
    # the landing counted once: sending it again raised no deferral a second time
    assert got.deferrals == (1 if settle == "defer" else 0)
    await send(other)
    with pytest.raises(LeaseLost):
        await send(other)
    assert_layout_consistent(server, store)


def test_leases_in_doubt_are_bounded_and_forgotten_once_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lease noted in doubt is taken once; past the bound, lapsed ones are dropped first."""
    monkeypatch.setattr(in_doubt, "MAX_IN_DOUBT", 3)
    doubts = in_doubt.InDoubt()
    timer = Timer(id="t", due_ms=0)
    lapsed = [Lease(Timer(id=f"old{n}", due_ms=0), 1, 100) for n in range(3)]
    doubts.note(lapsed, now_ms=50)
    doubts.note([Lease(timer, 2, 1000)], now_ms=500)  # the bound is reached: lapsed ones go
    assert not any(doubts.take(lease) for lease in lapsed)
    assert not doubts.take(Lease(timer, 1, 1000)), "another token is another lease"
    assert doubts.take(Lease(timer, 2, 1000))
    assert not doubts.take(Lease(timer, 2, 1000)), "taken once"


async def test_limit_pages_build_the_host_index_a_store_written_before_it_lacks(
    server: Server, clock: ManualClock
) -> None:
    """Limits HSET by an older version (no index) are paged all the same, in host order, and a
    page reads through the index it builds once (`host_limits.py`)."""
    store = open_store(server, clock)
    record = encode_limit(Limit(concurrency=1))
    hosts = [f"h{n:02}.example.com" for n in range(30)]
    try:
        with inspector(server) as client:
            client.hset(f"{store.prefix}:limits", mapping=dict.fromkeys(reversed(hosts), record))
        first = await store.list_limits(10)
        assert [host for host, _ in first.limits] == hosts[:10]
        with inspector(server) as client:
            assert client.zcard(f"{{{store.prefix}:limits}}:hosts") == 30
            client.hset(f"{store.prefix}:limits", "a.example.com", record)  # an older writer
        found: list[str] = []
        cursor: str | None = None
        while True:
            page = await store.list_limits(7, cursor)
            found += [host for host, _ in page.limits]
            if (cursor := page.cursor) is None:
                break
        assert found == ["a.example.com", *hosts]
        assert await store.delete_limit("a.example.com")
        with inspector(server) as client:
            assert client.zcard(f"{{{store.prefix}:limits}}:hosts") == 30
    finally:
        await store.close()


def count_script_calls(store: RedisStore) -> dict[str, int]:
    """Count the script calls `store` sends from now on, by script."""
    shards = store._shards
    real_many = shards.run_many
    counts: dict[str, int] = defaultdict(int)

    async def run_many(calls: Any) -> Any:
        for name, _, _ in calls:
            counts[name] += 1
        return await real_many(calls)

    shards.run_many = run_many  # type: ignore[method-assign]
    return counts


async def test_claims_of_many_queues_at_once_share_their_script_calls(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    """Thirty queues claimed at once (a worker's claim loops) cost a few calls per shard, not a
    few per shard and queue, and each claim gets its own queue's timers in due order; their
    next due times are read the same way."""
    queues = [f"q{n:02}" for n in range(30)]
    timers = [
        at(clock, 3 - k, id=f"{queue}-{k}", queue=queue) for queue in queues for k in range(3)
    ]
    timers += [at(clock, 5_000, id=f"{queue}-later", queue=queue) for queue in queues]
    await store.add_many(timers)
    clock.advance(10)
    counts = count_script_calls(store)
    claimed = await asyncio.gather(
        *(store.claim(queue, clock.now_ms, 3, 10_000) for queue in queues)
    )
    for queue, leases in zip(queues, claimed, strict=True):
        assert [lease.timer.id for lease in leases] == [f"{queue}-2", f"{queue}-1", f"{queue}-0"]
        assert {lease.token for lease in leases} == {1}
    # the first claim goes alone, the other 29 together: a peek and a claim round each
    assert counts["peek"] == 2 * store.shards
    assert counts["claim"] <= 2 * store.shards
    nexts = await asyncio.gather(*(store.next_due_ms(queue) for queue in queues))
    assert nexts == [clock.now_ms - 10 + 5_000] * len(queues)
    assert counts["next_due"] == 2 * store.shards
    assert_layout_consistent(server, store)


async def test_a_batch_claiming_one_queue_twice_leases_each_timer_once(
    server: Server, store: RedisStore, clock: ManualClock
) -> None:
    """Two claims of one queue in one batch (two consumers of a store) share its timers."""
    await store.add_many([at(clock, n, id=f"t{n}") for n in range(6)])
    clock.advance(10)
    first, second, third = await asyncio.gather(
        *(store.claim("default", clock.now_ms, 2, 10_000) for _ in range(3))
    )
    ids = [lease.timer.id for lease in (*first, *second, *third)]
    assert sorted(ids) == [f"t{n}" for n in range(6)]
    assert [lease.timer.id for lease in first] == ["t0", "t1"]
    assert_layout_consistent(server, store)
