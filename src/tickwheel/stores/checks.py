"""Argument checks every store applies the same way before touching its data."""

from __future__ import annotations

import math

from tickwheel.errors import InvalidArgument, InvalidTimer
from tickwheel.stores.base import StoreSettings

MAX_LIST = 1000


def check_due(due_ms: int, now_ms: int, settings: StoreSettings) -> None:
    if isinstance(due_ms, bool) or not isinstance(due_ms, int) or due_ms < 0:
        raise InvalidTimer("due_ms", f"must be non-negative integer epoch ms, got {due_ms!r}")
    if due_ms > now_ms + settings.max_horizon_ms:
        raise InvalidTimer(
            "due_ms", f"is more than {settings.max_horizon_ms} ms ahead (the store's horizon)"
        )


def check_claim(limit: int, lease_ms: int, settings: StoreSettings) -> None:
    if not 1 <= limit <= settings.max_claim:
        raise InvalidArgument("limit", f"must be from 1 to {settings.max_claim}, got {limit!r}")
    if lease_ms < 1:
        raise InvalidArgument("lease_ms", f"must be positive, got {lease_ms!r}")


def check_list(limit: int) -> None:
    if not 1 <= limit <= MAX_LIST:
        raise InvalidArgument("limit", f"must be from 1 to {MAX_LIST}, got {limit!r}")


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
