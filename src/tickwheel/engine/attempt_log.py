"""What a worker records of each callback attempt in its timer's history (`Attempt`), and
whether its store keeps one."""

from __future__ import annotations

import os
import socket

from tickwheel.engine.outcome import Outcome, Verdict
from tickwheel.stores import Lease, Store
from tickwheel.stores.attempt_record import Attempt

# what the store did with the timer, by verdict; a retry the policy gives up on becomes "dead"
# (`Settler.fail`), and a deferral was no attempt
_OUTCOMES = {Verdict.ACK: "ack", Verdict.RETRY: "retry", Verdict.KILL: "dead"}
_new_tuple = tuple.__new__


def worker_name() -> str:
    """How an attempt names the worker that made it: ``<host name>:<process id>``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def records_attempts(store: Store) -> bool:
    """Whether `store` keeps attempt histories (its `StoreSettings.attempt_history` is not 0)."""
    return store.settings.attempt_history > 0


def attempt_of(
    lease: Lease, outcome: Outcome, at_ms: int, latency_s: float, worker: str
) -> Attempt | None:
    """The record of the attempt that `outcome` ends, sent at `at_ms`; None for a deferral,
    which sent nothing."""
    verdict = _OUTCOMES.get(outcome.verdict)
    if verdict is None:
        return None
    # the tuple built directly, every field in order: half the cost of the named tuple's
    # keyword constructor, once per callback
    return _new_tuple(
        Attempt,
        (
            lease.token - lease.timer.deferrals,  # attempt
            at_ms,
            worker,
            verdict,  # outcome
            outcome.status,
            outcome.error_class,  # error
            round(latency_s * 1_000_000) / 1000,  # latency_ms, to the µs (a third of round(x, 3))
            outcome.body,
            None,  # next_due_ms: the settler's to fill in
        ),
    )
