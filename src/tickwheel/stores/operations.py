"""The operator's bulk calls on a queue that every store implements: purge and queue defaults.

A purge deletes a queue's timers of one state in batches of `PURGE_BATCH`, each its own short
transaction or script, so a queue of millions never holds a lock, a transaction or a Redis
script for long; a timer that changes state between batches is judged by its new state. Only
`PURGEABLE` states go: a leased timer belongs to the worker holding its lease (its ack must
land), and a done one leaves by itself when its retention ends.
"""

from __future__ import annotations

from typing import Protocol

from tickwheel.model import State
from tickwheel.stores.queue_defaults import QueueDefaults

PURGEABLE = (State.SCHEDULED, State.PAUSED, State.DEAD)
PURGE_BATCH = 1000
"""Timers one purge transaction (SQLite, PostgreSQL) or script call (Redis) deletes at most."""


class QueueOperations(Protocol):
    """The bulk calls of `Store` on one queue."""

    async def purge(self, queue: str, state: State) -> int:
        """Delete every timer of `queue` in `state` (one of `PURGEABLE`), in bounded batches;
        return how many went. Counts, the due-queue index and `queues()` follow; a schedule's
        pending occurrence is its schedule's and stays (pause or delete the schedule)."""
        ...

    async def set_queue_defaults(self, queue: str, defaults: QueueDefaults | None) -> bool:
        """Set (None or empty: remove) `queue`'s defaults alone, atomically, leaving its pause
        and limit as they are; return whether it had defaults before. Like every settings
        change it moves the queue settings' version, so workers read it within a second."""
        ...
