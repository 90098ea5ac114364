"""Reading and changing one timer of a `MemoryStore` by its id: get, cancel, reschedule, pause,
resume and replay."""

from __future__ import annotations

from tickwheel.model import State, Timer, occurrence_of
from tickwheel.stores.memory.heaps import MemoryHeaps


class MemoryChanging(MemoryHeaps):
    """The calls of `MemoryStore` on one timer by its id."""

    async def get(self, timer_id: str) -> Timer | None:
        self._open()
        return self._live(timer_id, self._clock())

    async def cancel(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state not in (State.SCHEDULED, State.PAUSED):
            return False
        self._forget(timer)
        return True

    async def _reschedule(self, timer_id: str, due_ms: int) -> bool:
        self._open()
        now = self._clock()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state not in (State.SCHEDULED, State.PAUSED):
            return False
        self._timers[timer_id] = timer.evolve(due_ms=due_ms, updated_ms=now, first_claimed_ms=None)
        if timer.state is State.SCHEDULED:  # a paused timer is in no heap until resumed
            self._due[timer.queue].reschedule(timer_id, due_ms)
            self._lower_head(timer.queue, due_ms)
            self._wakeups.notify(timer.queue)
        return True

    async def replay(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state is not State.DEAD:
            return False
        now = self._clock()
        self._schedule(
            timer.evolve(state=State.SCHEDULED, due_ms=now, updated_ms=now, first_claimed_ms=None)
        )
        return True

    async def pause(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state is not State.SCHEDULED or occurrence_of(timer_id):
            return False
        self._due[timer.queue].cancel(timer_id)
        self._timers[timer_id] = timer.evolve(state=State.PAUSED, updated_ms=self._clock())
        return True

    async def resume(self, timer_id: str) -> bool:
        self._open()
        timer = self._timers.get(timer_id)
        if timer is None or timer.state is not State.PAUSED:
            return False
        self._schedule(timer.evolve(state=State.SCHEDULED, updated_ms=self._clock()))
        return True
