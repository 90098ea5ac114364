"""When a failed attempt is tried again: exponential backoff with full jitter, or never."""

from __future__ import annotations

import random

from tickwheel.model import RetryPolicy


def backoff_s(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Return a wait after failed `attempt` (1-based): uniform between the minimum and a cap.

    The cap doubles per attempt from `min_backoff_s` up to `max_backoff_s`; full jitter spreads
    a burst of failures so that they do not return together (AWS "Exponential Backoff And Jitter").
    """
    cap = min(policy.max_backoff_s, policy.min_backoff_s * 2.0 ** min(attempt - 1, 64))
    return (rng or random).uniform(policy.min_backoff_s, cap)


def retry_due_ms(
    policy: RetryPolicy,
    attempt: int,
    now_ms: int,
    first_claimed_ms: int | None,
    retry_after_s: float | None = None,
    rng: random.Random | None = None,
    *,
    max_ahead_ms: int,
) -> int | None:
    """Return when to try after failed `attempt`, or None when the policy says to give up.

    A server's `Retry-After` is honoured up to `max_backoff_s`, so a receiver cannot park a
    timer for years. The due time is at most `max_ahead_ms` (the store's horizon) from
    `now_ms`, so that the store accepts it whatever the policy says: a retry it refused
    would leave the timer neither scheduled nor settled.
    """
    if attempt >= policy.max_attempts:
        return None
    wait_s = backoff_s(policy, attempt, rng)
    if retry_after_s is not None:
        wait_s = max(wait_s, min(retry_after_s, policy.max_backoff_s))
    due_ms = now_ms + min(round(wait_s * 1000), max_ahead_ms)
    if policy.max_retry_s is not None:
        started_ms = now_ms if first_claimed_ms is None else first_claimed_ms
        if due_ms > started_ms + policy.max_retry_s * 1000:
            return None
    return due_ms
