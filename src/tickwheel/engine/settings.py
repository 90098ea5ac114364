"""The engine's settings: how a worker claims, holds and fires timers (how it calls out is
`tickwheel.callbacks.settings`'s)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tickwheel.errors import InvalidArgument
from tickwheel.model import MAX_QUEUE_CHARS


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(name, f"must be a finite number, got {value!r}")
    if value <= 0:
        raise InvalidArgument(name, f"must be positive, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """A worker's knobs; the defaults come from bench/engine.py on a 2-core machine.

    A claimed timer waits up to `lookahead_ms` in the local wheel and then fires; the worker
    renews held leases by `lease_ms` while they wait or their callbacks run, so a worker that
    dies gives its timers back within one `lease_ms`, whatever their callbacks' timeouts.
    `queues` None fires every queue the store holds, found as they appear; a tuple fires
    only those.
    """

    queues: tuple[str, ...] | None = None
    batch: int = 1000  # most timers one claim takes
    lookahead_ms: int = 250  # claim timers due this far ahead, to fire them on their ms
    # a dead worker's timers come back within about a lease (8 s is the bound on lateness
    # through faults); a store outage shorter than half a lease lapses no renewed lease
    lease_ms: int = 6_000
    # claimed but not settled: beyond it, or beyond concurrency + 2 * batch, no more claims
    max_in_flight: int = 20_000
    concurrency: int = 512  # callbacks running at once (the HTTP client also caps per host)
    grace_s: float = 10.0  # on stop, how long running callbacks may finish before hand-back
    idle_s: float = 60.0  # longest sleep between claims when the store reports nothing due

    def __post_init__(self) -> None:
        if self.queues is not None and (not isinstance(self.queues, tuple) or not self.queues):
            raise InvalidArgument("queues", "must be None (every queue) or a tuple of queue names")
        for queue in self.queues or ():
            if not isinstance(queue, str) or not 0 < len(queue) <= MAX_QUEUE_CHARS:
                raise InvalidArgument("queues", f"invalid queue name {queue!r}")
        for name in ("batch", "lookahead_ms", "lease_ms", "max_in_flight", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(name, f"must be a positive integer, got {value!r}")
        _positive("grace_s", self.grace_s)
        _positive("idle_s", self.idle_s)
        if self.lease_ms <= self.lookahead_ms:
            raise InvalidArgument("lease_ms", "must exceed lookahead_ms, or leases lapse unfired")
