"""The calls of `Store` that read the queue table a page or a queue at a time.

``GET /v1/queues`` and ``GET /v1/queues/{queue}`` ask these, so a request (and the dashboard's
poll) costs the queues it shows, not every queue of a deployment with 10,000: SQLite and
PostgreSQL count over an index range of queue names, Redis reads each shard's sorted index of
its queue names and counts hash, memory (the reference) filters `queue_infos`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tickwheel.stores.base import QueueInfo


@dataclass(frozen=True, slots=True)
class QueuePage:
    """One page of `Store.list_queues`: queues by name; pass `cursor` back for the next, None
    at the end."""

    queues: list[QueueInfo]
    cursor: str | None


def page_of(found: list[QueueInfo], limit: int) -> QueuePage:
    """The page of `limit` queues out of `found`, the first `limit` + 1 after the cursor."""
    if len(found) > limit:
        return QueuePage(found[:limit], found[limit - 1].name)
    return QueuePage(found, None)


class QueuePages(Protocol):
    """The paged reads of `Store`'s queue table."""

    async def list_queues(self, limit: int = 100, cursor: str | None = None) -> QueuePage:
        """Return a page of the queues `queue_infos` lists, by name, reading the page's
        queues only; following `cursor` to the end returns each queue once."""
        ...

    async def queue_info(self, queue: str) -> QueueInfo:
        """Return `queue` as `queue_infos` lists it, with zero counts and default settings
        when it holds nothing and has none."""
        ...
