"""Scale benchmark (issue 17): N pending timers on one Redis (default 10,000,000).

Reports Redis memory per timer (``INFO memory`` used_memory delta / N), the `add_many` rate over
the whole fill (with a progress line every 1/20 of it), both beside a floor of plain pipelined
ZADD + HSET of the same ids and specs (up to 1M of them), and the latency of a claim of 1,000
due timers with 10k pending beside N pending, on the same server in alternation.

Run ``python bench/scale.py`` (``--count N`` for a quicker run, ``--rounds`` claims per store,
``--markdown PATH``). It starts its own ``redis-server`` on a free loopback port in a temp dir,
without persistence, and stops it at the end. 10M timers need about 2 GiB for Redis.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvloop
from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, fmt, pct, progress, write_markdown
from redis.asyncio import Redis
from scenarios.scale.pending import (
    BATCH,
    CLAIM_LIMIT,
    FLOOR_MAX,
    SMALL,
    CatchUp,
    Claims,
    Fill,
    catch_up,
    claim_latency,
    fill,
    floor,
)

from tickwheel.stores.redis import RedisStore

MAX_COUNT = 50_000_000


def fill_table(big: Fill, raw: Fill, other: OtherLoad) -> Table:
    out = Table(
        f"{big.count:,} pending timers on Redis: memory and add_many",
        ["measure", "RedisStore", f"floor ({raw.count:,})", "x floor"],
    )
    rates = big.step_rates
    out.rows = [
        [
            "Redis used_memory per timer",
            f"{fmt(big.bytes_per_timer)} B",
            f"{fmt(raw.bytes_per_timer)} B",
            f"{big.bytes_per_timer / raw.bytes_per_timer:.2f}",
        ],
        [
            "used_memory added by the fill",
            f"{big.memory_bytes / 2**20:,.0f} MiB",
            f"{raw.memory_bytes / 2**20:,.0f} MiB",
            "",
        ],
        [
            "add rate over the whole fill",
            f"{fmt(big.per_s)}/s",
            f"{fmt(raw.per_s)}/s",
            f"{big.per_s / raw.per_s:.2f}",
        ],
        ["add_many, slowest / fastest 1/20", f"{fmt(min(rates))} / {fmt(max(rates))}/s", "", ""],
        ["add_many, first 1/20 -> last 1/20", f"{fmt(rates[0])} -> {fmt(rates[-1])}/s", "", ""],
        ["fill wall time (timers built too)", f"{big.wall_s:,.1f} s", f"{raw.wall_s:,.1f} s", ""],
    ]
    out.notes = [
        f"ids 'order-<uuid hex>' ({big.id_bytes} B), one callback URL, a {big.spec_bytes} B "
        f"spec; due over the hour starting an hour ahead; add_many of {BATCH:,} a call, one "
        "call at a time; rates count time inside the calls only",
        f"floor: ZADD id -> due and HSET id -> spec of the same timers, {BATCH:,} of each a "
        "pipeline, keys deleted before the store's fill",
        other.note(),
    ]
    return out


def catch_up_table(count: int, caught: CatchUp, other: OtherLoad) -> Table:
    out = Table(
        f"after the fill of {count:,}: the first claim of a timer already due",
        ["measure", "value"],
    )
    out.rows = [
        ["time until claimed", f"{caught.seconds:,.2f} s"],
        ["claim calls (limit 1)", f"{caught.calls:,}"],
    ]
    out.notes = [
        "the filled timers are due in one to two hours: they go to minute slots, since a day "
        "slot that has begun would have to move down whole (a bounded number of entries per "
        "script call, the claim calling again while some are left) before a claim could take "
        "anything due after its start; a timer due now behind the fill is claimed by one call",
        other.note(),
    ]
    return out


def claim_table(claims: Claims, other: OtherLoad) -> Table:
    out = Table(
        f"claim of {CLAIM_LIMIT:,} due timers, by pending timers in the store",
        [
            "pending",
            "rounds",
            "1st claim p50 ms",
            "p99 ms",
            "p50 x 10k",
            "1st claim took, p50 / min",
            "all taken p50 ms",
            "p99 ms",
            "claims, p50 / max",
        ],
    )
    base = pct(claims.first_ms[SMALL], 0.5)
    for pending, first_ms in claims.first_ms.items():
        p50 = pct(first_ms, 0.5)
        took, calls, all_ms = (
            claims.first_took[pending],
            claims.calls[pending],
            claims.all_ms[pending],
        )
        out.rows.append(
            [
                f"{pending:,}",
                str(len(first_ms)),
                fmt(p50, 2),
                fmt(pct(first_ms, 0.99), 2),
                f"{p50 / base:.2f}",
                f"{fmt(pct(took, 0.5))} / {fmt(min(took))}",
                fmt(pct(all_ms, 0.5), 2),
                fmt(pct(all_ms, 0.99), 2),
                f"{fmt(pct(calls, 0.5))} / {fmt(max(calls))}",
            ]
        )
    out.notes = [
        f"each round adds {CLAIM_LIMIT:,} timers due in the last ten minutes to one store, "
        "claims (limit: those still unclaimed) until it holds them all, then acks them; the two "
        "stores alternate on one server (other prefixes); a claim bounds its work (moving "
        "timers from day and minute slots towards the near set), so one call may take fewer",
        other.note(),
    ]
    return out


async def run(url: str, count: int, rounds: int) -> tuple[Fill, Fill, CatchUp, Claims]:
    admin = Redis.from_url(url)
    big = RedisStore.from_url(url, prefix="scale")
    small = RedisStore.from_url(url, prefix="scale-small")
    try:
        progress(f"floor: ZADD + HSET of {min(count, FLOOR_MAX):,} timers")
        raw = await floor(admin, min(count, FLOOR_MAX))
        progress(f"filling {count:,} pending timers")
        filled = await fill(big, admin, count)
        progress("the first claim of a due timer after the fill")
        caught = await catch_up(big)
        progress(f"filling {SMALL:,} pending timers beside them")
        await fill(small, admin, SMALL)
        await catch_up(small)
        progress(f"claim latency: {rounds} rounds on each store")
        claims = await claim_latency({SMALL: small, count: big}, rounds)
    finally:
        await big.close()
        await small.close()
        await admin.aclose()
    return filled, raw, caught, claims


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=10_000_000, help="pending timers (N)")
    parser.add_argument("--rounds", type=int, default=100, help="timed claims per store")
    parser.add_argument("--markdown", metavar="PATH")
    args = parser.parse_args(argv)
    if not SMALL < args.count <= MAX_COUNT:
        parser.error(f"--count must be between {SMALL + 1:,} and {MAX_COUNT:,}")
    if not 1 <= args.rounds <= 10_000:
        parser.error("--rounds must be between 1 and 10,000")
    tables: list[Table] = []
    emit(machine_table(sample_other_load()), tables)
    with private_redis("tickwheel-bench-scale-") as server:
        tables[0].rows += server.rows()
        other = OtherLoad(server.pid)
        filled, raw, caught, claims = uvloop.run(run(server.url, args.count, args.rounds))
        emit(fill_table(filled, raw, other), tables)
        emit(catch_up_table(args.count, caught, other), tables)
        emit(claim_table(claims, other), tables)
    if args.markdown:
        write_markdown(args.markdown, tables, "Scale benchmark")


if __name__ == "__main__":
    main()
