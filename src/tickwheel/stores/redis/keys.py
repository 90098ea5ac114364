"""Where a timer lives in Redis: its virtual shard and the keys of that shard.

Every key of shard ``s`` starts with the hash tag ``{<prefix>:<s>}``, so one shard is one Cluster
slot and every script runs on one node::

    {p:s}:r                 hash   id → record (see `record.py`)
    {p:s}:l                 zset   <lease seq><id> → lease deadline ms (leased timers)
    {p:s}:x                 zset   id → expiry ms (done timers, kept for the retention)
    {p:s}:ids               zset   the id index: the low bound of each of its pages (score 0)
    {p:s}:ids:<low>         zset   id, score 0: the ids from <low> to the next page's low,
                                   at most 128 (a listpack); every timer is in the index
    {p:s}:dead              zset   id, score 0: the dead letters, in id order
    {p:s}:queues            set    queues with scheduled timers in this shard
    {p:s}:q:<queue>:i       zset   low → low: the due pages of a queue by their low bound (ms)
    {p:s}:q:<queue>:b:<low> zset   <seq><id> → due ms: a due page, the queue's timers due from
                                   <low> up to the next page's low; at most 128 (a listpack)
                                   unless they share one due ms
    {p:s}:q:<queue>:l       zset   <lease seq><id> → lease deadline ms: the queue's share of
                                   {p:s}:l, so its next due time is one probe away

Scripts also PUBLISH the queue's name on the channel ``<p>:wake`` when a change makes a timer
the earliest of its queue in its shard (`RedisStore.wait` listens to it).

A queue's index lists exactly its non-empty due pages, so a claim walks pages in due order from
the oldest, however long no worker ran, and never reads an empty one. A full page splits (or,
when the new timer is due after all of it, a page starts at that timer), so pages stay small
at any density of due times (decisions 22).

Scripts derive bucket and queue-index keys from data they read atomically (a record's queue and
due time); they build them from the tag of ``KEYS[1]``, so those keys share the slot too.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from tickwheel.errors import InvalidArgument

DEFAULT_PREFIX = "tickwheel"
DEFAULT_SHARDS = 16
MAX_SHARDS = 16_384  # one per Cluster slot at most: more could not spread any further

_PREFIX = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def check_layout(prefix: str, shards: int) -> None:
    """Reject a prefix that would break the hash tag, or a shard count out of range."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise InvalidArgument("prefix", f"must be 1-64 of A-Z a-z 0-9 . _ : -, got {prefix!r}")
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument("shards", f"must be an integer from 1 to {MAX_SHARDS}")


def shard_of(timer_id: str, shards: int) -> int:
    """Return the virtual shard of a timer id: stable across processes and restarts."""
    return zlib.crc32(timer_id.encode()) % shards


@dataclass(frozen=True, slots=True)
class ShardKeys:
    """The fixed keys of one shard, in the order every script receives them as KEYS[1..6]."""

    tag: str

    @classmethod
    def of(cls, prefix: str, shard: int) -> ShardKeys:
        return cls("{%s:%d}" % (prefix, shard))  # noqa: UP031 -- braces would need doubling

    @property
    def records(self) -> str:
        return f"{self.tag}:r"

    @property
    def fixed(self) -> tuple[str, ...]:
        """KEYS[1..6]: records, leases, expiry, id index, dead letters, queues."""
        tag = self.tag
        return (
            f"{tag}:r",
            f"{tag}:l",
            f"{tag}:x",
            f"{tag}:ids",
            f"{tag}:dead",
            f"{tag}:queues",
        )

    def index(self, queue: str) -> str:
        """The zset of the due pages of `queue` in this shard."""
        return f"{self.tag}:q:{queue}:i"

    def leases(self, queue: str) -> str:
        """The zset of `queue`'s leases in this shard."""
        return f"{self.tag}:q:{queue}:l"

    def bucket(self, queue: str, low_ms: int) -> str:
        """The due page of `queue` whose low bound is `low_ms`."""
        return f"{self.tag}:q:{queue}:b:{low_ms}"
