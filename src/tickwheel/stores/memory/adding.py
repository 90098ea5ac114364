"""Adding timers to a `MemoryStore`: one, or many in order."""

from __future__ import annotations

from collections.abc import Sequence

from tickwheel.errors import TimerExists
from tickwheel.model import Timer
from tickwheel.stores.memory.heaps import MemoryHeaps
from tickwheel.stores.rebuild import as_scheduled


class MemoryAdding(MemoryHeaps):
    """The add calls of `MemoryStore`."""

    async def _add_one(self, timer: Timer, replace: bool) -> Timer:
        self._open()
        now = self._clock()
        existing = self._live(timer.id, now)
        attempt = deferrals = 0
        if existing is not None:
            if not replace:
                if existing.spec() == timer.spec():
                    return existing
                raise TimerExists(timer.id)
            self._forget(existing)
            # the attempt (the lease token) carries over: a lease on the replaced timer must
            # never match a claim of the new one
            attempt, deferrals = existing.attempt, existing.deferrals
        stored = as_scheduled(timer, now, attempt, deferrals)
        self._schedule(stored)
        return stored

    async def _add_many(self, timers: Sequence[Timer], replace: bool) -> list[Timer]:
        stored = []
        conflicts = []
        for timer in timers:
            try:
                stored.append(await self._add_one(timer, replace))
            except TimerExists as conflict:
                conflicts.append(conflict)
        if conflicts:
            raise conflicts[0]
        return stored
