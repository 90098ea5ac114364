"""Request bodies from keyword arguments: ``add(url=…, delay=…, method=…)`` into the JSON of
``POST /v1/timers``, the same for schedules."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tickwheel.client.views import Json

CALLBACK_FIELDS = frozenset({"method", "headers", "body"})
"""Keyword arguments that go into the callback rather than the timer."""
TIMER_FIELDS = frozenset({"queue", "payload", "retry"})
SCHEDULE_FIELDS = frozenset(
    {"timezone", "start", "end", "max_runs", "jitter", "misfire", *TIMER_FIELDS}
)


def when(delay: float | None, due: datetime | float | str | None) -> Json:
    """``{"delay": s}`` or ``{"due": t}`` from exactly one of them.

    Raises:
        ValueError: both or neither given, or a naive datetime.
    """
    if (delay is None) == (due is None):
        raise ValueError("give exactly one of delay (seconds) and due (a time)")
    if delay is not None:
        return {"delay": delay}
    return {"due": instant(due)}


def instant(value: datetime | float | str | None) -> Any:
    """A time as the API takes it: RFC 3339 for a datetime (which must be aware), else as is.

    Raises:
        ValueError: a naive datetime (whose zone the service cannot know), or a number that is
            not finite.
    """
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("a due time needs a time zone: datetime.now(UTC), not now()")
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a time")
    return value


def target(url: str | None, fields: Mapping[str, Any], allowed: frozenset[str]) -> Json:
    """The target part of a body: `url` and the callback fields into ``callback``, the others
    as they are.

    Raises:
        TypeError: a field that is none of `allowed` or the callback's.
        ValueError: a callback field without a `url`.
    """
    unknown = set(fields) - allowed - CALLBACK_FIELDS
    if unknown:
        raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(unknown))}")
    body: Json = {name: value for name, value in fields.items() if name in allowed}
    callback = {name: value for name, value in fields.items() if name in CALLBACK_FIELDS}
    if url is not None:
        body["callback"] = {"url": url, **callback}
    elif callback:
        raise ValueError(f"{', '.join(sorted(callback))} need a url")
    return body


def timer_body(
    url: str | None,
    delay: float | None,
    due: datetime | float | str | None,
    timer_id: str | None,
    fields: Mapping[str, Any],
) -> Json:
    """The body of ``POST /v1/timers``.

    Raises:
        TypeError: an unknown field.
        ValueError: not exactly one of `delay` and `due`; a callback field without a `url`.
    """
    body = {**when(delay, due), **target(url, fields, TIMER_FIELDS)}
    if timer_id is not None:
        body["id"] = timer_id
    return body


def schedule_body(
    url: str | None,
    cron: str | None,
    every: float | None,
    schedule_id: str | None,
    fields: Mapping[str, Any],
) -> Json:
    """The body of ``POST /v1/schedules``.

    Raises:
        TypeError: an unknown field.
        ValueError: not exactly one of `cron` and `every`; a callback field without a `url`.
    """
    if (cron is None) == (every is None):
        raise ValueError("give exactly one of cron and every (seconds)")
    body: Json = {"cron": cron} if cron is not None else {"every": every}
    body.update(target(url, fields, SCHEDULE_FIELDS))
    for name in ("start", "end"):
        if name in body:
            body[name] = instant(body[name])
    if schedule_id is not None:
        body["id"] = schedule_id
    return body


def id_to_replace(body: Json, replace: bool) -> str | None:
    """The id that a create with `replace` puts to (None without `replace`).

    Raises:
        ValueError: `replace` without an id.
    """
    if not replace:
        return None
    timer_id = body.get("id")
    if not isinstance(timer_id, str):
        raise ValueError("replace needs the id of the timer")
    return timer_id


def listing(
    state: str | None,
    queue: str | None,
    due_from: datetime | float | str | None,
    due_to: datetime | float | str | None,
) -> dict[str, str | int | None]:
    """The query of ``GET /v1/timers``: its times in RFC 3339, the only form it takes."""
    return {
        "state": state,
        "queue": queue,
        "due_from": None if due_from is None else _rfc3339(due_from),
        "due_to": None if due_to is None else _rfc3339(due_to),
    }


def _rfc3339(value: datetime | float | str) -> str:
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return str(instant(value))
