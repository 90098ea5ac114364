"""`Held`: a claimed timer in its holder's hands, from the claim until it is settled or handed back.

The dispatcher hands its owner (a worker or a consumer) one `Held` per timer on its due ms.
Renewals replace its lease; the owner renews, settles and releases it through it, so nothing
looks a lease up by timer id. `Holding` keeps one dispatcher's, by timer id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from typing import Any

from tickwheel.engine.claim_room import ClaimRoom
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settle import Settler
from tickwheel.model import Timer
from tickwheel.stores import Lease, Store
from tickwheel.stores.attempt_record import Attempt

SEND_MARGIN_MS = 100
"""A request goes out only while the lease lasts this much longer: what the store's clock may
be ahead of this process's view of it, and the time to write the request."""

Settling = Coroutine[Any, Any, None]


class Held:
    """One held timer: its current `lease`, and whether its dispatcher still holds it (`active`:
    False once released, lost to another claim, or claimed again by this dispatcher).

    Settling acts on the current lease and leaves the timer held: the owner releases it
    (`release`) once it is settled, or before settling in the background, or has the settler
    release it once its ack lands (`ack_release`).
    """

    __slots__ = ("_holding", "active", "lease")

    def __init__(self, lease: Lease, holding: Holding) -> None:
        self.lease = lease
        self.active = True
        self._holding = holding

    @property
    def timer(self) -> Timer:
        return self.lease.timer

    def lapsed(self) -> bool:
        """Whether its dispatcher no longer holds it: `active` read anew, for an owner that
        checks again after a wait (a type checker keeps what an attribute was before it)."""
        return not self.active

    def sendable(self) -> bool:
        """Whether a request may go out now: the timer is held and its lease lasts
        `SEND_MARGIN_MS` more by the store's clock (a process stopped past its lease finds
        the clock moved on when it runs again)."""
        return self.active and self.lease.deadline_ms - self._holding.now_ms() > SEND_MARGIN_MS

    async def renew(self) -> Lease:
        """Push the lease's deadline `lease_ms` from now and keep the renewed lease.

        Raises:
            LeaseLost: the lease lapsed and the timer went to another claim.
            StoreUnavailable: the store did not answer; the lease stands as it was.
        """
        return await self._holding.renew(self)

    def release(self) -> None:
        """No longer hold the timer (settled, handed back or given up): its lease is neither
        renewed nor handed back after, and its room is free for another claim."""
        if self.active:
            self._holding.release(self)

    def ack(self, attempt: Attempt | None = None) -> asyncio.Future[bool]:
        """Queue an ack recording `attempt` (`Settler.ack`); the future says if it landed."""
        return self._holding.settler.ack(self.lease, attempt)

    def ack_release(self, attempt: Attempt | None = None) -> None:
        """Queue an ack recording `attempt`, and `release` the timer once the ack has landed
        or not (`Settler.ack_then`): its owner is done with it and need not wait."""
        self._holding.settler.ack_then(self.lease, attempt, self.release)

    def ack_later(self) -> None:
        """Queue an ack nobody waits for (`Settler.ack_later`)."""
        self._holding.settler.ack_later(self.lease)

    def fail(
        self, error: str, retry_after_s: float | None = None, attempt: Attempt | None = None
    ) -> Settling:
        """Retry after the timer's backoff, or dead-letter it (`Settler.fail`)."""
        return self._holding.settler.fail(self.lease, error, retry_after_s, attempt)

    def kill(self, error: str, attempt: Attempt | None = None) -> Settling:
        """Dead-letter the timer (`Settler.kill`)."""
        return self._holding.settler.kill(self.lease, error, attempt)

    def retry_at(self, due_ms: int, error: str) -> Settling:
        """Schedule the timer again at `due_ms`, no backoff (`Settler.retry_at`)."""
        return self._holding.settler.retry_at(self.lease, due_ms, error)

    def retry_in(self, delay_s: float, error: str) -> Settling:
        """Schedule the timer again `delay_s` from now (`Settler.retry_in`)."""
        return self._holding.settler.retry_in(self.lease, delay_s, error)

    def defer(self, due_ms: int, reason: str) -> Settling:
        """Hand the timer back unsent, due at `due_ms`, spending no attempt (`Settler.defer`)."""
        return self._holding.settler.defer(self.lease, due_ms, reason)

    def __repr__(self) -> str:
        return f"<Held timer={self.lease.timer.id} token={self.lease.token} active={self.active}>"


class Holding:
    """The timers one dispatcher holds, by id: what its renewals renew, what it hands back when
    it stops, and the count that leaves room for its claims (`ClaimRoom`)."""

    def __init__(
        self, store: Store, lease_ms: int, settler: Settler, metrics: Metrics, room: ClaimRoom
    ) -> None:
        self.held: dict[str, Held] = {}
        self.emptied = asyncio.Event()
        self.settler = settler
        self.now_ms = store.now_ms
        self._store = store
        self._lease_ms = lease_ms
        self._metrics = metrics
        self._room = room

    def hold(self, leases: list[Lease]) -> list[Held]:
        """Hold the claimed `leases`, one `Held` each; a timer claimed again while held (its
        lease lapsed) is held by its new claim only."""
        held, holding = self.held, []
        for lease in leases:
            timer_id = lease.timer.id
            before = held.get(timer_id)
            if before is not None:
                before.active = False
            handle = held[timer_id] = Held(lease, self)
            holding.append(handle)
        self.emptied.clear()
        self._metrics.in_flight = len(held)
        return holding

    def release(self, handle: Held) -> None:
        """Forget `handle`'s timer, freeing room to claim more."""
        handle.active = False
        held = self.held
        del held[handle.lease.timer.id]
        self._metrics.in_flight = len(held)
        self._room.freed(len(held))
        if not held:
            self.emptied.set()

    async def renew(self, handle: Held) -> Lease:
        """Extend `handle`'s lease by `lease_ms` from now; keep the renewed lease while the
        timer is held and was not renewed meanwhile."""
        lease = handle.lease
        renewed = await self._store.extend(lease, self._lease_ms)
        if handle.active and handle.lease is lease:
            handle.lease = renewed
        return renewed

    async def renew_many(self, handles: Sequence[Held]) -> list[Lease | None]:
        """`renew` many at once (`Store.extend_many`): the renewed lease of each, or None for
        one whose lease passed on to another claim."""
        leases = [handle.lease for handle in handles]
        renewed = await self._store.extend_many(leases, self._lease_ms)
        for handle, lease, new in zip(handles, leases, renewed, strict=True):
            if new is not None and handle.active and handle.lease is lease:
                handle.lease = new
        return renewed
