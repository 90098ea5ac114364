"""Model-based test: `TimingWheel` driven against a plain dict-and-sort oracle.

The oracle holds ``key -> (due_ms, insertion, value)``. An advance to ``now_ms`` must return
exactly the entries whose due tick ``ceil(due_ms / tick_ms)`` is at or before
``max(now_ms, every earlier now_ms) // tick_ms``, sorted by ``(due_ms, insertion)``; that single
comparison covers "never early", "never lost", "never twice" and the order, and each is also
checked on its own so a failure names which one broke.

Cancelled entries stay in their buckets (or in the queue of `add`) as tombstones; the machine
also checks the wheel's inside after every step (every bucket or queued entry is pending or a
tombstone, no key twice, no tombstone outliving its bucket or the queue), churns keys it
never reuses to pile tombstones up, and runs wheels whose sweep allowance is 0 or 3 so that
sweeps happen within a few steps, one of them sweeping two entries per add so that a sweep
spans many steps while the wheel changes.

The same wheel also holds filed entries (`WheelEntry`, their own key and value), filed,
discarded and moved among the keyed ones; a discarded one is a tombstone until its bucket goes.
"""

from __future__ import annotations

from dataclasses import dataclass

from budget import examples
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tickwheel.core.wheel import TimingWheel, WheelEntry

YEAR_MS = 365 * 24 * 3600 * 1000
# single-entry rules use a small pool so keys get replaced; batches reach a little further
KEY_POOL = 12
BATCH_POOL = 40
KEYS = st.integers(0, KEY_POOL - 1)
# churned keys are never reused, so their tombstones stay until a bucket or a sweep drops them
CHURN_BASE = 1_000
BOUNDARIES = (64, 4096, 64**3, 64**4, 64**5)
STEPS = st.one_of(
    st.sampled_from([0, 1, 2, 63, 64, 65, 4095, 4096, 4097, 64**3 - 1, 64**3, 64**3 + 1]),
    st.integers(0, 10_000),
    st.integers(0, 3 * YEAR_MS),
)
STARTS = st.one_of(
    st.sampled_from([0, 1, 63, 64, 4095, 4096, 64**3 - 1, 64**4 + 5]),
    st.integers(0, 10 * YEAR_MS),
)


class Filed(WheelEntry):
    """A filed entry, named for failure messages."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        super().__init__(0)
        self.name = name

    def __repr__(self) -> str:
        return f"<Filed {self.name}>"


Key = int | Filed


class EagerSweepWheel(TimingWheel[Key, object]):
    """Sweeps as soon as tombstones outnumber pending entries."""

    SPARE_TOMBSTONES = 0


class SmallSpareWheel(TimingWheel[Key, object]):
    """Sweeps once tombstones outnumber pending entries by more than 3, two entries per add."""

    SPARE_TOMBSTONES = 3
    SWEEP_SLICE = 2


WHEELS: dict[str, type[TimingWheel[Key, object]]] = {
    "default": TimingWheel,
    "eager": EagerSweepWheel,
    "small": SmallSpareWheel,
}


@dataclass(frozen=True)
class Due:
    """A due time described relative to the model's time; resolved when the rule runs."""

    kind: str
    amount: int
    k: int = 1
    delta: int = 0
    per_tick: bool = False

    def resolve(self, now: int, tick_ms: int) -> int:
        if self.kind == "past":
            return max(0, now - self.amount)
        if self.kind == "ahead":
            return now + self.amount
        # "boundary": near the k-th multiple of a span after now (span in ms or in ticks)
        span = self.amount * (tick_ms if self.per_tick else 1)
        return max(0, (now // span + self.k) * span + self.delta)


DUES = st.one_of(
    st.builds(
        Due,
        kind=st.just("past"),
        amount=st.one_of(st.sampled_from([1, 63, 64, 4096]), st.integers(1, 10**7)),
    ),
    st.builds(Due, kind=st.just("ahead"), amount=st.sampled_from([0, 1, 2, 6, 7, 9, 10, 11])),
    st.builds(Due, kind=st.just("ahead"), amount=st.integers(0, 300)),
    st.builds(Due, kind=st.just("ahead"), amount=st.integers(0, 10**11)),
    st.builds(
        Due,
        kind=st.just("boundary"),
        amount=st.sampled_from(BOUNDARIES),
        k=st.integers(0, 3),
        delta=st.integers(-1, 1),
        per_tick=st.booleans(),
    ),
)


class WheelModel(RuleBasedStateMachine):
    """One wheel, with a tick of 1, 7 or 10 ms, against the oracle."""

    def __init__(self) -> None:
        super().__init__()
        self.tick = 1
        self.now = 0
        self.wheel: TimingWheel[Key, object] = TimingWheel()
        self.pending: dict[Key, tuple[int, int, object]] = {}
        self.seq = 0
        self.fired: set[object] = set()
        # every entry ever filed, pending or not
        self.filed: list[Filed] = []
        self.churned = CHURN_BASE
        self.peak = 0

    @initialize(
        tick_ms=st.sampled_from([1, 7, 10]), start=STARTS, kind=st.sampled_from(sorted(WHEELS))
    )
    def start(self, tick_ms: int, start: int, kind: str) -> None:
        self.tick = tick_ms
        self.now = start
        self.wheel = WHEELS[kind](start, self.tick)

    # -- oracle helpers --------------------------------------------------------------------

    def fire_tick(self, due_ms: int) -> int:
        return -(-due_ms // self.tick)

    def do_add(self, key: int, due_ms: int) -> None:
        self.seq += 1
        value = f"v{self.seq}"
        self.wheel.add(key, due_ms, value)
        self.pending[key] = (due_ms, self.seq, value)
        self.peak = max(self.peak, len(self.pending))
        self.check_tombstones_bounded()

    def check_tombstones_bounded(self) -> None:
        # the bound the sweep keeps: a sweep starts past the allowance beyond the pending
        # entries, and ends within entries / SWEEP_SLICE adds
        dead = len(self.tombstones()) + self.wheel._filed_dead
        assert dead <= 2 * (self.peak + self.wheel.SPARE_TOMBSTONES) + 1

    def do_file(self, entry: Filed, due_ms: int) -> None:
        self.seq += 1
        self.wheel.file(entry, due_ms)
        assert entry.due_ms == due_ms
        self.pending[entry] = (due_ms, self.seq, entry)
        self.peak = max(self.peak, len(self.pending))
        self.check_tombstones_bounded()

    def tombstones(self) -> dict[Key, int]:
        """The wheel's cancelled keys still in a bucket, with their due times."""
        return {key: ~due_ms for key, due_ms in self.wheel._due.items() if due_ms < 0}

    def int_keys(self) -> list[int]:
        return sorted(key for key in self.pending if isinstance(key, int))

    def do_advance(self, now_ms: int) -> list[tuple[Key, object]]:
        self.now = max(self.now, now_ms)
        now_tick = self.now // self.tick
        got = self.wheel.advance(now_ms)
        expected = sorted(
            (due, seq, key, value)
            for key, (due, seq, value) in self.pending.items()
            if self.fire_tick(due) <= now_tick
        )
        got_keys = [key for key, _ in got]
        # never twice: within this advance and across advances
        assert len(set(got_keys)) == len(got_keys), f"key returned twice in one advance: {got}"
        for key, value in got:
            assert value not in self.fired, f"{key}={value} returned a second time"
            # never early
            assert key in self.pending, f"{key}={value} returned but not pending"
            due = self.pending[key][0]
            assert self.fire_tick(due) <= now_tick, f"{key} due {due} fired early at {now_ms}"
            assert due <= self.now, f"{key} due {due} fired before its due time ({self.now})"
        # never lost
        missing = {key for _, _, key, _ in expected} - set(got_keys)
        assert not missing, f"due entries not returned by advance({now_ms}): {missing}"
        # order (and values)
        assert got == [(key, value) for _, _, key, value in expected]
        for key, value in got:
            del self.pending[key]
            self.fired.add(value)
        # lateness: whatever is still pending is less than a tick overdue
        for key, (due, _, _) in self.pending.items():
            assert due + self.tick - 1 > self.now, f"{key} due {due} still pending at {self.now}"
        return got

    # -- rules -----------------------------------------------------------------------------

    @rule(key=KEYS, due=DUES)
    def add(self, key: int, due: Due) -> None:
        self.do_add(key, due.resolve(self.now, self.tick))

    @rule(entries=st.lists(st.tuples(st.integers(0, BATCH_POOL - 1), DUES), min_size=1, max_size=6))
    def add_batch(self, entries: list[tuple[int, Due]]) -> None:
        for key, due in entries:
            self.do_add(key, due.resolve(self.now, self.tick))

    @rule(index=st.integers(0, BATCH_POOL), due=DUES)
    def readd_pending(self, index: int, due: Due) -> None:
        """The wheel's reschedule: add again under a key that is pending."""
        keys = self.int_keys()
        if keys:
            key = keys[index % len(keys)]
            self.do_add(key, due.resolve(self.now, self.tick))

    @rule(key=st.integers(0, BATCH_POOL - 1))
    def cancel(self, key: int) -> None:
        assert self.wheel.cancel(key) == (key in self.pending)
        self.pending.pop(key, None)
        assert self.wheel.cancel(key) is False

    @rule(index=st.integers(0, BATCH_POOL), due=DUES, again=DUES)
    def cancel_then_readd(self, index: int, due: Due, again: Due) -> None:
        """A key cancelled and added back: its tombstone must not fire, nor shadow the new entry."""
        key = index % BATCH_POOL
        self.do_add(key, due.resolve(self.now, self.tick))
        assert self.wheel.cancel(key) is True
        del self.pending[key]
        self.do_add(key, again.resolve(self.now, self.tick))

    @rule(dues=st.lists(DUES, min_size=1, max_size=12), keep=st.integers(0, 3))
    def churn(self, dues: list[Due], keep: int) -> None:
        """Add fresh keys and cancel all but `keep` of them: tombstones pile up, sweeps run."""
        keys = []
        for due in dues:
            self.churned += 1
            keys.append(self.churned)
            self.do_add(self.churned, due.resolve(self.now, self.tick))
        for key in keys[keep:]:
            assert self.wheel.cancel(key) is True
            del self.pending[key]

    @rule(due=DUES)
    def file(self, due: Due) -> None:
        entry = Filed(f"f{len(self.filed)}")
        self.filed.append(entry)
        self.do_file(entry, due.resolve(self.now, self.tick))

    @rule(index=st.integers(0, 1000))
    def discard(self, index: int) -> None:
        """Discard a filed entry: pending, already fired or already discarded."""
        if self.filed:
            entry = self.filed[index % len(self.filed)]
            assert self.wheel.discard(entry) == (entry in self.pending)
            self.pending.pop(entry, None)
            assert self.wheel.discard(entry) is False

    @rule(index=st.integers(0, 1000), due=DUES)
    def move(self, index: int, due: Due) -> None:
        """Move a filed entry: it is due anew, as if filed now; a fired or discarded one stays."""
        if self.filed:
            entry = self.filed[index % len(self.filed)]
            due_ms = due.resolve(self.now, self.tick)
            was_pending = entry in self.pending
            assert self.wheel.move(entry, due_ms) == was_pending
            if was_pending:
                self.seq += 1
                self.pending[entry] = (due_ms, self.seq, entry)

    @rule(dues=st.lists(DUES, min_size=1, max_size=12), keep=st.integers(0, 3))
    def churn_filed(self, dues: list[Due], keep: int) -> None:
        """File fresh entries and discard all but `keep`: filed tombstones pile up and sweep."""
        entries = [Filed(f"c{len(self.filed) + i}") for i in range(len(dues))]
        for entry, due in zip(entries, dues, strict=True):
            self.do_file(entry, due.resolve(self.now, self.tick))
        for entry in entries[keep:]:
            assert self.wheel.discard(entry) is True
            del self.pending[entry]

    @rule(step=STEPS)
    def advance(self, step: int) -> None:
        self.do_advance(self.now + step)

    @rule(back=st.integers(1, 10**6))
    def advance_backwards(self, back: int) -> None:
        """An earlier now_ms keeps time where it is and returns only what is overdue."""
        self.do_advance(max(0, self.now - back))

    @rule(index=st.integers(0, BATCH_POOL), delta=st.sampled_from([-1, 0, 1, "tick-1"]))
    def advance_to_pending_due(self, index: int, delta: int | str) -> None:
        if self.pending:
            key = sorted(self.pending, key=lambda k: self.pending[k][1])[index % len(self.pending)]
            offset = self.tick - 1 if delta == "tick-1" else delta
            assert isinstance(offset, int)
            self.do_advance(max(0, self.pending[key][0] + offset))

    @rule()
    def advance_to_next_due(self) -> None:
        """A driver that sleeps until next_due_ms always makes progress."""
        before = self.wheel.next_due_ms()
        if before is None:
            return
        got = self.do_advance(before)
        after = self.wheel.next_due_ms()
        assert got or after is None or after > before, (before, after)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def lookups_match(self) -> None:
        wheel = self.wheel
        assert len(wheel) == len(self.pending)
        assert wheel.now_ms == self.now // self.tick * self.tick
        for key in range(BATCH_POOL):
            entry = self.pending.get(key)
            assert (key in wheel) == (entry is not None)
            assert wheel.due_ms(key) == (None if entry is None else entry[0])
            assert wheel.get(key) == (None if entry is None else entry[2])

    @invariant()
    def buckets_hold_pending_entries_and_tombstones(self) -> None:
        wheel = self.wheel
        seen: list[Key] = []
        for bucket in wheel._buckets:
            seen.extend(bucket)
        # keys `add` queued are in no bucket yet
        seen.extend(wheel._queued_keys)
        assert len(wheel._queued_keys) == len(wheel._queued_values)
        assert len(seen) == len(set(seen)), "a key in two buckets"
        overdue = set(wheel._overdue)
        tombstones = self.tombstones()
        dead = set(tombstones)
        assert wheel._live == sum(isinstance(key, int) for key in self.pending)
        assert not dead & set(self.pending), "a pending key is also a tombstone"
        assert not dead & overdue, "an overdue entry left as a tombstone"
        # a discarded filed entry stays in its bucket (or the queue) until reclaimed; an overdue
        # one goes at once
        filed_dead = {key for key in seen if isinstance(key, Filed) and key not in self.pending}
        assert all(key in self.pending for key in overdue if isinstance(key, Filed))
        assert wheel._filed_dead == len(filed_dead)
        assert wheel._filed == sum(isinstance(key, Filed) for key in self.pending)
        assert not set(seen) & overdue, "an entry both in a bucket and overdue"
        assert set(seen) | overdue == set(self.pending) | dead | filed_dead
        queued = set(wheel._queued_keys)
        for key in dead - queued:
            # a tombstone is reclaimed by the advance that passes its due tick (a queued one by
            # the next advance, which files the queue first)
            assert self.fire_tick(tombstones[key]) > self.now // self.tick
        for entry in filed_dead - queued:
            assert self.fire_tick(entry.due_ms) > self.now // self.tick
        for entry in self.filed:
            assert (entry._wheel is not None) == (entry in self.pending)

    @invariant()
    def next_due_bounds_the_earliest(self) -> None:
        next_due = self.wheel.next_due_ms()
        if not self.pending:
            assert next_due is None
            return
        assert next_due is not None
        earliest_tick = min(self.fire_tick(due) for due, _, _ in self.pending.values())
        if earliest_tick <= self.now // self.tick:
            # something is overdue: next_due_ms says "now" (or earlier)
            assert next_due <= self.wheel.now_ms
            return
        # nothing overdue: strictly in the future, and no later than the earliest due tick
        assert next_due > self.now
        assert next_due <= earliest_tick * self.tick
        if self.tick == 1:
            assert next_due <= min(due for due, _, _ in self.pending.values())


WheelModel.TestCase.settings = settings(
    max_examples=examples(full=250, ci=50), stateful_step_count=50, deadline=None
)
TestWheelModel = WheelModel.TestCase
