"""Model-based test: `DelayHeap` driven against a plain dict-and-sort oracle.

The oracle holds ``key -> (due_ms, insertion, value)``; `push` and `reschedule` both take a fresh
insertion number. ``pop_due(now_ms, limit)`` must return the first ``limit`` entries with
``due_ms <= now_ms`` in ``(due_ms, insertion)`` order, and nothing else; ``pop_one`` the first.

Cancelled and replaced entries stay in the heap, dead, until they surface or a rebuild drops
them: the machine churns fresh keys to pile them up, on heaps that rebuild after 0, 3 or the
default number of spare dead entries, and checks after every step that the top is pending and
the dead are counted and bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

from budget import examples
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tickwheel.core.heap import DelayHeap

YEAR_MS = 365 * 24 * 3600 * 1000
KEY_POOL = 12
BATCH_POOL = 40
KEYS = st.integers(0, KEY_POOL - 1)
BOUNDARIES = (64, 4096, 64**3, 64**4, 64**5)
STEPS = st.one_of(
    st.sampled_from([0, 1, 2, 63, 64, 65, 4095, 4096, 4097, 64**3 - 1, 64**3, 64**3 + 1]),
    st.integers(0, 10_000),
    st.integers(0, 3 * YEAR_MS),
)
LIMITS = st.sampled_from([None, None, 0, 1, 2, 5])
CHURN_BASE = 1_000


class EagerHeap(DelayHeap[int, str]):
    """Rebuilds as soon as dead entries outnumber pending ones."""

    SPARE_DEAD = 0


class SmallSpareHeap(DelayHeap[int, str]):
    """Rebuilds once dead entries outnumber pending ones by more than 3."""

    SPARE_DEAD = 3


HEAPS: dict[str, type[DelayHeap[int, str]]] = {
    "default": DelayHeap,
    "eager": EagerHeap,
    "small": SmallSpareHeap,
}


@dataclass(frozen=True)
class Due:
    """A due time described relative to the model's time; resolved when the rule runs."""

    kind: str
    amount: int
    k: int = 1
    delta: int = 0

    def resolve(self, now: int) -> int:
        if self.kind == "past":
            return max(0, now - self.amount)
        if self.kind == "ahead":
            return now + self.amount
        # "boundary": near the k-th multiple of a span after now
        return max(0, (now // self.amount + self.k) * self.amount + self.delta)


DUES = st.one_of(
    st.builds(
        Due,
        kind=st.just("past"),
        amount=st.one_of(st.sampled_from([1, 63, 64, 4096]), st.integers(1, 10**7)),
    ),
    st.builds(Due, kind=st.just("ahead"), amount=st.sampled_from([0, 1, 2])),
    st.builds(Due, kind=st.just("ahead"), amount=st.integers(0, 300)),
    st.builds(Due, kind=st.just("ahead"), amount=st.integers(0, 10**11)),
    st.builds(
        Due,
        kind=st.just("boundary"),
        amount=st.sampled_from(BOUNDARIES),
        k=st.integers(0, 3),
        delta=st.integers(-1, 1),
    ),
)


class HeapModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.heap: DelayHeap[int, str] = DelayHeap()
        self.pending: dict[int, tuple[int, int, str]] = {}
        self.seq = 0
        self.fired: set[str] = set()
        self.churned = CHURN_BASE
        self.peak = 0

    @initialize(
        start=st.one_of(st.sampled_from([0, 1, 64, 4096]), st.integers(0, 10 * YEAR_MS)),
        kind=st.sampled_from(sorted(HEAPS)),
    )
    def start(self, start: int, kind: str) -> None:
        self.now = start
        self.heap = HEAPS[kind]()

    # -- oracle helpers --------------------------------------------------------------------

    def ordered(self) -> list[tuple[int, int, int, str]]:
        return sorted((due, seq, key, value) for key, (due, seq, value) in self.pending.items())

    def do_push(self, key: int, due_ms: int) -> None:
        self.seq += 1
        value = f"v{self.seq}"
        earliest = self.heap.push(key, due_ms, value)
        self.pending[key] = (due_ms, self.seq, value)
        self.peak = max(self.peak, len(self.pending))
        assert earliest == (self.ordered()[0][2] == key)

    def do_pop(self, now_ms: int, limit: int | None) -> None:
        due_now = [entry for entry in self.ordered() if entry[0] <= now_ms]
        expected = due_now if limit is None else due_now[:limit]
        got = self.heap.pop_due(now_ms, limit)
        got_keys = [key for key, _ in got]
        assert len(set(got_keys)) == len(got_keys), f"key returned twice in one pop: {got}"
        if limit is not None:
            assert len(got) <= limit
        for key, value in got:
            assert value not in self.fired, f"{key}={value} returned a second time"
            assert key in self.pending, f"{key}={value} returned but not pending"
            due = self.pending[key][0]
            assert due <= now_ms, f"{key} due {due} popped early at {now_ms}"
        missing = {key for _, _, key, _ in expected} - set(got_keys)
        assert not missing, f"due entries not returned by pop_due({now_ms}, {limit}): {missing}"
        assert got == [(key, value) for _, _, key, value in expected]
        for key, value in got:
            del self.pending[key]
            self.fired.add(value)
        if limit is None:
            assert all(due > now_ms for due, _, _ in self.pending.values())

    # -- rules -----------------------------------------------------------------------------

    @rule(key=KEYS, due=DUES)
    def push(self, key: int, due: Due) -> None:
        self.do_push(key, due.resolve(self.now))

    @rule(entries=st.lists(st.tuples(st.integers(0, BATCH_POOL - 1), DUES), min_size=1, max_size=6))
    def push_batch(self, entries: list[tuple[int, Due]]) -> None:
        for key, due in entries:
            self.do_push(key, due.resolve(self.now))

    @rule(key=st.integers(0, BATCH_POOL - 1))
    def cancel(self, key: int) -> None:
        assert self.heap.cancel(key) == (key in self.pending)
        self.pending.pop(key, None)
        assert self.heap.cancel(key) is False

    @rule(key=st.integers(0, BATCH_POOL - 1), due=DUES)
    def reschedule_any(self, key: int, due: Due) -> None:
        due_ms = due.resolve(self.now)
        assert self.heap.reschedule(key, due_ms) == (key in self.pending)
        if key in self.pending:
            self.seq += 1
            self.pending[key] = (due_ms, self.seq, self.pending[key][2])

    @rule(index=st.integers(0, BATCH_POOL), due=DUES)
    def reschedule_pending(self, index: int, due: Due) -> None:
        if self.pending:
            key = sorted(self.pending)[index % len(self.pending)]
            self.reschedule_any(key, due)

    @rule(index=st.integers(0, BATCH_POOL))
    def cancel_pending(self, index: int) -> None:
        if self.pending:
            self.cancel(sorted(self.pending)[index % len(self.pending)])

    @rule(dues=st.lists(DUES, min_size=1, max_size=12), keep=st.integers(0, 3))
    def churn(self, dues: list[Due], keep: int) -> None:
        """Push fresh keys and cancel all but `keep` of them: dead entries pile up."""
        keys = []
        for due in dues:
            self.churned += 1
            keys.append(self.churned)
            self.do_push(self.churned, due.resolve(self.now))
        for key in keys[keep:]:
            assert self.heap.cancel(key) is True
            del self.pending[key]

    @rule(step=STEPS)
    def pop_one(self, step: int) -> None:
        self.now += step
        ordered = self.ordered()
        got = self.heap.pop_one(self.now)
        if not ordered or ordered[0][0] > self.now:
            assert got is None
            return
        _, _, key, value = ordered[0]
        assert got == (key, value)
        del self.pending[key]
        self.fired.add(value)

    @rule(step=STEPS, limit=LIMITS)
    def pop_due(self, step: int, limit: int | None) -> None:
        self.now += step
        self.do_pop(self.now, limit)

    @rule(back=st.integers(1, 10**6), limit=LIMITS)
    def pop_due_earlier(self, back: int, limit: int | None) -> None:
        """The heap keeps no time: an earlier now_ms pops only what is due by then."""
        self.do_pop(max(0, self.now - back), limit)

    @rule(index=st.integers(0, BATCH_POOL), delta=st.sampled_from([-1, 0, 1]), limit=LIMITS)
    def pop_at_pending_due(self, index: int, delta: int, limit: int | None) -> None:
        if self.pending:
            key = sorted(self.pending)[index % len(self.pending)]
            self.now = max(self.now, self.pending[key][0] + delta)
            self.do_pop(self.now, limit)

    @rule(limit=LIMITS)
    def pop_at_next_due(self, limit: int | None) -> None:
        next_due = self.heap.next_due_ms()
        if next_due is not None:
            self.now = max(self.now, next_due)
            self.do_pop(next_due, limit)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def dead_entries_counted_and_bounded(self) -> None:
        heap = self.heap
        assert len(heap._heap) == len(self.pending) + heap._dead
        # a cancel rebuilds past the allowance beyond the pending entries, never more
        assert heap._dead <= self.peak + heap.SPARE_DEAD
        if heap._heap:
            assert heap._heap[0][2] in self.pending, "the top of the heap is dead"

    @invariant()
    def matches_oracle(self) -> None:
        heap = self.heap
        assert len(heap) == len(self.pending)
        for key in range(BATCH_POOL):
            entry = self.pending.get(key)
            assert (key in heap) == (entry is not None)
            assert heap.due_ms(key) == (None if entry is None else entry[0])
            assert heap.get(key) == (None if entry is None else entry[2])
        ordered = self.ordered()
        if not ordered:
            assert heap.peek() is None
            assert heap.next_due_ms() is None
        else:
            due, _, key, value = ordered[0]
            assert heap.peek() == (key, value)
            assert heap.next_due_ms() == due


HeapModel.TestCase.settings = settings(
    max_examples=examples(full=250, ci=50), stateful_step_count=50, deadline=None
)
TestHeapModel = HeapModel.TestCase
