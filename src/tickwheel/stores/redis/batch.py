"""How `RedisStore.add` and `add_many` pack timers into add.lua calls, and read the answers.

A call carries up to `ADD_BATCH` timers of one shard as one ARGV string of
``<id>\n<record>\n`` lines: one argument instead of two per timer halves the client's encoding
work, and add.lua writes each key of the batch with one variadic command.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tickwheel.model import Timer
from tickwheel.stores.codec import SpecCache
from tickwheel.stores.redis.keys import shard_of
from tickwheel.stores.redis.record import SeqSource, base36, pack_new

ADD_BATCH = 200  # timers per add.lua call: keeps each script call short


@dataclass(frozen=True, slots=True)
class AddCall:
    """One add.lua call: the shard, the timers' positions in the batch, their lines."""

    shard: int
    positions: list[int]
    lines: str


def plan(
    timers: Sequence[Timer], offset: int, now_ms: int, first_seq: int, shards: int
) -> list[AddCall]:
    """Split `timers` (from position `offset` of a batch whose seqs start at `first_seq`) into
    add.lua calls, in order within each shard, distinct ids per call."""
    by_shard: dict[int, list[int]] = {}
    lines: dict[int, str] = {}
    specs = SpecCache()
    created = base36(now_ms)
    seqs = SeqSource.formats(first_seq + offset, len(timers))
    for n, timer in enumerate(timers, offset):
        by_shard.setdefault(shard_of(timer.id, shards), []).append(n)
        record = pack_new(timer, created, seqs[n - offset], specs.encode(timer))
        lines[n] = f"{timer.id}\n{record}\n"
    calls = []
    for shard, positions in by_shard.items():
        chunk: list[int] = []
        ids: set[str] = set()
        for n in positions:
            if len(chunk) == ADD_BATCH or timers[n - offset].id in ids:
                calls.append(AddCall(shard, chunk, "".join([lines[i] for i in chunk])))
                chunk, ids = [], set()
            chunk.append(n)
            ids.add(timers[n - offset].id)
        calls.append(AddCall(shard, chunk, "".join([lines[i] for i in chunk])))
    return calls
