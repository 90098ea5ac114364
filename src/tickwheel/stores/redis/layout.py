"""A prefix's shard count, recorded in Redis so that every store on the prefix uses the same.

Timers written in one shard count and looked for in another are lost to the reader, so the
first store to use a prefix records its count under ``<p>:layout`` and every later one reads
it. A store asks for a count (``?shards=N``) or takes the recorded one; with neither, a new
prefix gets one shard on a standalone server (where shards spread nothing and each costs a
call per claim) and 16 on a Cluster, and a prefix written before layouts were recorded is
taken as the 16 shards every store used then.
"""

from __future__ import annotations

from redis.asyncio import RedisCluster

from tickwheel.errors import InvalidArgument
from tickwheel.stores.redis.keys import (
    CLUSTER_SHARDS,
    MAX_SHARDS,
    STANDALONE_SHARDS,
    UNRECORDED_SHARDS,
    ShardKeys,
    layout_key,
)
from tickwheel.stores.redis.scripts import Client, unavailable


async def recorded_shards(client: Client, prefix: str, asked: int | None) -> int:
    """Return the prefix's shard count, recording `asked` (or the default) if none is.

    Raises:
        InvalidArgument: `asked` is not the count the prefix was written with.
        StoreUnavailable: Redis did not answer.
    """
    key = layout_key(prefix)
    with unavailable("layout"):
        recorded = await client.get(key)
        if recorded is None:
            await client.set(key, asked or await _unrecorded(client, prefix), nx=True)
            recorded = await client.get(key)  # the first store's, where two raced
    count = int(recorded) if recorded and recorded.isdigit() else 0
    if not 1 <= count <= MAX_SHARDS:
        raise InvalidArgument("shards", f"{key} holds {recorded!r}, not a shard count")
    if asked is not None and asked != count:
        raise InvalidArgument(
            "shards",
            f"prefix {prefix!r} holds timers in {count} shards; this store asked for {asked}: "
            f"give ?shards={count} or leave it out",
        )
    return count


async def _unrecorded(client: Client, prefix: str) -> int:
    """The count for a prefix with no record: 16 where a timer or schedule lies in a shard
    other than the first of the earlier layout, else the default of the server's kind (what
    lies in the first shard alone reads the same in one shard: a one-shard prefix whose record
    was deleted is read as one again)."""
    if isinstance(client, RedisCluster):
        return CLUSTER_SHARDS
    old = [ShardKeys.of(prefix, shard) for shard in range(1, UNRECORDED_SHARDS)]
    written = await client.exists(*(f"{keys.tag}:{name}" for keys in old for name in "rs"))
    return UNRECORDED_SHARDS if written else STANDALONE_SHARDS
