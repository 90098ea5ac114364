"""Replicated durability: a write answers only once a replica holds it.

``?durability=replicated`` (and ``&wait_ms=N``) on a Redis store URL makes every call that
creates or changes a timer or a schedule at a caller's request follow its scripts with
``WAIT 1 <wait_ms>`` on the connection that ran them (on a Cluster, on each node that took
one). WAIT covers that connection's own writes only, hence the same connection; on a standalone
server a PUBLISH before it extends it to every earlier write (`scripts.BUMP`). When no replica
acknowledges within `wait_ms` the call raises `NotReplicated`, naming the ids written: the write
happened on the master and stands unless the master fails first; a retry by the same id is
idempotent, a create without an id would be a second timer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.asyncio import Redis, RedisCluster

from tickwheel.errors import InvalidArgument, NotReplicated

PARAMS = ("durability", "wait_ms")
DEFAULT_WAIT_MS = 1_000
MAX_WAIT_MS = 10_000
# scripts a caller's create or change runs; the worker's claim, extend, ack, retry and kill
# are not waited for: losing one on a failover delivers a timer again, as a lost lease does
WAITED = frozenset(
    {"add", "add_one", "cancel", "pause", "replay", "reschedule", "resume", "schedule_step"}
)


@dataclass(frozen=True, slots=True)
class Replicated:
    """Wait for one replica to acknowledge each write, `wait_ms` at most."""

    wait_ms: int = DEFAULT_WAIT_MS

    def __post_init__(self) -> None:
        if type(self.wait_ms) is not int or not 1 <= self.wait_ms <= MAX_WAIT_MS:
            raise InvalidArgument(
                "wait_ms", f"must be an integer from 1 to {MAX_WAIT_MS}, got {self.wait_ms!r}"
            )

    def check(self, acknowledged: object) -> None:
        """Raise `NotReplicated` unless WAIT's reply counts at least one replica."""
        if not isinstance(acknowledged, int) or acknowledged < 1:
            raise NotReplicated(
                (),
                f"no replica acknowledged the write within {self.wait_ms} ms "
                "(durability=replicated); it is stored on the master and may be lost "
                "if the master fails: check it by id rather than create it again",
            )


async def count_replicas(client: Redis | RedisCluster) -> int:
    """Return how many replicas the master has (on a Cluster: the fewest any master has),
    as ``INFO replication`` counts them (``connected_slaves``)."""
    if isinstance(client, RedisCluster):
        info: dict[str, Any] = await client.info("replication", target_nodes=client.PRIMARIES)
    else:
        info = await client.info("replication")
    # a Cluster client answers per node, {node name: its section}, unless it has one master
    sections = info.values() if all(isinstance(v, dict) for v in info.values()) else [info]
    return min((int(section.get("connected_slaves", 0)) for section in sections), default=0)


def parse(pairs: list[tuple[str, str]]) -> Replicated | None:
    """The durability named by a store URL's query `pairs` (None: the default, no WAIT).

    Raises:
        InvalidArgument: a value is unknown or out of bounds, given twice, or ``wait_ms``
            comes without ``durability=replicated``.
    """
    found = {name: [value for key, value in pairs if key == name] for name in PARAMS}
    for name, values in found.items():
        if len(values) > 1:
            raise InvalidArgument(name, f"give ?{name}= at most once")
    durability = found["durability"][0] if found["durability"] else None
    wait_ms = found["wait_ms"][0] if found["wait_ms"] else None
    if durability is None:
        if wait_ms is not None:
            raise InvalidArgument("wait_ms", "applies only with durability=replicated")
        return None
    if durability != "replicated":
        raise InvalidArgument(
            "durability", f"must be 'replicated' (or absent for the default), got {durability!r}"
        )
    if wait_ms is None:
        return Replicated()
    if not wait_ms.isascii() or not wait_ms.isdigit() or len(wait_ms) > 6:
        raise InvalidArgument(
            "wait_ms", f"must be an integer from 1 to {MAX_WAIT_MS}, got {wait_ms!r}"
        )
    return Replicated(int(wait_ms))


def split_url(url: str) -> tuple[str, Replicated | None]:
    """`url` without the durability parameters, and the durability they name."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if not any(name in PARAMS for name, _ in pairs):
        return url, None
    rest = urlencode([(name, value) for name, value in pairs if name not in PARAMS])
    return urlunsplit(parts._replace(query=rest)), parse(pairs)
