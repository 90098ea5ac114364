"""Grants for limited callbacks kept in this process: token buckets and concurrency counts per
target key.

A `Limiter` (`limiter.py`) asks a `Grants` (`stores/limit.py`) for every waiting group in one
call. On one store all workers share the grants when the store keeps them
(`Store.limit_grants`: Redis, one script call per batch); else each process keeps its own
(`LocalGrants`), which also grant one callback at once without a call (`take_one`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence

from tickwheel.stores.limit import Answer, Ask, Limit


class _Bucket:
    __slots__ = ("at", "running", "tokens")

    def __init__(self) -> None:
        self.tokens = -1.0  # full at first use
        self.at = 0.0
        self.running = 0


class LocalGrants:
    """Grants kept in this process: for stores that keep none to share (memory, SQLite,
    PostgreSQL)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    async def take(
        self, limits: Mapping[str, Limit], releases: Sequence[tuple[str, str]], asks: Sequence[Ask]
    ) -> list[Answer]:
        return self.take_now(limits, releases, asks)

    def take_now(
        self, limits: Mapping[str, Limit], releases: Sequence[tuple[str, str]], asks: Sequence[Ask]
    ) -> list[Answer]:
        """`take`, without waiting for anything; no spares (a local grant is had at once)."""
        buckets = self._refill(limits, releases)
        answers: list[Answer] = []
        for want, _, keys, _, _ in asks:
            granted = want
            for key in keys:
                limit, bucket = limits[key], buckets[key]
                if limit.rate is not None:
                    granted = min(granted, math.floor(bucket.tokens))
                if limit.concurrency is not None:
                    granted = min(granted, limit.concurrency - bucket.running)
            granted = max(granted, 0)
            wait_ms = 0
            for key in keys:
                limit, bucket = limits[key], buckets[key]
                if limit.rate is not None:
                    bucket.tokens -= granted
                if limit.concurrency is not None:
                    bucket.running += granted
            if granted < want:
                wait_ms = _wait_ms(limits, {key: buckets[key] for key in keys})
            answers.append((granted, wait_ms, 0))
        return answers

    def take_one(self, limits: Mapping[str, Limit], releases: Sequence[tuple[str, str]]) -> bool:
        """Give back `releases`, then take one grant of every target in `limits` if each has
        one now: the callback that finds no one waiting before it, in one pass."""
        if releases:
            self.give_back(releases)
        now = self._clock()
        for key, limit in limits.items():
            bucket = self._filled(key, limit, now)
            if limit.rate is not None and bucket.tokens < 1:
                return False
            if limit.concurrency is not None and bucket.running >= limit.concurrency:
                return False
        buckets = self._buckets
        for key, limit in limits.items():
            bucket = buckets[key]
            if limit.rate is not None:
                bucket.tokens -= 1
            if limit.concurrency is not None:
                bucket.running += 1
        return True

    def give_back(self, releases: Sequence[tuple[str, str]]) -> None:
        """Return the concurrency units `releases` (target key, member) held."""
        buckets = self._buckets
        for key, _ in releases:
            bucket = buckets.get(key)
            if bucket is not None and bucket.running > 0:
                bucket.running -= 1

    def _refill(
        self, limits: Mapping[str, Limit], releases: Sequence[tuple[str, str]]
    ) -> dict[str, _Bucket]:
        """Give back `releases` and fill the buckets of `limits` with the tokens earned since."""
        self.give_back(releases)
        now = self._clock()
        for key, limit in limits.items():
            self._filled(key, limit, now)
        return self._buckets

    def _filled(self, key: str, limit: Limit, now: float) -> _Bucket:
        """The bucket of `key`, made on first use, with the tokens its rate earned by `now`."""
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket()
        if limit.rate is not None:
            _fill(bucket, limit, now)
        return bucket


def _fill(bucket: _Bucket, limit: Limit, now: float) -> None:
    """Add to `bucket` the tokens `limit`'s rate earned since it was last filled."""
    assert limit.rate is not None
    size = limit.bucket
    if bucket.tokens < 0:
        bucket.tokens = size
    else:
        bucket.tokens = min(size, bucket.tokens + (now - bucket.at) * limit.rate)
    bucket.at = now


def _wait_ms(limits: Mapping[str, Limit], buckets: Mapping[str, _Bucket]) -> int:
    """When an ask that got less than it wanted is worth asking again (see `Grants.take`)."""
    wait_ms = 0
    for key, bucket in buckets.items():
        limit = limits[key]
        if limit.concurrency is not None and bucket.running >= limit.concurrency:
            return -1
        if limit.rate is not None and bucket.tokens < 1:
            wait_ms = max(wait_ms, math.ceil((1 - bucket.tokens) * 1000 / limit.rate))
    return wait_ms
