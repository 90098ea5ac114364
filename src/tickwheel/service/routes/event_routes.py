"""``GET /v1/events``: the process's timer state changes as Server-Sent Events.

Each subscriber reads the process's `ChangeFeed` from its own place and writes what its token
may see; it holds no queue of its own, so a slow one costs memory only for the write in hand.
A subscriber whose write waits longer than `SEND_TIMEOUT_S`, or that falls a whole ring behind,
is dropped (the connection closed); it may come back with ``Last-Event-ID`` and resume if its
place is still in the ring, else it gets a ``reset`` event first and goes on from now.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request, Response
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.types import Receive, Scope, Send

from tickwheel.engine.changes import ChangeFeed, Entry, Lagged
from tickwheel.service.api_errors import ApiError
from tickwheel.service.routes.access import check_queue, tenant_of
from tickwheel.service.routes.deps import errors, strict_router
from tickwheel.service.schemas import ID_PATTERN
from tickwheel.service.tenants import Tenant

__all__ = [
    "HEARTBEAT_S",
    "MAX_SUBSCRIBERS",
    "SEND_TIMEOUT_S",
    "EventStream",
    "StreamGauges",
    "router",
]

MAX_SUBSCRIBERS = 64
"""Streams one process serves at once; one more is 503 with ``Retry-After``."""
SEND_TIMEOUT_S = 5.0
"""Longest one write to a subscriber may wait for it to read; then it is dropped."""
HEARTBEAT_S = 15.0
"""A comment line after this long without a change, so proxies and clients see the stream live."""
BATCH = 512
"""Changes written at most in one write."""
RETRY_MS = 1000
"""What the stream asks an `EventSource` to wait before it reconnects."""
SEEN_QUEUES = 10_000
"""Queues a subscriber remembers the visibility of; past that it forgets them all."""
# one event of the stream: `data` is the change as JSON (`type`, `id`, `queue`, `attempt`,
# `at_ms`), or a `reset` (`type`, `reason`)
_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "event": {"type": "string"},
        "data": {"type": "string"},
        "id": {"type": "string"},
        "retry": {"type": "integer"},
    },
}
_EVENT_ID = re.compile(r"([0-9a-f]{8})-([0-9]{1,19})")


def _encoded(entry: Entry, epoch: str) -> bytes:
    """The change as an SSE event, encoded once for every subscriber; ids and queues need no
    JSON escaping (their alphabet has no quote, backslash or control character)."""
    encoded = entry[6]
    if isinstance(encoded, bytes):
        return encoded
    seq, kind, timer_id, queue, attempt, at_ms = entry[:6]
    shown = "null" if timer_id is None else f'"{timer_id}"'
    fresh = (
        f"id: {epoch}-{seq}\nevent: {kind}\ndata: "
        f'{{"type":"{kind}","id":{shown},"queue":"{queue}","attempt":{attempt},'
        f'"at_ms":{at_ms}}}\n\n'
    ).encode()
    entry[6] = fresh
    return fresh


class EventStream(Response):
    """The response of one subscriber: changes after `after`, those `sees` lets through."""

    media_type = "text/event-stream"

    def __init__(self, feed: ChangeFeed, after: int, reset: str | None, sees: Any) -> None:
        super().__init__(
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            media_type=self.media_type,
        )
        # a stream has no length: the body goes out chunked
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self._feed = feed
        self._after = after
        self._reset = reset
        self._sees = sees

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        feed = self._feed
        me = asyncio.current_task()
        left = False

        async def watch() -> None:
            nonlocal left
            while (await receive())["type"] != "http.disconnect":
                pass
            left = True
            if me is not None:
                me.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            first = f"retry: {RETRY_MS}\n: tickwheel events\n\n"
            if self._reset is not None:
                first += f'event: reset\ndata: {{"type":"reset","reason":"{self._reset}"}}\n\n'
            if await self._write(send, first.encode()):
                await self._stream(send)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(SEND_TIMEOUT_S):
                        await send({"type": "http.response.body", "body": b""})
        except asyncio.CancelledError:
            if not left or me is None:
                raise
            me.uncancel()
        finally:
            watcher.cancel()
            feed.readers -= 1

    async def _stream(self, send: Send) -> None:
        """Write changes until the feed closes; return to drop the subscriber."""
        feed, after, sees = self._feed, self._after, self._sees
        while not feed.closed:
            if not await feed.wait(after, HEARTBEAT_S):
                if not await self._write(send, b": keep-alive\n\n"):
                    return
                continue
            try:
                entries = feed.read(after, BATCH)
            except Lagged:
                feed.dropped += 1
                return
            if not entries:
                continue
            after = entries[-1][0]  # type: ignore[assignment]
            epoch = feed.epoch
            chunk = b"".join([_encoded(e, epoch) for e in entries if sees(e[3])])
            if chunk and not await self._write(send, chunk):
                feed.dropped += 1
                return

    @staticmethod
    async def _write(send: Send, body: bytes) -> bool:
        try:
            async with asyncio.timeout(SEND_TIMEOUT_S):
                await send({"type": "http.response.body", "body": body, "more_body": True})
        except TimeoutError:
            return False
        return True


def _place(feed: ChangeFeed, last_event_id: str | None) -> tuple[int, str | None]:
    """Where a subscriber starts: after its ``Last-Event-ID`` if the ring still holds what
    follows it, else at the newest change with the reason for a ``reset`` event."""
    if last_event_id is None:
        return feed.head, None
    found = _EVENT_ID.fullmatch(last_event_id.strip())
    if found is None:
        return feed.head, "invalid"
    if found[1] != feed.epoch:
        return feed.head, "restarted"
    seq = int(found[2])
    if seq > feed.head:
        return feed.head, "invalid"
    if seq < feed.oldest() - 1:
        return feed.head, "expired"
    return seq, None


def _visible(tenant: Tenant | None, queue: str | None) -> Any:
    """The test a change's queue passes to be shown: the one asked for, within the tenant's."""
    if queue is not None:
        return queue.__eq__
    if tenant is None or tenant.all_queues:
        return lambda _: True
    seen: dict[str, bool] = {}

    def sees(name: str) -> bool:
        shown = seen.get(name)
        if shown is None:
            if len(seen) >= SEEN_QUEUES:
                seen.clear()
            shown = seen[name] = tenant.sees(name)
        return shown

    return sees


class StreamGauges:
    """A registry collector: the streams a process serves, and those it dropped as slow."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "tickwheel_event_streams", "Event streams open", value=self.feed.readers
        )
        yield CounterMetricFamily(
            "tickwheel_event_streams_dropped",
            "Event streams closed for reading too slowly",
            value=self.feed.dropped,
        )


def router() -> APIRouter:
    """Build the event stream's route."""
    routes = strict_router()

    @routes.get(
        "/v1/events",
        status_code=200,
        response_class=EventStream,
        responses={
            200: {"content": {"text/event-stream": {"schema": _EVENT_SCHEMA}}},
            **errors(),
        },
    )
    async def events(
        request: Request,
        queue: Annotated[str | None, Query(pattern=ID_PATTERN, max_length=64)] = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=64)] = None,
    ) -> EventStream:
        """Stream timer state changes (`created`, `fired`, `acked`, `retried`, `dead`,
        `cancelled`, `paused`) of one queue, or of every queue the token sees, as
        Server-Sent Events. Resume with ``Last-Event-ID``: a place no longer held (or from
        before a restart) starts with a `reset` event. Changes are this process's: its
        worker's and its API's."""
        tenant = tenant_of(request)
        if queue is not None:
            check_queue(tenant, queue)
        context = request.app.state.tickwheel
        feed: ChangeFeed = context.changes
        if feed.readers >= MAX_SUBSCRIBERS:
            raise ApiError(
                503,
                f"{MAX_SUBSCRIBERS} event streams are open: try again later",
                code="too_many_streams",
                retry_after_s=5,
            )
        after, reset = _place(feed, last_event_id)
        feed.readers += 1
        return EventStream(feed, after, reset, _visible(tenant, queue))

    return routes
