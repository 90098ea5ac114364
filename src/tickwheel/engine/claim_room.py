"""`ClaimRoom`: how much a worker may claim, for which queue, and in which line it waits.

A worker holds at most `concurrency + 2 * batch` timers, so that an overloaded worker leaves
its backlog in the store, in due order and for any worker, instead of holding leases that
lapse while they wait for a slot. Queues are told apart by their last callback: *prompt* (it
was answered), *hung* (it went back unsent because its target hangs) or unknown. A prompt
queue may claim into a reserve as large again, and each kind waits for its claims in a line
of its own, so a flood of unknown or hanging queues stands neither in a prompt queue's room
nor in its line. Hung queues are claimed at `HUNG_CLAIMS_PER_S` at most, each in its turn
(`hung_turn`), so a flood at targets that never answer costs the store and the worker a
bounded number of claims a second, however many queues it spans. Once half the room is taken,
or while unknown queues' claims fill their line (a crowd of new queues), an unknown queue
claims one timer at a time (`probing`) until its callbacks tell which it is, so a flood of
queues new to the worker leaves room for the next new queue, whose callbacks may be answered,
and costs the worker one timer a queue to hold, find hung and send back. A claimed timer
that went back unsent because its target hangs tells it too (`claimed`): what one worker
finds, the others learn from the timers it sent back.

A consumer's room follows its pace (`pace`): the larger of a worker's room and about
`PACE_HOLD_S` of the consumer's own work, up to `max_in_flight`. A consumer serves one queue
for one caller, so what it claims ahead takes no other queue's room, and what it holds beyond
a second of its own work would keep that work from the queue's other consumers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from tickwheel.engine.outcome import sent_back_hanging
from tickwheel.engine.pace import PACE_HOLD_S
from tickwheel.engine.settings import WorkerSettings
from tickwheel.stores import Lease

CLAIMS_AT_ONCE = 16
"""Claims in flight at once for prompt queues, and as many again for unknown ones."""
HUNG_CLAIMS_AT_ONCE = 2
"""Claims in flight at once for hung queues."""
HUNG_CLAIMS_PER_S = 20
"""Claims a second of hung queues at most: a queue alone is claimed when due, a thousand take
turns, each claimed every 50 s (its timers' targets have not answered for seconds)."""
PROBE_CLAIM = 1
"""Timers an unknown queue claims at a time while half the worker's room is taken."""
PROBE_WAIT_S = 2.0
"""How long a probing queue's loop waits for its callbacks' verdict before it claims again: as
long as a worker takes to find a target hung (`Fairness`)."""


class ClaimRoom:
    """The room to claim of one dispatcher holding `held()` timers, and its claim lines."""

    def __init__(self, settings: WorkerSettings) -> None:
        self._most = self._base = min(
            settings.max_in_flight, settings.concurrency + 2 * settings.batch
        )
        self._cap = settings.max_in_flight
        self._reserve_to = min(settings.max_in_flight, 2 * self._most)
        self._least = max(1, min(settings.batch, settings.concurrency) // 4)
        self._prompt: set[str] = set()
        self._hung: set[str] = set()
        self._lines = {
            "prompt": asyncio.Semaphore(CLAIMS_AT_ONCE),
            "unknown": asyncio.Semaphore(CLAIMS_AT_ONCE),
            "hung": asyncio.Semaphore(HUNG_CLAIMS_AT_ONCE),
        }
        # the claim loops waiting for room: prompt queues' (the reserve may free first)
        # and the others'
        self._waiting: dict[str, asyncio.Event] = {}
        self._waiting_prompt: dict[str, asyncio.Event] = {}
        self._next_hung_s = 0.0  # monotonic time of the next hung claim's turn
        self._verdicts: dict[str, asyncio.Event] = {}  # probing queues' loops waiting

    def prompt(self, queue: str) -> bool:
        """Whether `queue`'s last callback was answered."""
        return queue in self._prompt

    def hung(self, queue: str) -> bool:
        """Whether `queue`'s last callback went back unsent because its target hangs."""
        return queue in self._hung

    def note(self, queue: str, *, hangs: bool) -> None:
        """Note that a callback of `queue` went back unsent because its target hangs
        (`hangs`), or was answered."""
        if not hangs and queue in self._prompt and not self._verdicts:
            return  # as it was: most callbacks are answered, queue after queue
        if hangs:
            self._hung.add(queue)
            self._prompt.discard(queue)
        else:
            self._prompt.add(queue)
            self._hung.discard(queue)
        verdict = self._verdicts.pop(queue, None)
        if verdict is not None:
            verdict.set()

    def claimed(self, queue: str, leases: Sequence[Lease]) -> None:
        """Note as hung a queue not known here whose claimed timers went back unsent because
        their targets hang: another worker found it so, and it is claimed in turns at once
        instead of being probed again."""
        if queue in self._prompt or queue in self._hung:
            return
        for lease in leases:
            if sent_back_hanging(lease.timer):
                self.note(queue, hangs=True)
                return

    def probing(self, queue: str, held: int) -> bool:
        """Whether a claim of `queue` takes `PROBE_CLAIM` timers: its callbacks have not yet
        told whether its targets answer, and half the room is taken or a crowd of unknown
        queues fills their line."""
        if queue in self._prompt or queue in self._hung:
            return False
        return held >= self._most // 2 or self._lines["unknown"].locked()

    async def verdict(self, queue: str) -> None:
        """Wait until a callback of `queue` is answered or goes back because its target
        hangs, `PROBE_WAIT_S` at most."""
        event = self._verdicts.get(queue)
        if event is None:
            event = self._verdicts[queue] = asyncio.Event()
        try:
            async with asyncio.timeout(PROBE_WAIT_S):
                await event.wait()
        except TimeoutError:
            pass
        finally:  # out of time, or the loop stopped: no verdict waits for it
            if self._verdicts.get(queue) is event:
                del self._verdicts[queue]

    def hung_turn(self) -> float:
        """Take the next turn for a claim of a hung queue; return its monotonic time."""
        now = time.monotonic()
        turn = self._next_hung_s = max(now, self._next_hung_s + 1 / HUNG_CLAIMS_PER_S)
        return turn

    def line(self, queue: str) -> asyncio.Semaphore:
        """The line a claim of `queue` waits in."""
        if queue in self._prompt:
            return self._lines["prompt"]
        return self._lines["hung" if queue in self._hung else "unknown"]

    def room(self, queue: str, held: int) -> int:
        """How many timers a claim of `queue` may take while the worker holds `held`: the
        worker's room, and for a prompt queue the reserve beyond it; none until a quarter of
        a batch fits, so that a worker behind claims in batches, not a timer per one settled."""
        room = self._most - held
        if room >= self._least:
            return room
        if queue in self._prompt and self._reserve_to - held >= self._least:
            return self._reserve_to - held
        return 0

    async def wait(self, queue: str) -> None:
        """Wait until `freed` finds room for `queue` (cancel to give up)."""
        waiters = self._waiting_prompt if queue in self._prompt else self._waiting
        event = waiters[queue] = asyncio.Event()
        try:
            await event.wait()
        finally:
            waiters.pop(queue, None)

    def pace(self, per_s: float, held: int) -> int:
        """Size a consumer's room by its pace, `per_s` deliveries a second, while it holds
        `held`; wake its claim loop if that makes room. Return the room."""
        self._most = min(self._cap, max(self._base, int(per_s * PACE_HOLD_S)))
        self.freed(held)
        return self._most

    def freed(self, held: int) -> None:
        """Wake the claim loops waiting for room that there is room for, the worker now
        holding `held` timers."""
        if not (self._waiting or self._waiting_prompt):
            return
        if self._most - held >= self._least:
            woken = [*self._waiting.values(), *self._waiting_prompt.values()]
            self._waiting.clear()
            self._waiting_prompt.clear()
        elif self._waiting_prompt and self._reserve_to - held >= self._least:
            woken = list(self._waiting_prompt.values())
            self._waiting_prompt.clear()
        else:
            return
        for event in woken:
            event.set()
