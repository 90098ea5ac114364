"""What every library in the peers table offers the phases: enqueue a job due now or at an
epoch time, start and stop its worker, empty its store."""

from __future__ import annotations

from importlib import metadata
from urllib.parse import urlparse

GRACE_S = 15.0


class Peer:
    """One library as the phases drive it; subclasses fill in its calls.

    `settings` says how its worker runs here; `timing` how it runs a job at a time and how
    often it looks by default; `grace_s` how long after the last due time a job may still run
    before it counts as lost."""

    package = ""
    settings = ""
    timing = ""
    grace_s = GRACE_S
    enqueue_ahead = False  # the enqueue column's jobs are due an hour ahead, worker running

    def __init__(self, name: str, redis_url: str, postgres_url: str) -> None:
        self.name = name
        self.redis_url = redis_url
        self.postgres_url = postgres_url
        parsed = urlparse(redis_url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 6379

    def version(self) -> str:
        return metadata.version(self.package)

    async def open(self) -> None:
        """Connect; called once before the phases."""

    async def close(self) -> None:
        """Disconnect and stop whatever still runs."""

    async def enqueue(self, i: int, when_s: float | None) -> None:
        """Enqueue job `i`, due now (None) or at epoch second `when_s`."""
        raise NotImplementedError

    async def enqueue_all(self, n: int, when_s: float | None) -> None:
        """The enqueue column: jobs 0..n-1, one call each unless the row says otherwise."""
        for i in range(n):
            await self.enqueue(i, when_s)

    async def start(self) -> None:
        """Start the worker (and its scheduler, where it has one)."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Stop the worker."""
        raise NotImplementedError

    async def reset(self) -> None:
        """Empty the library's store; the worker is stopped."""
        flush_redis(self.redis_url)


def flush_redis(url: str) -> None:
    """Empty the bench's own Redis between phases."""
    import redis

    client = redis.Redis.from_url(url)
    client.flushall()
    client.close()
