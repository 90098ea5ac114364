"""The bodies of ``GET /v1/timers/{id}/attempts``: a timer's attempt history, newest first."""

from __future__ import annotations

from pydantic import BaseModel, Field

from tickwheel.service.schemas import format_ms
from tickwheel.stores.attempt_record import Attempt


class AttemptOut(BaseModel):
    """One attempt at a timer's callback; times as RFC 3339 UTC and as epoch milliseconds."""

    attempt: int = Field(description="the attempt's number, as its Tickwheel-Attempt header")
    at: str = Field(description="when it was sent")
    at_ms: int
    worker: str = Field(description="the worker that sent it: host name and process id")
    outcome: str = Field(description="what came of it: ack, retry or dead")
    status: int | None = Field(description="the HTTP status answered, if any")
    error: str | None = Field(
        description="the kind of failure when no status came: timeout, connect, dns, tls, ..."
    )
    latency_ms: float = Field(description="how long the call took")
    body: str | None = Field(
        description="the first KiB of the response body, control characters replaced"
    )
    next_due: str | None = Field(description="when the retry it led to is due")
    next_due_ms: int | None

    @classmethod
    def of(cls, attempt: Attempt) -> AttemptOut:
        next_due_ms = attempt.next_due_ms
        return cls(
            attempt=attempt.attempt,
            at=format_ms(attempt.at_ms),
            at_ms=attempt.at_ms,
            worker=attempt.worker,
            outcome=attempt.outcome,
            status=attempt.status,
            error=attempt.error,
            latency_ms=attempt.latency_ms,
            body=attempt.body,
            next_due=None if next_due_ms is None else format_ms(next_due_ms),
            next_due_ms=next_due_ms,
        )


class AttemptsOut(BaseModel):
    """A timer's recorded attempts, newest first: at most the store's `--attempt-history` (20
    unless set), none older than its `--attempt-retention`."""

    timer_id: str
    attempts: list[AttemptOut]
