"""Where a timer lives in Redis: its virtual shard and the keys of that shard.

Every key of shard ``s`` starts with the hash tag ``{<prefix>:<s>}``, so one shard is one Cluster
slot and every script runs on one node::

    {p:s}:r                 hash   id → record (see `record.py`)
    {p:s}:l                 zset   <deadline>|<queue> → deadline ms: lease batches still
                                   holding a lease
    {p:s}:x                 list   the done timers in ack order: a mark @<expiry ms>, then
                                   the ids acked with that expiry
    {p:s}:xo                list   the same for schedules' occurrences, whose retention may
                                   be shorter (`StoreSettings.occurrence_retention_ms`)
    {p:s}:n                 hash   <state code>|<queue> → the queue's timers in that state
                                   here; <deadline>|<queue> → leases that batch still holds
    {p:s}:dead              zset   id, score 0: the dead letters, in id order
    {p:s}:queues            set    queues with scheduled timers in this shard
    {p:s}:qn                zset   queue, score 0: the queues with timers in any state here,
                                   in name order, for a page of the queue table
    {p:s}:qnv               string "1" once ``qn`` is built (a keyspace older than it gets it
                                   built from the counts hash by the first page read)
    {p:s}:q:<queue>:n       zset   <L><due><seq><id> → due ms: the queue's near set, its
                                   timers due before the end of the current minute or in a
                                   slot a claim has reached (<due> is base 36, L digits)
    {p:s}:q:<queue>:i1      zset   start → start: the queue's non-empty minute slots
    {p:s}:q:<queue>:1:<ms>  list   ids of the queue's timers due in the minute from <ms>
    {p:s}:q:<queue>:i2      zset   start → start: the queue's non-empty day slots
    {p:s}:q:<queue>:2:<ms>  list   ids of the queue's timers due in the day from <ms>
    {p:s}:q:<queue>:l       zset   deadline → deadline: the queue's lease batches
    {p:s}:b:<queue>:<ms>    list   ids of the queue's timers leased until <ms> (acked ones
                                   stay until the batch's count reaches 0)
    {p:s}:c:<rid>           string ids, then tokens, of the leases claim request <rid> took
                                   here, expiring with them: a claim sent again after its
                                   reply was lost returns them (`claiming.py`)
    {p:s}:s                 hash   schedule id → schedule (`schedule_codec.encode_schedule`)
    {p:s}:si                zset   schedule id, score 0: the shard's schedules in id order, for
                                   listing them

A schedule lives in the shard of its id, and so do its occurrences (`shard_of`): one script
records a schedule's progress and creates or cancels its occurrence timers together.

This is a two-level hashed timing wheel: a timer goes into its day slot with one ``RPUSH``
when that day starts over an hour from now, else into its minute slot (a day slot that near
would have to move down whole before a claim could take anything later); an hour before a day
slot starts, claims move its timers into minute slots with the budget their own work leaves,
and a claim whose horizon reaches a minute slot moves its timers into the near set, which is
ordered (due ms, then seq). A slot is unordered, so adding costs no
search; each timer is moved at most twice. Slots are lists: about 28 bytes a timer at any
density of due times.

What an operator sets lives outside the shards, in two keys each read and written alone by
one command or script (so on a Cluster each sits in its own slot)::

    <p>:queue-settings      hash   paused:<queue> → "1" while paused; limit:<queue> →
                                   `codec.encode_limit` JSON (`queue_settings.py`)
    <p>:limits              hash   callback host → `codec.encode_limit` JSON
    {<p>:limits}:hosts      zset   callback host, score 0: the index pages of limits are read
                                   from, in the hash's slot (`host_limits.py`)
    {<p>:queue-settings}:v  string the version of each, counting its writes (in its slot)
    <p>:layout              string the prefix's shard count, written by the first store to use
                                   it and read by every other (`layout.py`)
    {<p>:limits}:v

A paused timer keeps its record (state code 4) and leaves its queue's near set and slots.

Scripts also PUBLISH on the channel ``<p>:wake`` the names of the queues, separated by spaces,
in which a change may make a timer the earliest in its shard (`RedisStore.wait` listens to it).

Scripts derive queue, slot and batch keys from data they read atomically (a record's queue
and due time); they build them from the tag of ``KEYS[1]``, so those keys share the slot too.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from tickwheel.errors import InvalidArgument

DEFAULT_PREFIX = "tickwheel"
STANDALONE_SHARDS = 1
"""A new prefix's shards on a standalone server, where more would spread nothing."""
CLUSTER_SHARDS = 16
"""A new prefix's shards on a Cluster: its keys spread over up to 16 slots."""
UNRECORDED_SHARDS = 16
"""The shards of a prefix written before layouts were recorded (the only default then)."""
MAX_SHARDS = 16_384  # one per Cluster slot at most: more could not spread any further

_PREFIX = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def check_layout(prefix: str, shards: int | None) -> None:
    """Reject a prefix that would break the hash tag, or a shard count out of range (None: the
    prefix's recorded count, `layout.py`)."""
    if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
        raise InvalidArgument("prefix", f"must be 1-64 of A-Z a-z 0-9 . _ : -, got {prefix!r}")
    if shards is None:
        return
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidArgument("shards", f"must be an integer from 1 to {MAX_SHARDS}")


def layout_key(prefix: str) -> str:
    """The prefix's recorded shard count (see the module's docstring)."""
    return f"{prefix}:layout"


def queue_settings_key(prefix: str) -> str:
    """The hash of every queue's settings (see the module's docstring)."""
    return f"{prefix}:queue-settings"


def limits_key(prefix: str) -> str:
    """The hash of every callback host's limit (see the module's docstring)."""
    return f"{prefix}:limits"


def shard_of(timer_id: str, shards: int) -> int:
    """Return the virtual shard of a timer id: stable across processes and restarts.

    An occurrence (``<schedule id>@<ms>``) lives in its schedule's shard, so one script can
    record the schedule's progress and create its next occurrence.
    """
    return zlib.crc32(timer_id.partition("@")[0].encode()) % shards


@dataclass(frozen=True, slots=True)
class ShardKeys:
    """The fixed keys of one shard, in the order every script receives them as KEYS[1..6]."""

    tag: str

    @classmethod
    def of(cls, prefix: str, shard: int) -> ShardKeys:
        return cls("{%s:%d}" % (prefix, shard))  # noqa: UP031 -- braces would need doubling

    @property
    def fixed(self) -> tuple[str, ...]:
        """KEYS[1..6]: records, lease batches, done list, counts, dead letters, queues."""
        tag = self.tag
        return (
            f"{tag}:r",
            f"{tag}:l",
            f"{tag}:x",
            f"{tag}:n",
            f"{tag}:dead",
            f"{tag}:queues",
        )

    @property
    def schedules(self) -> tuple[str, ...]:
        """KEYS[7..8] of the schedule scripts: the schedules hash and their id index."""
        return (f"{self.tag}:s", f"{self.tag}:si")
