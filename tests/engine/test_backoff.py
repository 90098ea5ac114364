"""Retry timing: exponential backoff with full jitter, bounded by the policy, never by a server."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.engine.backoff import backoff_s, retry_due_ms
from tickwheel.model import RetryPolicy
from tickwheel.stores import StoreSettings

NOW = 1_700_000_000_000
HORIZON_MS = StoreSettings().max_horizon_ms
POLICY = RetryPolicy(max_attempts=10, min_backoff_s=1, max_backoff_s=60, timeout_s=5)


@given(attempt=st.integers(1, 2000), seed=st.integers(0, 2**32))
def test_backoff_stays_between_min_and_a_doubling_cap(attempt: int, seed: int) -> None:
    wait = backoff_s(POLICY, attempt, random.Random(seed))
    assert POLICY.min_backoff_s <= wait <= min(POLICY.max_backoff_s, 2.0 ** min(attempt - 1, 64))


def test_jitter_spreads_a_burst_of_failures() -> None:
    rng = random.Random(7)
    waits = {round(backoff_s(POLICY, 6, rng), 3) for _ in range(100)}
    assert len(waits) > 90
    assert max(waits) > 20  # the cap at attempt 6 is 32 s


def test_gives_up_after_the_last_attempt() -> None:
    assert retry_due_ms(POLICY, 9, NOW, NOW, max_ahead_ms=HORIZON_MS) is not None
    assert retry_due_ms(POLICY, 10, NOW, NOW, max_ahead_ms=HORIZON_MS) is None


def test_retry_after_is_honoured_up_to_max_backoff() -> None:
    rng = random.Random(1)
    for retry_after_s, due_ms in ((30, NOW + 30_000), (10**9, NOW + 60_000)):
        assert (
            retry_due_ms(
                POLICY, 1, NOW, NOW, retry_after_s=retry_after_s, rng=rng, max_ahead_ms=HORIZON_MS
            )
            == due_ms
        )


@pytest.mark.parametrize(("started_ago_s", "gives_up"), [(0, False), (8, False), (9.5, True)])
def test_max_retry_duration_counts_from_the_first_claim(
    started_ago_s: float, gives_up: bool
) -> None:
    policy = RetryPolicy(max_attempts=100, min_backoff_s=1, max_backoff_s=1, max_retry_s=10)
    due = retry_due_ms(policy, 3, NOW, NOW - round(started_ago_s * 1000), max_ahead_ms=HORIZON_MS)
    assert (due is None) is gives_up
    if due is not None:
        assert due == NOW + 1000


@pytest.mark.parametrize("backoff_s", [0.0, 59.0, 3600.0, 86_400.0])
def test_a_retry_is_due_from_now_up_to_the_store_s_horizon(backoff_s: float) -> None:
    policy = RetryPolicy(min_backoff_s=backoff_s, max_backoff_s=backoff_s)
    due = retry_due_ms(policy, 1, NOW, NOW, max_ahead_ms=60_000)
    assert due == NOW + min(round(backoff_s * 1000), 60_000)
