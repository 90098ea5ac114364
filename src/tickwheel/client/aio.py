"""`AsyncClient`: the asyncio client of a running tickwheel API, on httpx; `Client`'s twin."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from tickwheel.client import calls, transport
from tickwheel.client.bodies import id_to_replace, listing, schedule_body, timer_body, when
from tickwheel.client.calls import Answer, Call, Request
from tickwheel.client.views import (
    AttemptInfo,
    Created,
    HostLimit,
    Json,
    Page,
    QueueInfo,
    RunInfo,
    ScheduleInfo,
    Stats,
    TimerInfo,
)

T = TypeVar("T")
Time = datetime | float | str


class AsyncClient:
    """Calls the API at `api_url` (``Authorization: Bearer <token>`` when given), awaiting.

    Errors the API answers raise `tickwheel.errors.ServiceError` (`NotFound`, `Conflict`, …);
    nothing answering raises `ServiceUnreachable`. A request is sent again `retries` times at
    most when that is safe (see `tickwheel.client.transport`); creates are made safe to send
    again by an id chosen here when none is given. No proxy of the environment is used and no
    redirect followed, so the token goes to `api_url` only.

    Raises:
        ValueError: the URL is not ``http(s)://host[:port]`` or holds credentials; the token
            holds characters no header may carry.
    """

    def __init__(
        self,
        api_url: str,
        token: str | None = None,
        *,
        timeout_s: float = transport.TIMEOUT_S,
        retries: int = transport.RETRIES,
    ) -> None:
        self.base_url = transport.base_url_of(api_url)
        self._timeout_s = timeout_s
        self._retries = retries
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=transport.headers_of(token),
            timeout=timeout_s,
            verify=transport.tls_context(),
            trust_env=False,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def run(self, call: Call[T]) -> T:
        """Run one of `tickwheel.client.calls`: send each request it yields, return its result."""
        try:
            request = next(call)
            while True:
                request = call.send(await self._send(request))
        except StopIteration as done:
            result: T = done.value
            return result

    async def _send(self, request: Request) -> Answer:
        doubted = False
        tries = 0
        while True:
            tries += 1
            try:
                response = await self._http.request(
                    request.method, request.path, **transport.arguments(request)
                )
            except httpx.TransportError as error:
                sent = transport.sent_maybe(error)
                if tries > self._retries or (sent and not request.idempotent):
                    raise transport.unreachable(self.base_url, error, self._timeout_s) from error
                doubted = doubted or sent
                await asyncio.sleep(transport.backoff(tries))
                continue
            if response.is_redirect:
                return transport.redirected(response)
            answer = transport.answer_of(response, doubted)
            wait_s = transport.wait_before_retry(request, answer, tries, self._retries)
            if wait_s is None:
                return answer
            doubted = doubted or answer.status != 429
            await asyncio.sleep(wait_s)

    async def add(
        self,
        *,
        url: str | None = None,
        delay: float | None = None,
        due: Time | None = None,
        id: str | None = None,
        replace: bool = False,
        **fields: Any,
    ) -> TimerInfo:
        """Schedule a timer `delay` seconds from now or at `due`: a callback to `url` (with
        `method`, `headers`, `body`), or without one a timer that a queue consumer takes.
        Other `fields`: `queue`, `payload`, `retry` (a dict of the API's retry fields).

        The same `id` and spec again returns the timer already there; another spec raises
        `Conflict` unless `replace`.
        """
        body = timer_body(url, delay, due, id, fields)
        return (await self.create(body, replace=replace)).item

    async def create(self, body: Json, *, replace: bool = False) -> Created[TimerInfo]:
        """Create a timer from the API's JSON `body` (with `replace`: create or replace the
        timer of its ``id``); say whether this call made it."""
        replace_id = id_to_replace(body, replace)
        return await self.run(calls.created("/v1/timers", body, replace_id, TimerInfo.of))

    async def add_many(self, bodies: list[Json]) -> list[Json]:
        """Create up to 1,000 timers in one request; return the API's result for each, in order
        (``{"status": 201|200, "timer": …}`` or ``{"status": 4xx, "error": …}``)."""
        return await self.run(calls.batch(bodies))

    async def get(self, timer_id: str) -> TimerInfo:
        """Return a timer (finished ones too, while the store keeps them)."""
        return await self.run(calls.timer(timer_id))

    async def attempts(self, timer_id: str) -> list[AttemptInfo]:
        """Return a timer's recorded attempts, newest first (`NotFound` for an unknown timer)."""
        return await self.run(calls.attempts(timer_id))

    async def cancel(self, timer_id: str) -> None:
        """Cancel a scheduled or paused timer; one firing or fired raises `NotFound`."""
        await self.run(calls.delete(f"/v1/timers/{calls.segment(timer_id)}"))

    async def reschedule(
        self, timer_id: str, *, delay: float | None = None, due: Time | None = None
    ) -> TimerInfo:
        """Move a scheduled or paused timer to `delay` seconds from now or to `due`."""
        return await self.run(calls.timer(timer_id, method="PATCH", body=when(delay, due)))

    async def pause(self, timer_id: str) -> TimerInfo:
        """Pause a scheduled timer: it never fires until resumed."""
        return await self.run(calls.timer(timer_id, "pause", "POST"))

    async def resume(self, timer_id: str) -> TimerInfo:
        """Resume a paused timer: it fires at its due time, now if that has passed."""
        return await self.run(calls.timer(timer_id, "resume", "POST"))

    async def ls(
        self,
        *,
        state: str | None = None,
        queue: str | None = None,
        due_from: Time | None = None,
        due_to: Time | None = None,
        limit: int = 100,
    ) -> Page[TimerInfo]:
        """List up to `limit` timers, filtered by state, queue and due time (from inclusive)."""
        query = listing(state, queue, due_from, due_to)
        return await self.run(calls.timers("/v1/timers", limit, query))

    async def dead(self, *, limit: int = 100) -> Page[TimerInfo]:
        """List up to `limit` dead-lettered timers."""
        return await self.run(calls.timers("/v1/dead", limit, {}))

    async def replay(self, timer_id: str) -> TimerInfo:
        """Schedule a dead timer again, due now."""
        return await self.run(calls.replay(timer_id))

    async def replay_queue(self, queue: str) -> int:
        """Schedule every dead timer of `queue` again, due now; return how many."""
        return await self.run(calls.replay_queue(queue))

    async def stats(self) -> Stats:
        """Count timers per state; the earliest due time."""
        return await self.run(calls.stats())

    async def queues(self) -> list[QueueInfo]:
        """Every queue with its counts and settings, by name."""
        return await self.run(calls.queues())

    async def queue(self, queue: str) -> QueueInfo:
        """One queue (zero counts and default settings for one never used)."""
        return await self.run(calls.queue(queue))

    async def pause_queue(self, queue: str) -> QueueInfo:
        """Stop workers claiming from `queue` (leases held finish)."""
        return await self.run(calls.queue(queue, "pause", "POST"))

    async def resume_queue(self, queue: str) -> QueueInfo:
        """Let workers claim from `queue` again."""
        return await self.run(calls.queue(queue, "resume", "POST"))

    async def set_queue_limit(
        self,
        queue: str,
        *,
        rate: float | None = None,
        burst: int | None = None,
        concurrency: int | None = None,
    ) -> QueueInfo:
        """Limit the callbacks of `queue`: `rate` a second (`burst` above it), `concurrency` in
        flight, for every worker together."""
        limit = {"rate": rate, "burst": burst, "concurrency": concurrency}
        return await self.run(calls.queue(queue, "limit", "PUT", limit))

    async def remove_queue_limit(self, queue: str) -> None:
        """Remove the limit of `queue`; none there raises `NotFound`."""
        await self.run(calls.delete(f"/v1/queues/{calls.segment(queue)}/limit"))

    async def purge(self, queue: str, state: str) -> int:
        """Delete every timer of `queue` in `state` (``scheduled``, ``paused`` or ``dead``;
        leased timers are never purged); return how many went."""
        return await self.run(calls.purge(queue, state))

    async def cancel_many(self, ids: Iterable[str]) -> dict[str, str]:
        """Cancel many timers, 1,000 a request; return each id's result: ``cancelled``,
        ``not_found``, ``not_scheduled`` (firing, fired or dead) or ``schedule_occurrence``."""
        return await self.run(calls.cancel_many(list(ids)))

    async def set_queue_defaults(
        self,
        queue: str,
        *,
        retry: Json | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> QueueInfo:
        """Give `queue` defaults its timers take when they fire without their own: `retry`
        (``max_attempts``, ``min_backoff``, ``max_backoff``, ``timeout``, ``max_retry``) for a
        timer with the built-in policy, `headers` under each timer's own. Replaces any it had."""
        return await self.run(calls.queue_defaults(queue, retry, dict(headers or {})))

    async def remove_queue_defaults(self, queue: str) -> None:
        """Remove the defaults of `queue`; none there raises `NotFound`."""
        await self.run(calls.delete(f"/v1/queues/{calls.segment(queue)}/defaults"))

    async def limits(self) -> list[HostLimit]:
        """Every limit on a callback host, by host."""
        return await self.run(calls.host_limits())

    async def set_limit(
        self,
        host: str,
        *,
        rate: float | None = None,
        burst: int | None = None,
        concurrency: int | None = None,
    ) -> HostLimit:
        """Limit callbacks to `host` (``host[:port]`` as in its URLs), as `set_queue_limit`."""
        limit = {"rate": rate, "burst": burst, "concurrency": concurrency}
        return await self.run(calls.set_host_limit(host, limit))

    async def remove_limit(self, host: str) -> None:
        """Remove the limit on `host`; none there raises `NotFound`."""
        await self.run(calls.delete(f"/v1/limits/{calls.segment(host)}"))

    async def add_schedule(
        self,
        *,
        url: str | None = None,
        cron: str | None = None,
        every: float | None = None,
        id: str | None = None,
        **fields: Any,
    ) -> ScheduleInfo:
        """Create a recurring timer on a `cron` rule or `every` so many seconds. Other `fields`:
        the callback's `method`, `headers`, `body`, and `timezone`, `start`, `end`,
        `max_runs`, `jitter`, `misfire`, `queue`, `payload`, `retry`."""
        body = schedule_body(url, cron, every, id, fields)
        return (await self.create_schedule(body)).item

    async def create_schedule(self, body: Json) -> Created[ScheduleInfo]:
        """Create a schedule from the API's JSON `body`; say whether this call made it."""
        return await self.run(calls.created("/v1/schedules", body, None, ScheduleInfo.of))

    async def schedules(self, *, limit: int = 100) -> Page[ScheduleInfo]:
        """List up to `limit` schedules."""
        return await self.run(calls.schedules(limit))

    async def get_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Return a schedule with its next occurrences."""
        return await self.run(calls.schedule(schedule_id))

    async def pause_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Pause a schedule: nothing fires until it is resumed."""
        return await self.run(calls.schedule(schedule_id, "pause", "POST"))

    async def resume_schedule(self, schedule_id: str) -> ScheduleInfo:
        """Resume a schedule; a run missed while paused comes as its misfire policy says."""
        return await self.run(calls.schedule(schedule_id, "resume", "POST"))

    async def remove_schedule(self, schedule_id: str) -> None:
        """Delete a schedule and its pending occurrence."""
        await self.run(calls.delete(f"/v1/schedules/{calls.segment(schedule_id)}"))

    async def schedule_runs(self, schedule_id: str) -> list[RunInfo]:
        """A schedule's latest occurrences, newest first."""
        return await self.run(calls.runs(schedule_id))
