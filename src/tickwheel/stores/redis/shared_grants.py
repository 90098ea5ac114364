"""Limit grants shared by every worker of a Redis store: token buckets and concurrency counts.

One script call (``lua/limit.lua``) gives back the concurrency of finished callbacks and grants
a whole batch of waiting callbacks, by the server's clock, so workers on hosts whose clocks
disagree still share one rate. A concurrency grant is a member of a sorted set scored by when
it lapses (its callback's timeout and a margin): a worker that dies holding grants does not
hold them for good. The keys of all targets share one hash tag, so the script runs on one node
of a Cluster::

    {<p>:grants}:b:<target>   hash   v: tokens left, t: server ms they were counted at
    {<p>:grants}:c:<target>   zset   member -> server ms its grant lapses

A target is ``host:<host>`` or ``queue:<queue>``. Both keys expire once idle long enough that
nothing is lost with them (a full bucket, no grant left).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources

from tickwheel.stores.limit import Answer, Ask, Limit
from tickwheel.stores.redis.scripts import Arg, Client, unavailable


def _source() -> str:
    return (resources.files("tickwheel.stores.redis") / "lua" / "limit.lua").read_text()


class RedisGrants:
    """Grants for limited callbacks kept in Redis under `prefix` (a `Grants`)."""

    def __init__(self, client: Client, prefix: str) -> None:
        self._script = client.register_script(_source())
        self._tag = "{%s:grants}" % prefix  # noqa: UP031 -- braces would need doubling

    async def take(
        self, limits: Mapping[str, Limit], releases: Sequence[tuple[str, str]], asks: Sequence[Ask]
    ) -> list[Answer]:
        """Give back `releases`, then grant each ask what its targets allow (see limit.lua)."""
        index: dict[str, int] = {}
        keys: list[str] = []
        spec: list[Arg] = []

        def target(key: str) -> int:
            found = index.get(key)
            if found is None:
                found = index[key] = len(index) + 1
                keys.extend((f"{self._tag}:b:{key}", f"{self._tag}:c:{key}"))
                limit = limits.get(key)
                if limit is None:  # only giving back: no bucket to count
                    spec.extend((0, 0, 0))
                else:
                    spec.extend((limit.rate or 0, limit.bucket, limit.concurrency or 0))
            return found

        tail: list[Arg] = []
        for want, hold_ms, targets, members, spare in asks:
            named = members[:want]
            tail.extend((want, hold_ms, len(targets), len(named), spare))
            tail.extend(target(key) for key in targets)
            tail.extend(named)
        given: list[Arg] = [len(releases)]
        for key, member in releases:
            given.extend((target(key), member))
        args: list[Arg] = [len(index), *spec, *given, *tail]
        with unavailable("limit"):
            reply = await self._script(keys=keys, args=args)
        return [
            (int(reply[n]), int(reply[n + 1]), int(reply[n + 2])) for n in range(0, len(reply), 3)
        ]
