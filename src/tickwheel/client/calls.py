"""The API's calls without I/O: each is a generator that yields the `Request`s it needs and is
sent their `Answer`s, so `Client` and `AsyncClient` run the same calls, one blocking and one
awaiting (the "sans-I/O" shape of h11 and httpcore).

A create without an id gets one here (`new_id`), so that sending it again after a failure that
left in doubt whether it arrived can find the first one instead of making a second.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
from tickwheel.errors import (
    AccessDenied,
    Conflict,
    NotFound,
    RequestInvalid,
    ServiceError,
    ServiceUnavailable,
)
from tickwheel.model import new_id

T = TypeVar("T")
MAX_PAGE = 1000
"""The most items the API answers a page."""
MAX_CANCEL = 1000
"""The most ids one bulk cancel request takes."""
Query = Mapping[str, str | int | None]


@dataclass(frozen=True, slots=True)
class Request:
    """One API request; `idempotent`: sending it twice does what sending it once does, so it
    may be sent again after a failure that left in doubt whether it arrived."""

    method: str
    path: str
    body: Any = None
    query: Query = field(default_factory=dict)
    idempotent: bool = False


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer: its status, decoded JSON body (None when empty), ``Retry-After`` in seconds;
    `doubted`: an earlier try of the same request may have reached the service."""

    status: int
    body: Any
    retry_after_s: float | None = None
    doubted: bool = False


Call = Generator[Request, Answer, T]
"""A call: yields requests, is sent their answers, returns its result."""

_ERRORS: dict[int, type[ServiceError]] = {
    400: RequestInvalid,
    401: AccessDenied,
    403: AccessDenied,
    404: NotFound,
    409: Conflict,
    413: RequestInvalid,
    415: RequestInvalid,
    422: RequestInvalid,
    503: ServiceUnavailable,
    507: ServiceUnavailable,
}


def failure(answer: Answer) -> ServiceError:
    """The `tickwheel.errors` exception an error answer stands for."""
    kind = _ERRORS.get(answer.status, ServiceError)
    body = answer.body
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        text = body if isinstance(body, str) and body else "request failed"
        return kind(answer.status, "error", text[:200], retry_after_s=answer.retry_after_s)
    ids = body.get("ids") if isinstance(body, dict) else None
    return kind(
        answer.status,
        str(error.get("code", "error")),
        str(error.get("message", "request failed")),
        error.get("field"),
        retry_after_s=answer.retry_after_s,
        ids=tuple(ids) if isinstance(ids, list) else (),
    )


def checked(answer: Answer) -> Any:
    """The body of a successful answer; an error answer raises its exception."""
    if not 200 <= answer.status < 300:
        raise failure(answer)
    return answer.body


def segment(value: str) -> str:
    """`value` as one path segment."""
    return urllib.parse.quote(value, safe="")


def one(request: Request, read: Callable[[Any], T]) -> Call[T]:
    """Send `request`; return its body as `read` makes it."""
    return read(checked((yield request)))


def nothing(body: Any) -> None:
    """Read no result: the answer's status said it all."""


def created(
    path: str, body: Json, replace_id: str | None, read: Callable[[Json], T]
) -> Call[Created[T]]:
    """Create at `path` (POST), or with `replace_id` create or replace it there (PUT).

    A POST sent again after a doubtful failure finds the first one: the same spec answers 200,
    and with an id made here, a 409 can only be an earlier try of this very call (a `delay`
    repeated more than a second later is another spec), so the item is read back.
    """
    if replace_id is not None:
        answer = yield Request("PUT", f"{path}/{segment(replace_id)}", body, idempotent=True)
        return Created(read(checked(answer)), new=answer.status == 201)
    made_here = body.get("id") is None
    sent = {**body, "id": new_id()} if made_here else body
    answer = yield Request("POST", path, sent, idempotent=True)
    if answer.status == 409 and answer.doubted and made_here:
        found = yield Request("GET", f"{path}/{segment(sent['id'])}", idempotent=True)
        return Created(read(checked(found)), new=True)
    return Created(read(checked(answer)), new=answer.status == 201)


def timer(
    timer_id: str, action: str = "", method: str = "GET", body: Any = None
) -> Call[TimerInfo]:
    """Read a timer, or act on it (``pause``, ``resume``; PATCH to reschedule)."""
    path = f"/v1/timers/{segment(timer_id)}" + (f"/{action}" if action else "")
    return one(Request(method, path, body, idempotent=method in {"GET", "PATCH"}), TimerInfo.of)


def paged(path: str, key: str, limit: int | None, query: Query) -> Call[tuple[list[Json], Any]]:
    """Up to `limit` items (None: all) of the listing at `path`, following its cursors; return
    them and the cursor that continues them."""
    items: list[Json] = []
    cursor: str | None = None
    while True:
        size = MAX_PAGE if limit is None else min(limit - len(items), MAX_PAGE)
        request = Request(
            "GET", path, query={**query, "limit": size, "cursor": cursor}, idempotent=True
        )
        page = checked((yield request))
        items.extend(page.get(key, []))
        cursor = page.get("cursor")
        if cursor is None or (limit is not None and len(items) >= limit):
            return items[:limit], cursor


def timers(path: str, limit: int, query: Query) -> Call[Page[TimerInfo]]:
    """Up to `limit` timers of ``/v1/timers`` or ``/v1/dead``."""
    items, cursor = yield from paged(path, "timers", limit, query)
    return Page([TimerInfo.of(item) for item in items], cursor)


def schedules(limit: int) -> Call[Page[ScheduleInfo]]:
    """Up to `limit` schedules, in id order."""
    items, cursor = yield from paged("/v1/schedules", "schedules", limit, {})
    return Page([ScheduleInfo.of(item) for item in items], cursor)


def queues() -> Call[list[QueueInfo]]:
    """Every queue, by name."""
    items, _ = yield from paged("/v1/queues", "queues", None, {})
    return [QueueInfo.of(item) for item in items]


def host_limits() -> Call[list[HostLimit]]:
    """Every limit on a callback host, by host."""
    items, _ = yield from paged("/v1/limits", "limits", None, {})
    return [HostLimit.of(item) for item in items]


def queue(name: str, action: str = "", method: str = "GET", body: Any = None) -> Call[QueueInfo]:
    """Read a queue, or act on it (``pause``, ``resume``; PUT ``limit``)."""
    path = f"/v1/queues/{segment(name)}" + (f"/{action}" if action else "")
    return one(Request(method, path, body, idempotent=method in {"GET", "PUT"}), QueueInfo.of)


def schedule(schedule_id: str, action: str = "", method: str = "GET") -> Call[ScheduleInfo]:
    """Read a schedule, or act on it (``pause``, ``resume``)."""
    path = f"/v1/schedules/{segment(schedule_id)}" + (f"/{action}" if action else "")
    return one(Request(method, path, idempotent=method == "GET"), ScheduleInfo.of)


def runs(schedule_id: str) -> Call[list[RunInfo]]:
    """A schedule's latest occurrences, newest first."""
    path = f"/v1/schedules/{segment(schedule_id)}/runs"
    return one(
        Request("GET", path, idempotent=True), lambda body: [RunInfo.of(r) for r in body["runs"]]
    )


def attempts(timer_id: str) -> Call[list[AttemptInfo]]:
    """A timer's recorded attempts, newest first."""
    path = f"/v1/timers/{segment(timer_id)}/attempts"
    return one(
        Request("GET", path, idempotent=True),
        lambda body: [AttemptInfo.of(a) for a in body["attempts"]],
    )


def delete(path: str) -> Call[None]:
    """Delete what `path` names."""
    return one(Request("DELETE", path), nothing)


def stats() -> Call[Stats]:
    """Timers per state and the earliest due time."""
    return one(Request("GET", "/v1/stats", idempotent=True), Stats.of)


def replay(timer_id: str) -> Call[TimerInfo]:
    """Schedule a dead timer again, due now."""
    return one(Request("POST", f"/v1/dead/{segment(timer_id)}/replay"), TimerInfo.of)


def replay_queue(name: str) -> Call[int]:
    """Schedule every dead timer of queue `name` again; return how many."""
    request = Request("POST", "/v1/dead/replay", query={"queue": name})
    return one(request, lambda body: int(body["replayed"]))


def set_host_limit(host: str, limit: Json) -> Call[HostLimit]:
    """Set the limit on callbacks to `host`."""
    request = Request("PUT", f"/v1/limits/{segment(host)}", limit, idempotent=True)
    return one(request, HostLimit.of)


def batch(bodies: list[Json]) -> Call[list[Json]]:
    """Create up to 1,000 timers; return the API's result for each, in order."""
    sent = [body if body.get("id") is not None else {**body, "id": new_id()} for body in bodies]
    request = Request("POST", "/v1/timers/batch", {"timers": sent}, idempotent=True)
    return one(request, lambda body: list(body["results"]))


def purge(name: str, state: str) -> Call[int]:
    """Delete every timer of queue `name` in `state` (scheduled, paused or dead); return how
    many went."""
    request = Request("DELETE", f"/v1/queues/{segment(name)}/timers", query={"state": state})
    return one(request, lambda body: int(body["purged"]))


def cancel_many(ids: list[str]) -> Call[dict[str, str]]:
    """Cancel timers by id, `MAX_CANCEL` a request; return each id's result, in order."""
    results: dict[str, str] = {}
    for start in range(0, len(ids), MAX_CANCEL):
        sent = {"ids": ids[start : start + MAX_CANCEL]}
        body = checked((yield Request("POST", "/v1/timers/cancel", sent)))
        results.update((item["id"], item["result"]) for item in body["results"])
    return results


def queue_defaults(name: str, retry: Json | None, headers: Json | None) -> Call[QueueInfo]:
    """Set queue `name`'s defaults: a retry policy (the API's fields) and headers."""
    body = {"retry": retry, "headers": dict(headers or {})}
    return queue(name, "defaults", "PUT", body)
