"""The spec encoding stores write: `SpecCache` shares it only where it cannot differ."""

from __future__ import annotations

from tickwheel.model import Callback, RetryPolicy, Timer
from tickwheel.stores.codec import SpecCache, decode_spec, encode_spec


def test_spec_cache_encodes_like_encode_spec_and_shares_by_callback_and_policy() -> None:
    hook = Callback(url="https://hooks.example.com/a", headers={"X-Key": "1"}, body="{}")
    other = Callback(url="https://hooks.example.com/b")
    patient = RetryPolicy(max_attempts=9)
    timers = [
        Timer(due_ms=1, callback=hook),
        Timer(due_ms=2, callback=hook),
        Timer(due_ms=3, callback=other),
        Timer(due_ms=4, callback=hook, retry=patient),
        Timer(due_ms=5, payload={"n": 1}),
        Timer(due_ms=6, payload={"n": 2}),
    ]
    cache = SpecCache()
    specs = [cache.encode(timer) for timer in timers]
    assert specs == [encode_spec(timer) for timer in timers]
    assert specs[0] is specs[1]  # one encoding for the shared callback and policy
    assert len(set(specs)) == 5
    assert decode_spec(specs[3])[2] == patient
