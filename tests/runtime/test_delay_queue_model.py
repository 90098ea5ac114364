"""Model-based test: `DelayQueue` on a `FakeClock` driven against a plain dict-and-sort oracle.

The oracle holds ``key -> (due_ms, insertion, item)``; `put` and `reschedule` both take a fresh
insertion number. `get_nowait` must return the earliest due item in ``(due_ms, insertion)``
order, and `len` count the items held. Keyless puts return keys the queue indexes only once one
of them is looked up; the machine mixes them with keys of its own, and cancels, reschedules and
replaces by either kind, held or already handed out, before and after the index is built and
after the queue runs empty (which lets the queue stop indexing keyless entries).
"""

from __future__ import annotations

import queue
from collections.abc import Hashable

from budget import examples
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tickwheel.runtime import DelayQueue, FakeClock

OWN_KEYS: list[Hashable] = ["a", "b", "c", ("t", 1), 7]
# None for "due now"; otherwise whole ms, which due_after turns into exactly that many ms
DELAYS_MS = st.one_of(st.none(), st.sampled_from([0, 1, 2]), st.integers(0, 5000))
STEPS_MS = st.one_of(st.sampled_from([0, 1, 2]), st.integers(0, 6000))


class QueueModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.q: DelayQueue[str] = DelayQueue(clock=self.clock)
        self.held: dict[Hashable, tuple[int, int, str]] = {}
        self.returned: list[Hashable] = []  # every key a keyless put returned, held or not
        self.seq = 0

    def due_ms(self, delay_ms: int | None) -> int:
        return self.clock.now_ms() + (delay_ms or 0)

    def ordered(self) -> list[tuple[int, int, str]]:
        return sorted(self.held.values())

    def pick(self, index: int) -> Hashable:
        keys = [*self.returned, *OWN_KEYS]
        return keys[index % len(keys)]

    def hold(self, key: Hashable, due_ms: int, item: str) -> None:
        self.seq += 1
        self.held[key] = (due_ms, self.seq, item)

    @rule(delay_ms=DELAYS_MS)
    def put_keyless(self, delay_ms: int | None) -> None:
        item = f"i{self.seq + 1}"
        delay = None if delay_ms is None else delay_ms / 1000
        key = self.q.put(item, delay)
        assert key not in self.held
        assert key not in self.returned
        self.returned.append(key)
        self.hold(key, self.due_ms(delay_ms), item)

    @rule(key=st.sampled_from(OWN_KEYS), delay_ms=DELAYS_MS)
    def put_keyed(self, key: Hashable, delay_ms: int | None) -> None:
        item = f"i{self.seq + 1}"
        delay = None if delay_ms is None else delay_ms / 1000
        assert self.q.put(item, delay, key=key) == key
        self.hold(key, self.due_ms(delay_ms), item)

    @precondition(lambda self: self.returned)
    @rule(index=st.integers(0, 1000), delay_ms=DELAYS_MS)
    def replace_by_returned_key(self, index: int, delay_ms: int | None) -> None:
        key = self.returned[index % len(self.returned)]
        self.put_keyed(key, delay_ms)

    @rule(index=st.integers(0, 1000))
    def cancel(self, index: int) -> None:
        key = self.pick(index)
        assert self.q.cancel(key) == (key in self.held)
        self.held.pop(key, None)
        assert self.q.cancel(key) is False

    @rule(index=st.integers(0, 1000), delay_ms=st.integers(1, 5000))
    def reschedule(self, index: int, delay_ms: int) -> None:
        key = self.pick(index)
        assert self.q.reschedule(key, delay_ms / 1000) == (key in self.held)
        if key in self.held:
            self.hold(key, self.due_ms(delay_ms), self.held[key][2])

    @rule(step_ms=STEPS_MS)
    def get_nowait(self, step_ms: int) -> None:
        self.clock.advance_ms(step_ms)
        due = [entry for entry in self.ordered() if entry[0] <= self.clock.now_ms()]
        if not due:
            try:
                got = self.q.get_nowait()
            except queue.Empty:
                return
            raise AssertionError(f"{got!r} handed out, but nothing is due")
        assert self.q.get_nowait() == due[0][2]
        key = next(key for key, entry in self.held.items() if entry == due[0])
        del self.held[key]

    @rule()
    def drain(self) -> None:
        self.clock.advance_ms(6000)
        while self.held:
            self.get_nowait(0)

    @invariant()
    def counts_the_held_items(self) -> None:
        assert len(self.q) == len(self.held)

    def teardown(self) -> None:
        assert self.q.close() == [item for _, _, item in self.ordered()]


QueueModel.TestCase.settings = settings(
    max_examples=examples(full=250, ci=50), stateful_step_count=50, deadline=None
)
TestDelayQueueModel = QueueModel.TestCase
