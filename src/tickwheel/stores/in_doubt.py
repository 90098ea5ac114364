"""Which settles of a store may have landed without their reply reaching it.

An ack, retry or kill whose call failed (the connection dropped, the server restarted) may have
run. Sent again, it would find the timer done, scheduled or dead already and report `LeaseLost`
for the caller's own settle. A store notes such leases here, and a settle sent again for one
counts "already settled so, with this token" as settled (Redis in its scripts, PostgreSQL by
reading the row back).
"""

from __future__ import annotations

from collections.abc import Iterable

from tickwheel.stores.base import Lease

MAX_IN_DOUBT = 100_000
"""Leases noted at most; past it, those whose leases have lapsed are dropped (nobody retries
a settle then: the timer is handed out again)."""


class InDoubt:
    """Leases whose last settle failed with no answer, until settled again or lapsed."""

    def __init__(self) -> None:
        self._leases: dict[tuple[str, int], int] = {}  # (id, token) -> lease deadline ms

    def note(self, leases: Iterable[Lease], now_ms: int) -> None:
        """Remember `leases`: a settle of theirs failed and may have landed."""
        if len(self._leases) >= MAX_IN_DOUBT:
            self._leases = {key: end for key, end in self._leases.items() if end > now_ms}
        for lease in leases:
            self._leases[lease.timer.id, lease.token] = lease.deadline_ms

    def __bool__(self) -> bool:
        return bool(self._leases)

    def ids(self, leases: Iterable[Lease]) -> str:
        """The ids of `leases` whose settle may have landed before, as Redis's ack.lua takes them
        (space around each), forgetting them."""
        return "".join([f" {lease.timer.id} " for lease in leases if self.take(lease)])

    def take(self, lease: Lease) -> bool:
        """Whether a settle of `lease` may have landed before; forget it either way."""
        return self._leases.pop((lease.timer.id, lease.token), None) is not None
