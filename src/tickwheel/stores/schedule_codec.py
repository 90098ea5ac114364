"""A schedule as the SQLite and Redis stores write it: three lines of compact JSON.

::

    [next_ms, runs, [recent...], created_ms, updated_ms, held_to_ms]
    [cron, every_s, timezone, start_ms, end_ms, max_runs, jitter_s, misfire, queue, paused]
    <the target as `codec.encode_target` writes a timer's spec>

The first line changes each time an occurrence comes up; the rest only when the schedule is
changed, so a codec keeps the schedules it decoded by that text (a `Schedule` parses its cron
expression and checks its target when built).
"""

from __future__ import annotations

import json
from typing import Any

from tickwheel.schedule import Misfire, Schedule, ScheduleState, restore_schedule
from tickwheel.stores.codec import SpecCodec, encode_target

CACHED_SCHEDULES = 4096
"""Decoded definitions a codec keeps; it forgets them all when full."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_schedule(state: ScheduleState) -> str:
    """Encode a schedule and where its series is."""
    head = _dumps(
        [
            state.next_ms,
            state.runs,
            list(state.recent),
            state.created_ms,
            state.updated_ms,
            state.held_to_ms,
        ]
    )
    return f"{head}\n{_definition(state.schedule)}"


# the definition text of schedules encoded or decoded lately, by identity: each occurrence
# writes its schedule back unchanged, and encoding the target anew cost a quarter of a step
_DEFINITIONS: dict[int, tuple[Schedule, str]] = {}


def _definition(schedule: Schedule) -> str:
    kept = _DEFINITIONS.get(id(schedule))
    if kept is not None and kept[0] is schedule:
        return kept[1]
    s = schedule
    rule = [
        s.cron,
        s.every_s,
        s.timezone,
        s.start_ms,
        s.end_ms,
        s.max_runs,
        s.jitter_s,
        s.misfire.value,
        s.queue,
        s.paused,
    ]
    text = f"{_dumps(rule)}\n{encode_target(s.callback, s.payload, s.retry)}"
    _remember(schedule, text)
    return text


def _remember(schedule: Schedule, text: str) -> None:
    if len(_DEFINITIONS) >= CACHED_SCHEDULES:
        _DEFINITIONS.clear()
    _DEFINITIONS[id(schedule)] = (schedule, text)


class ScheduleCodec:
    """Decodes the schedules of one store, keeping the definitions it built."""

    def __init__(self) -> None:
        self._specs = SpecCodec()
        self._schedules: dict[tuple[str, str], Schedule] = {}

    def decode(self, schedule_id: str, text: str | bytes) -> ScheduleState:
        """Return the schedule `encode_schedule` wrote as `text`."""
        if isinstance(text, bytes):
            text = text.decode()
        head, _, definition = text.partition("\n")
        next_ms, runs, recent, created_ms, updated_ms, held_to_ms = json.loads(head)
        key = (schedule_id, definition)
        schedule = self._schedules.get(key)
        if schedule is None:
            schedule = self._build(schedule_id, definition)
            if len(self._schedules) >= CACHED_SCHEDULES:
                self._schedules.clear()
            self._schedules[key] = schedule
            _remember(schedule, definition)
        return ScheduleState(
            schedule=schedule,
            next_ms=next_ms,
            runs=runs,
            recent=tuple(recent),
            created_ms=created_ms,
            updated_ms=updated_ms,
            held_to_ms=held_to_ms,
        )

    def _build(self, schedule_id: str, definition: str) -> Schedule:
        rule, _, spec = definition.partition("\n")
        cron, every_s, timezone, start_ms, end_ms, max_runs, jitter_s, misfire, queue, paused = (
            json.loads(rule)
        )
        callback, payload, retry = self._specs.decode(spec)
        return restore_schedule(
            id=schedule_id,
            cron=cron,
            every_s=every_s,
            timezone=timezone,
            start_ms=start_ms,
            end_ms=end_ms,
            max_runs=max_runs,
            jitter_s=jitter_s,
            misfire=Misfire(misfire),
            queue=queue,
            callback=callback,
            payload=payload,
            retry=retry,
            paused=paused,
        )
