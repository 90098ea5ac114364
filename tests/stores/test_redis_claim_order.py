"""The order of a Redis claim's leases across shards (`claiming._in_order`)."""

from __future__ import annotations

from tickwheel.stores.redis.claiming import _in_order


def member(due: str, seq: str, timer_id: str) -> bytes:
    """A near-set member: <length of the due><due, base 36><seq><id> (lib.lua near_member)."""
    return f"{len(due):x}{due}{seq}{timer_id}".encode()


def record(lease_seq: str) -> bytes:
    """A leased record's header up to its seq field, which is all the order reads."""
    return f"1,1,a,b,,{lease_seq}9999,,,|[null,null,null]".encode()


CHOSEN = [
    (member("0000000a", "000000001", "t1"), 0),
    (member("0000000a", "000000002", "t2"), 1),
    (member("0000000b", "000000003", "t3"), 0),
    (member("0000000c", "000000004", "t4"), 1),
]


def test_each_shard_leasing_what_it_showed_gives_the_chosen_order() -> None:
    by_shard = {
        0: [b"t1", record("000000101"), b"t3", record("000000103")],
        1: [b"t2", record("000000102"), b"t4", record("000000104")],
    }
    assert [timer_id for timer_id, _ in _in_order(by_shard, CHOSEN)] == [b"t1", b"t2", b"t3", b"t4"]


def test_a_shard_leasing_fewer_keeps_the_chosen_order_of_the_rest() -> None:
    by_shard = {
        0: [b"t3", record("000000101")],  # t1 went (cancelled) between the peek and the claim
        1: [b"t2", record("000000102"), b"t4", record("000000104")],
    }
    assert [timer_id for timer_id, _ in _in_order(by_shard, CHOSEN)] == [b"t2", b"t3", b"t4"]


def test_a_shard_leasing_other_timers_orders_by_lease_seq() -> None:
    by_shard = {
        0: [b"t0", record("000000101"), b"t1", record("000000103")],  # t0 came in between
        1: [b"t2", record("000000102"), b"t4", record("000000104")],
    }
    assert [timer_id for timer_id, _ in _in_order(by_shard, CHOSEN)] == [b"t0", b"t2", b"t1", b"t4"]
