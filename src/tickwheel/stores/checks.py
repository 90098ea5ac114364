"""Argument checks every store applies the same way before touching its data."""

from __future__ import annotations

import ipaddress
import math
import re

from tickwheel.errors import InvalidArgument, InvalidTimer
from tickwheel.model import MAX_DUE_MS, MAX_QUEUE_CHARS, State
from tickwheel.stores.base import Limit, QueueSettings, StoreSettings
from tickwheel.stores.operations import PURGEABLE
from tickwheel.stores.queue_defaults import QueueDefaults
from tickwheel.urls import InvalidUrl, parse_url

MAX_LIST = 1000
MAX_DUE_QUEUES = 10_000
"""Queues one `due_queues` call lists at most."""
MAX_LIMIT_HOST_CHARS = 260
"""A limit's host: a DNS name (253) and ``:65535``."""

_QUEUE = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_QUEUE_CHARS}}}")  # the model's rule for queues
_PORT = re.compile(r"[1-9][0-9]{0,4}")


def check_due(due_ms: int, now_ms: int, settings: StoreSettings) -> None:
    """Refuse a due time given as a bare number (a timer's own was checked when it was built):
    not integer epoch ms, or past the store's horizon."""
    if isinstance(due_ms, bool) or not isinstance(due_ms, int) or due_ms < 0:
        raise InvalidTimer("due_ms", f"must be non-negative integer epoch ms, got {due_ms!r}")
    if due_ms > now_ms + settings.max_horizon_ms:
        raise beyond_horizon(settings)


def beyond_horizon(
    settings: StoreSettings, argument: str = "due_ms", subject: str | None = None
) -> InvalidTimer:
    """The error of a due time past the store's horizon, naming it `argument` (and, when the
    time is not the argument's own, `subject`, what it places)."""
    message = f"is more than {settings.max_horizon_ms} ms ahead (the store's horizon)"
    return InvalidTimer(argument, message if subject is None else f"{subject} {message}")


def check_claim(limit: int, lease_ms: int, settings: StoreSettings) -> None:
    if not 1 <= limit <= settings.max_claim:
        raise InvalidArgument("limit", f"must be from 1 to {settings.max_claim}, got {limit!r}")
    if lease_ms < 1:
        raise InvalidArgument("lease_ms", f"must be positive, got {lease_ms!r}")


def check_list(limit: int) -> None:
    if not 1 <= limit <= MAX_LIST:
        raise InvalidArgument("limit", f"must be from 1 to {MAX_LIST}, got {limit!r}")


def check_due_queues(horizon_ms: int, limit: int, since_ms: int | None = None) -> None:
    if isinstance(horizon_ms, bool) or not isinstance(horizon_ms, int):
        raise InvalidArgument("horizon_ms", f"must be integer epoch ms, got {horizon_ms!r}")
    if since_ms is not None and (isinstance(since_ms, bool) or not isinstance(since_ms, int)):
        raise InvalidArgument("since_ms", f"must be integer epoch ms or None, got {since_ms!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_DUE_QUEUES:
        raise InvalidArgument("limit", f"must be from 1 to {MAX_DUE_QUEUES}, got {limit!r}")


def check_lease(lease_ms: int) -> None:
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, int) or lease_ms < 1:
        raise InvalidArgument("lease_ms", f"must be a positive integer, got {lease_ms!r}")


def check_timeout(timeout_s: float) -> None:
    if (
        isinstance(timeout_s, bool)
        or not isinstance(timeout_s, int | float)
        or not (0 <= timeout_s < math.inf)
    ):
        raise InvalidArgument("timeout_s", f"must be a finite number >= 0, got {timeout_s!r}")


def check_queue(queue: object, argument: str = "queue") -> None:
    """Refuse a name no timer's queue can have (the model's rule)."""
    if not isinstance(queue, str) or not _QUEUE.fullmatch(queue):
        raise InvalidArgument(
            argument,
            f"must be 1-{MAX_QUEUE_CHARS} characters of A-Z a-z 0-9 . _ : -, got {queue!r:.80}",
        )


def check_queue_settings(queue: str, settings: QueueSettings) -> None:
    check_queue(queue)
    if not isinstance(settings, QueueSettings):
        raise InvalidArgument("settings", f"must be QueueSettings, got {settings!r:.80}")


def check_queue_pause(queue: str, paused: bool) -> None:
    """Check `Store.pause_queue`'s arguments."""
    check_queue(queue)
    if not isinstance(paused, bool):
        raise InvalidArgument("paused", f"must be True or False, got {paused!r:.80}")


def check_queue_limit(queue: str, limit: Limit | None) -> None:
    """Check `Store.set_queue_limit`'s arguments."""
    check_queue(queue)
    if limit is not None and not isinstance(limit, Limit):
        raise InvalidArgument("limit", f"must be a Limit or None, got {limit!r:.80}")


def check_queue_defaults(queue: str, defaults: QueueDefaults | None) -> QueueDefaults | None:
    """Check `Store.set_queue_defaults`'s arguments; return the defaults to keep (None for
    none: empty defaults are none)."""
    check_queue(queue)
    if defaults is not None and not isinstance(defaults, QueueDefaults):
        raise InvalidArgument("defaults", f"must be QueueDefaults or None, got {defaults!r:.80}")
    return None if defaults is None or defaults.empty else defaults


def check_purge(queue: str, state: State) -> None:
    """Check `Store.purge`'s arguments: a leased timer is its worker's, a done one expires."""
    check_queue(queue)
    if state not in PURGEABLE:
        raise InvalidArgument(
            "state", f"must be one of {', '.join(PURGEABLE)}, got {str(state)!r:.80}"
        )


def check_list_filters(queue: str | None, due_from_ms: int | None, due_to_ms: int | None) -> None:
    """Check `Store.list`'s filters: a queue name, due bounds in epoch ms."""
    if queue is not None:
        check_queue(queue)
    for argument, value in (("due_from_ms", due_from_ms), ("due_to_ms", due_to_ms)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DUE_MS
        ):
            raise InvalidArgument(argument, f"must be epoch ms from 0 to {MAX_DUE_MS}")


def check_host(host: object) -> None:
    """Refuse a limit's host unless written as a callback URL's host is compared: lower case,
    IDNA for other scripts, no trailing dot, an IPv6 address compressed in brackets, and
    ``:port`` (1-65535, no leading zero) when the port is not the scheme's default."""
    if not isinstance(host, str) or not 0 < len(host) <= MAX_LIMIT_HOST_CHARS:
        raise InvalidArgument(
            "host", f"must be 1-{MAX_LIMIT_HOST_CHARS} characters, got {host!r:.80}"
        )
    if not host.isascii() or any(not char.isprintable() or char.isspace() for char in host):
        raise InvalidArgument(
            "host", f"must be ASCII without spaces (IDNA for other scripts), got {host!r:.80}"
        )
    name, port = host, None
    if host.startswith("["):
        address, bracket, rest = host[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise InvalidArgument("host", f"an IPv6 host is [address] or [address]:port: {host!r}")
        name, port = f"[{address}]", rest[1:] if rest else None
        try:
            canonical = ipaddress.IPv6Address(address).compressed
        except ValueError:
            raise InvalidArgument("host", f"not an IPv6 address: {address!r:.80}") from None
        if canonical != address:
            raise InvalidArgument("host", f"write the address as [{canonical}]")
    else:
        if host.count(":") == 1:
            name, port = host.split(":")
        if any(char in name for char in "/?#@\\[]:%"):
            raise InvalidArgument(
                "host", f"must be a host and an optional :port, no path or userinfo: {host!r:.80}"
            )
        try:
            canonical = parse_url(f"http://{name}/").host_header
        except InvalidUrl as error:
            message = str(error).removeprefix(f"{error.argument}: ")
            raise InvalidArgument("host", message) from None
        if canonical != name:
            raise InvalidArgument("host", f"write the host as {canonical!r:.80}")
    if port is not None and (not _PORT.fullmatch(port) or int(port) > 65535):
        raise InvalidArgument("host", f"port must be 1-65535, got {port!r:.20}")
