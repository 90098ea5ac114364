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
    return Attempt(
        attempt=lease.token - lease.timer.deferrals,
        at_ms=at_ms,
        worker=worker,
        outcome=verdict,
        status=outcome.status,
        error=outcome.error_class,
        latency_ms=round(latency_s * 1000, 3),
        body=outcome.body,
    )
