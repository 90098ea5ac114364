"""The attempt history of a `MemoryStore`: a bounded deque per timer, which goes with it."""

from __future__ import annotations

from collections import deque

from tickwheel.stores.attempt_record import Attempt, kept_attempts
from tickwheel.stores.memory.heaps import MemoryHeaps


class MemoryAttemptHistory(MemoryHeaps):
    """Records and reads attempts; the settle calls record in the same step as they settle."""

    def _record(self, timer_id: str, attempt: Attempt | None) -> None:
        most = self.settings.attempt_history
        if attempt is None or most == 0:
            return
        kept = self._attempts.get(timer_id)
        if kept is None:
            kept = self._attempts[timer_id] = deque(maxlen=most)
        kept.appendleft(attempt)

    async def attempts(self, timer_id: str) -> list[Attempt]:
        self._open()
        now = self._clock()
        settings = self.settings
        return kept_attempts(
            self._attempts.get(timer_id, ()),
            self._live(timer_id, now),
            now,
            settings.attempt_retention_ms,
            settings.attempt_history,
        )
