"""`ApiClient`: the CLI's blocking HTTP client of a running tickwheel API, on `urllib.request`.

One request per CLI invocation does not need a pool or an async loop, and the standard library
keeps ``tickwheel ls`` quick to start: no HTTP library to import before the first request.

The client follows no redirect: urllib would carry ``Authorization`` along to wherever a
``Location`` points, another host included, and the API itself never redirects.
"""

from __future__ import annotations

import json
import socket
import string
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from tickwheel.errors import TickwheelError

DEFAULT_API = "http://127.0.0.1:8080"
TIMEOUT_S = 30.0
MAX_PAGE = 1000
BAD_INPUT_STATUSES = frozenset({400, 409, 413, 415, 422})
"""Statuses that mean the request itself was wrong (the CLI exits 2 for them)."""
_TOKEN_CHARS = frozenset(string.printable) - frozenset(string.whitespace)
Rows = list[dict[str, Any]]
"""A list of JSON objects (named here: inside `ApiClient`, ``list`` is its method)."""


class ApiRequestFailed(TickwheelError):
    """The API answered with an error; `status`, `code`, `field` come from its error body."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        where = f" ({field})" if field else ""
        super().__init__(f"{message}{where} [HTTP {status} {code}]")
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    @property
    def bad_input(self) -> bool:
        """Whether the request was at fault rather than the service or the timer's state."""
        return self.status in BAD_INPUT_STATUSES


class ApiUnreachable(TickwheelError):
    """Nothing answered at the API's address (refused, timed out, name unknown)."""

    def __init__(self, base_url: str, reason: str) -> None:
        super().__init__(f"cannot reach the tickwheel API at {base_url} ({reason})")
        self.base_url = base_url
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Response:
    """A successful answer: its status and decoded JSON body (None when empty)."""

    status: int
    body: Any


class ApiClient:
    """Calls the ``/v1`` API at `base_url`, with ``Authorization: Bearer <token>`` when given.

    Raises `ApiRequestFailed` for error answers and `ApiUnreachable` when nothing answers.
    """

    def __init__(
        self, base_url: str = DEFAULT_API, token: str | None = None, timeout_s: float = TIMEOUT_S
    ) -> None:
        """Check the URL and the token; neither is echoed in an error, as either may hold a secret.

        Raises:
            ValueError: the URL is not ``http(s)://host[:port]`` or holds credentials; the token
                has whitespace or other characters no header value may carry.
        """
        parsed = urllib.parse.urlsplit(base_url)
        if "@" in parsed.netloc:
            raise ValueError("the API URL must not hold credentials: give the token instead")
        if parsed.scheme not in {"http", "https"} or not parsed.hostname:
            shown = "" if "@" in base_url else f", got {base_url!r}"
            raise ValueError(f"the API URL must look like http://host:port{shown}")
        if token and not set(token) <= _TOKEN_CHARS:
            raise ValueError("the token must be printable ASCII without whitespace")
        self.base_url = base_url.rstrip("/")
        self._token = token
        self._timeout_s = timeout_s
        # a direct client: a proxy from the environment must not sit between CLI and service
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}), _RefuseRedirects()
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str | int | None] | None = None,
    ) -> Response:
        """Send one request and return the answer; 2xx only, anything else raises."""
        url = self.base_url + path
        pairs = {key: str(value) for key, value in (query or {}).items() if value is not None}
        if pairs:
            url += "?" + urllib.parse.urlencode(pairs)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("accept", "application/json")
        if data is not None:
            request.add_header("content-type", "application/json")
        if self._token:
            request.add_header("authorization", f"Bearer {self._token}")
        try:
            with self._opener.open(request, timeout=self._timeout_s) as answer:
                return Response(answer.status, _decode(answer.read()))
        except urllib.error.HTTPError as error:
            with error:
                if 300 <= error.code < 400:
                    raise _redirected(error.code, error.headers.get("location")) from None
                raise _failure(error.code, error.read()) from None
        except urllib.error.URLError as error:
            raise ApiUnreachable(self.base_url, _reason(error.reason)) from error
        except TimeoutError as error:
            raise ApiUnreachable(
                self.base_url, f"no answer within {self._timeout_s:g} s"
            ) from error
        except ConnectionError as error:
            raise ApiUnreachable(self.base_url, _reason(error)) from error

    def add(self, timer: dict[str, Any]) -> Response:
        """Create a timer (201), or find the same one already there (200)."""
        return self.request("POST", "/v1/timers", timer)

    def put(self, timer_id: str, timer: dict[str, Any]) -> Response:
        """Create the timer `timer_id` (201) or replace it (200)."""
        return self.request("PUT", _timer_path(timer_id), timer)

    def get(self, timer_id: str) -> dict[str, Any]:
        """Return a timer as the API shows it."""
        body: dict[str, Any] = self.request("GET", _timer_path(timer_id)).body
        return body

    def cancel(self, timer_id: str) -> None:
        """Delete a scheduled timer; a 404 raises `ApiRequestFailed`."""
        self.request("DELETE", _timer_path(timer_id))

    def list(
        self, path: str, limit: int, filters: dict[str, str | None] | None = None
    ) -> dict[str, Any]:
        """Return up to `limit` timers of ``/v1/timers`` or ``/v1/dead``, following cursors.

        `filters` are query parameters sent with every page (``state``, ``queue``, ...); a None
        value is left out."""
        timers: list[Any] = []
        cursor: str | None = None
        while True:
            query: dict[str, str | int | None] = {
                **(filters or {}),
                "limit": min(limit - len(timers), MAX_PAGE),
                "cursor": cursor,
            }
            page = self.request("GET", path, query=query).body
            timers.extend(page.get("timers", []))
            cursor = page.get("cursor")
            if cursor is None or len(timers) >= limit:
                return {"timers": timers[:limit], "cursor": cursor}

    def add_batch(self, timers: Rows) -> Rows:
        """Create up to 1,000 timers (`POST /v1/timers` bodies); return their results, in order."""
        results: Rows = self.request("POST", "/v1/timers/batch", {"timers": timers}).body["results"]
        return results

    def reschedule(self, timer_id: str, when: dict[str, Any]) -> dict[str, Any]:
        """Move a scheduled timer to `when` (``{"delay": s}`` or ``{"due": t}``); return it."""
        body: dict[str, Any] = self.request("PATCH", _timer_path(timer_id), when).body
        return body

    def pause(self, timer_id: str) -> dict[str, Any]:
        """Pause a scheduled timer; return it."""
        body: dict[str, Any] = self.request("POST", _timer_path(timer_id, "pause")).body
        return body

    def resume(self, timer_id: str) -> dict[str, Any]:
        """Resume a paused timer; return it."""
        body: dict[str, Any] = self.request("POST", _timer_path(timer_id, "resume")).body
        return body

    def queues(self) -> Rows:
        """Return every queue with its counts and settings, by name, following cursors."""
        return self.every("/v1/queues", "queues")

    def queue(self, queue: str) -> dict[str, Any]:
        """Return one queue (zero counts and default settings for one never used)."""
        body: dict[str, Any] = self.request("GET", _queue_path(queue)).body
        return body

    def pause_queue(self, queue: str) -> dict[str, Any]:
        """Stop workers claiming from `queue`; return the queue."""
        body: dict[str, Any] = self.request("POST", _queue_path(queue, "pause")).body
        return body

    def resume_queue(self, queue: str) -> dict[str, Any]:
        """Let workers claim from `queue` again; return the queue."""
        body: dict[str, Any] = self.request("POST", _queue_path(queue, "resume")).body
        return body

    def set_queue(self, queue: str, settings: dict[str, Any]) -> dict[str, Any]:
        """Replace a queue's settings (``paused``, ``limit``); return the queue."""
        body: dict[str, Any] = self.request("PUT", _queue_path(queue), settings).body
        return body

    def set_queue_limit(self, queue: str, limit: dict[str, Any]) -> dict[str, Any]:
        """Set a queue's limit alone (its pause stays); return the queue."""
        body: dict[str, Any] = self.request("PUT", _queue_path(queue, "limit"), limit).body
        return body

    def delete_queue_limit(self, queue: str) -> None:
        """Remove a queue's limit alone; none there raises `ApiRequestFailed` (404)."""
        self.request("DELETE", _queue_path(queue, "limit"))

    def limits(self) -> Rows:
        """Return the limits set on callback hosts, by host, following cursors."""
        return self.every("/v1/limits", "limits")

    def every(self, path: str, key: str) -> Rows:
        """Return the `key` rows of every page of `path`, following its cursors to the end."""
        rows: Rows = []
        cursor: str | None = None
        while True:
            page = self.request("GET", path, query={"limit": MAX_PAGE, "cursor": cursor}).body
            rows.extend(page[key])
            cursor = page.get("cursor")
            if cursor is None:
                return rows

    def set_limit(self, host: str, limit: dict[str, Any]) -> dict[str, Any]:
        """Set the limit on callbacks to `host`; return it."""
        body: dict[str, Any] = self.request("PUT", _limit_path(host), limit).body
        return body

    def delete_limit(self, host: str) -> None:
        """Remove the limit on `host`; none there raises `ApiRequestFailed` (404)."""
        self.request("DELETE", _limit_path(host))

    def replay(self, timer_id: str) -> Response:
        """Schedule a dead timer again, due now."""
        return self.request("POST", f"/v1/dead/{_segment(timer_id)}/replay")

    def replay_queue(self, queue: str) -> dict[str, Any]:
        """Schedule every dead timer of `queue` again, due now; return ``{"replayed": n}``."""
        body: dict[str, Any] = self.request("POST", "/v1/dead/replay", query={"queue": queue}).body
        return body

    def stats(self) -> dict[str, Any]:
        """Return timers per state and the earliest due time."""
        body: dict[str, Any] = self.request("GET", "/v1/stats").body
        return body

    def add_schedule(self, schedule: dict[str, Any]) -> Response:
        """Create a schedule (201), or find the same one already there (200)."""
        return self.request("POST", "/v1/schedules", schedule)

    def get_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Return a schedule with its next occurrences."""
        body: dict[str, Any] = self.request("GET", _schedule_path(schedule_id)).body
        return body

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Pause a schedule; return it."""
        body: dict[str, Any] = self.request("POST", _schedule_path(schedule_id, "pause")).body
        return body

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Resume a schedule; return it."""
        body: dict[str, Any] = self.request("POST", _schedule_path(schedule_id, "resume")).body
        return body

    def schedule_runs(self, schedule_id: str) -> dict[str, Any]:
        """Return a schedule's latest occurrences, newest first."""
        body: dict[str, Any] = self.request("GET", _schedule_path(schedule_id, "runs")).body
        return body

    def delete_schedule(self, schedule_id: str) -> None:
        """Delete a schedule; a 404 raises `ApiRequestFailed`."""
        self.request("DELETE", _schedule_path(schedule_id))

    def list_schedules(self, limit: int) -> dict[str, Any]:
        """Return up to `limit` schedules, following cursors."""
        schedules: list[Any] = []
        cursor: str | None = None
        while True:
            query: dict[str, str | int | None] = {
                "limit": min(limit - len(schedules), MAX_PAGE),
                "cursor": cursor,
            }
            page = self.request("GET", "/v1/schedules", query=query).body
            schedules.extend(page.get("schedules", []))
            cursor = page.get("cursor")
            if cursor is None or len(schedules) >= limit:
                return {"schedules": schedules[:limit], "cursor": cursor}


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """Hand every redirect back as an `HTTPError`, so `ApiClient.request` refuses it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _redirected(status: int, location: str | None) -> ApiRequestFailed:
    shown = "".join(c for c in (location or "nowhere")[:200] if c.isprintable())
    return ApiRequestFailed(
        status,
        "redirect",
        f"the API redirects to {shown}; tickwheel follows no redirect, so that the token goes "
        "only to the URL given: if that is the API, use its URL instead",
    )


def _segment(timer_id: str) -> str:
    return urllib.parse.quote(timer_id, safe="")


def _schedule_path(schedule_id: str, action: str | None = None) -> str:
    path = f"/v1/schedules/{_segment(schedule_id)}"
    return path if action is None else f"{path}/{action}"


def _timer_path(timer_id: str, action: str | None = None) -> str:
    path = f"/v1/timers/{_segment(timer_id)}"
    return path if action is None else f"{path}/{action}"


def _queue_path(queue: str, action: str | None = None) -> str:
    path = f"/v1/queues/{_segment(queue)}"
    return path if action is None else f"{path}/{action}"


def _limit_path(host: str) -> str:
    return f"/v1/limits/{_segment(host)}"


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _failure(status: int, raw: bytes) -> ApiRequestFailed:
    body = _decode(raw)
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return ApiRequestFailed(
            status,
            str(error.get("code", "error")),
            str(error.get("message", "request failed")),
            error.get("field"),
        )
    text = body if isinstance(body, str) and body else "request failed"
    return ApiRequestFailed(status, "error", text[:200])


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return f"unknown host: {reason.strerror}"
    if isinstance(reason, TimeoutError):
        return "timed out"
    return str(reason)
