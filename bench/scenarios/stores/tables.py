"""The store benchmark's tables: rates, memory, latency and where the time goes."""

from __future__ import annotations

import math

from harness.report import Table, fmt, pct

from scenarios.stores.context import Results
from scenarios.stores.inputs import (
    CLAIM_LIMIT,
    CLAIM_ROUNDS,
    DUE_SPAN_MS,
    FLAT_LIMIT,
    LATENCY_LIMIT,
    LEASE_MS,
    PIPELINE,
    PRODUCER_BATCH,
    SMALL,
    URL,
    Inputs,
)


def schedule_table(r: Results, inputs: Inputs) -> Table:
    """Tabulate the schedule rates against the ZADD floor."""
    floor = r.schedule.get(f"raw floor: pipelined ZADD, {PIPELINE:,} per round trip")
    table = Table(
        "Schedule rate, one producer (timers/s)",
        ["store / method", "timers", "seconds", "timers/s", "vs ZADD floor"],
    )
    for label, m in r.schedule.items():
        rel = m.rate / floor.rate if floor else math.nan
        table.rows.append([label, f"{m.count:,}", f"{m.seconds:.2f}", fmt(m.rate), f"{rel:.2f}x"])
    table.rows.append(
        [
            "Timer(...) construction (input, untimed above)",
            "",
            f"{inputs.build_us:.1f} µs",
            fmt(1e6 / inputs.build_us),
            "",
        ]
    )
    table.rows.append(
        [
            "Timer(...) + own Callback(...) construction",
            "",
            f"{inputs.distinct_build_us:.1f} µs",
            fmt(1e6 / inputs.distinct_build_us),
            "",
        ]
    )
    table.notes = [
        f"pending timers: callback {URL!r} ({len(URL)} chars), no payload, generated 26-char "
        f"ids, random due times over the spread, added in that order; one Callback object is "
        f"shared (add_many encodes it once) except in the 'own Callback' row",
        f"add_many is called with {PRODUCER_BATCH:,} timers per call (SqliteStore commits "
        "every 1,000); the SQLite row at N times the last timers only, the rest having been "
        "loaded untimed (executemany of the same rows)",
        "one run per row; the input Timer objects are gc.freeze()d so collections skip them",
        r.load_note,
    ]
    return table


def claim_table(r: Results) -> Table:
    """Tabulate the claim + ack rates against the floor."""
    floor = r.claim.get("raw floor: Lua claim + pipelined ZREM acks")
    table = Table(
        f"Claim + ack rate (claim limit={CLAIM_LIMIT:,}, each batch acked by one ack_many)",
        [
            "store",
            "timers",
            "seconds",
            "timers/s",
            "runs, timers/s",
            "claim ms/batch",
            "ack ms/batch",
            "vs floor",
        ],
    )
    for label, m in r.claim.items():
        batches = max(m.batches, 1)
        rel = m.rate / floor.rate if floor else math.nan
        table.rows.append(
            [
                label,
                f"{m.count:,}",
                f"{m.seconds:.2f}",
                fmt(m.rate),
                " / ".join(fmt(rate) for rate in r.claim_runs.get(label, [m.rate])),
                f"{m.claim_s / batches * 1000:.1f}",
                f"{m.ack_s / batches * 1000:.1f}",
                f"{rel:.2f}x",
            ]
        )
    table.notes = [
        f"due timers spread over the last {DUE_SPAN_MS // 60_000} minutes; loop: "
        f"claim(queue, now, limit={CLAIM_LIMIT}, lease_ms={LEASE_MS}) then ack_many(leases) "
        "until a claim returns none",
        "the floor's claim is one Lua script on one zset (ZRANGEBYSCORE LIMIT, ZREM, ZADD to a "
        "lease zset); its ack is one pipeline of ZREM per batch",
        f"Redis rows: {CLAIM_ROUNDS} rounds, the floor and RedisStore alternated; each row shows "
        "its median run ('runs' lists all, in order)",
        r.load_note,
    ]
    return table


def memory_table(r: Results, inputs: Inputs, n: int, spread_ms: int, shards: int) -> Table:
    """Tabulate Redis memory (and SQLite disk) per pending timer."""
    per_minute = n / max(1, spread_ms // 60_000) / shards
    table = Table(
        f"Redis memory per pending timer (N={n:,})",
        ["store", "bytes/timer", "spec bytes", "beyond payload", "beyond payload + id"],
    )
    for label, per in r.memory.items():
        store = label == "RedisStore"
        spec = inputs.spec_bytes if store else 0
        table.rows.append(
            [
                label,
                f"{per:.0f}",
                str(spec) if store else "—",
                f"{per - spec:.0f}",
                f"{per - spec - inputs.id_bytes:.0f}",
            ]
        )
    if r.sqlite_disk is not None:
        disk = r.sqlite_disk
        table.rows.append(
            [
                "SqliteStore (disk bytes/timer, file size after checkpoint)",
                f"{disk:.0f}",
                str(inputs.spec_bytes),
                f"{disk - inputs.spec_bytes:.0f}",
                f"{disk - inputs.spec_bytes - inputs.id_bytes:.0f}",
            ]
        )
    table.notes = [
        "INFO memory used_memory after minus before adding N timers to an empty (FLUSHALL) "
        "server, clients closed; 'beyond payload' subtracts the encoded spec (encode_spec: "
        f"callback + payload + retry, {inputs.spec_bytes} B here); the store's record is "
        f"{inputs.record_bytes} B (header + spec), the id {inputs.id_bytes} B",
        f"due times random over {spread_ms / 3_600_000:g} h starting an hour ahead: about "
        f"{per_minute:,.0f} timers per minute per shard ({shards} shards), in day slots (due "
        "an hour or more ahead) or minute slots: lists, ~28 B an entry at any spread "
        "(--spread-hours changes it)",
        "the ZADD + HSET floor keeps a record of the store's record size in one hash",
    ]
    return table


def kinds_table(r: Results, n: int) -> Table:
    """Tabulate RedisStore's memory by kind of key."""
    table = Table(
        f"RedisStore memory by kind of key (N={n:,})",
        ["kind", "keys", "MB", "bytes/timer", "share"],
    )
    total = sum(usage for _, usage in r.kinds.values()) or 1
    for kind, (keys, usage) in r.kinds.items():
        table.rows.append(
            [kind, f"{keys:,}", f"{usage / 1e6:.1f}", f"{usage / n:.0f}", f"{usage / total:.0%}"]
        )
    delta = r.memory.get("RedisStore")
    table.notes = [
        f"MEMORY USAGE <key> SAMPLES 0 summed per kind: {total / n:.0f} bytes/timer in all"
        + (
            f", against {delta:.0f} from used_memory (the rest is keyspace overhead)"
            if delta
            else ""
        )
    ]
    return table


def latency_table(r: Results, n: int, calls: int) -> Table:
    """Tabulate claim latency at 10k and N pending timers."""
    table = Table(
        f"Claim latency, ms per claim(limit={LATENCY_LIMIT}) ({calls} calls per cell)",
        [
            "store",
            "due per call",
            "p50 @10k",
            "p99 @10k",
            f"p50 @{n:,}",
            f"p99 @{n:,}",
            "p50 ratio",
            "p99 ratio",
        ],
    )
    keys = dict.fromkeys((name, case) for name, case, _ in r.latency)
    for name, case in keys:
        small = r.latency.get((name, case, SMALL))
        large = r.latency.get((name, case, n))
        cells = []
        for samples in (small, large):
            cells += (
                [f"{pct(samples, 0.5):.3f}", f"{pct(samples, 0.99):.3f}"]
                if samples
                else [
                    "—",
                    "—",
                ]
            )
        for q in (0.5, 0.99):
            if small and large:
                cells.append(f"{pct(large, q) / pct(small, q):.2f}")
            else:
                cells.append("—")
        table.rows.append([name, "0" if case == "nothing due" else "100", *cells])
    table.notes = [
        f"pending timers are not due (an hour or more ahead); '100' means {LATENCY_LIMIT} due "
        "timers were added beforehand for every call, so each call leases 100 (not acked)",
        f"flat = p50 ratio <= {FLAT_LIMIT} (this bench's reading of 'must stay flat'); the 10k "
        "and N stores (Redis: two prefixes or keys on one server; SQLite: two files) are called "
        "in alternation, so a change in the machine's load hits both columns alike",
        "RedisStore's claim is one pipeline of purge + peek per shard, then one claim script "
        "per shard holding due timers; the floor is one Lua call on one zset",
        "MemoryStore is measured at 10k only (a heap in this process; filling it to N would "
        "only lengthen the run)",
        r.load_note,
    ]
    return table


def server_table(r: Results) -> Table:
    """Tabulate where each run's time went: client CPU, Redis CPU, commands."""
    table = Table(
        "Where the time goes (CPU per run; the Redis columns from INFO)",
        [
            "run",
            "timers",
            "wall s",
            "client CPU",
            "redis CPU",
            "EVALSHA calls",
            "µs/EVALSHA",
            "server µs/timer",
            "top commands by server µs (inside scripts too)",
        ],
    )
    for m in r.server:
        evalsha = m.commands.get("evalsha")
        inner = sorted(
            ((usec, name) for name, (_, usec) in m.commands.items() if name != "evalsha"),
            reverse=True,
        )[:3]
        server_usec = sum(usec for name, (_, usec) in m.commands.items() if name != "evalsha")
        if evalsha:
            server_usec = max(server_usec, evalsha[1])
        table.rows.append(
            [
                m.label,
                f"{m.count:,}",
                f"{m.seconds:.2f}",
                f"{m.client_cpu_s / m.seconds:.0%}",
                "—" if m.server_cpu_s is None else f"{m.server_cpu_s / m.seconds:.0%}",
                f"{evalsha[0]:,}" if evalsha else "—",
                f"{evalsha[1] / evalsha[0]:.0f}" if evalsha else "—",
                "—" if m.server_cpu_s is None else f"{server_usec / max(m.count, 1):.1f}",
                ", ".join(f"{name} {usec / max(m.count, 1):.1f}" for usec, name in inner),
            ]
        )
    table.notes = [
        "client CPU: this process's user+sys time / wall; redis CPU: the server's used_cpu "
        "user+sys / wall (100% = one core). On 2 cores, client near 100% means the Python "
        "client is the bottleneck",
        "server µs/timer: INFO commandstats usec (EVALSHA includes the commands its script "
        "runs, which are also listed on their own) / timers",
    ]
    return table
