"""The spec encoding stores write, and the timers they rebuild from what they read back."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.stores.attempt_record import Attempt
from tickwheel.stores.codec import SpecCache, SpecCodec, encode_spec, state_code, state_of
from tickwheel.stores.rebuild import as_scheduled, stored_timer


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
    assert SpecCodec().decode(specs[3])[2] == patient


def test_a_codec_shares_what_it_decoded_and_keeps_it_to_itself() -> None:
    hook = Callback(url="https://hooks.example.com/a", headers={"X-Key": "1"})
    first = encode_spec(Timer(due_ms=1, callback=hook, payload=1))
    second = encode_spec(Timer(due_ms=1, callback=hook, payload=[2]))
    codec = SpecCodec()
    callback, payload, retry = codec.decode(first)
    assert (callback, payload, retry) == (hook, 1, RetryPolicy())
    assert codec.parts(first) is codec.parts(first)
    assert codec.decode(second.encode())[0] is callback  # bytes, as Redis answers
    # a list payload is the caller's to change: decoded afresh every time
    assert codec.decode(second)[1] is not codec.decode(second)[1]
    assert SpecCodec().decode(first)[0] is not callback  # each store its own


def test_a_trace_context_is_the_spec_s_fourth_and_fifth_element_and_never_kept() -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    hook = Callback(url="https://a.example/")
    plain = encode_spec(Timer(due_ms=1, callback=hook))
    traced = encode_spec(Timer(due_ms=1, callback=hook, trace_parent=parent, trace_state="a=1"))
    assert traced == plain[:-1] + f',"{parent}","a=1"]'
    codec = SpecCodec()
    assert codec.parts(plain)[3:] == (None, None)  # written before traces: read the same
    assert codec.parts(traced)[3:] == (parent, "a=1")
    assert codec.parts(traced) is not codec.parts(traced)  # the timer's own: not cached
    assert codec.decode(traced) == codec.decode(plain)
    cache = SpecCache()
    assert cache.encode(Timer(due_ms=1, callback=hook, trace_parent=parent)) != cache.encode(
        Timer(due_ms=1, callback=hook)
    )


def test_decoded_headers_are_read_only() -> None:
    spec = encode_spec(Timer(due_ms=1, callback=Callback(url="https://a.example/", headers={})))
    assert spec == '[["https://a.example/","POST",null,null],null,null]'  # no headers: null
    hook = Callback(url="https://a.example/", headers={"X-Key": "1"})
    callback = SpecCodec().decode(encode_spec(Timer(due_ms=1, callback=hook)))[0]
    assert callback is not None
    assert callback.headers == {"X-Key": "1"}
    with pytest.raises(TypeError):
        callback.headers["X-Key"] = "2"  # type: ignore[index]


def test_stored_timer_builds_what_the_constructor_builds() -> None:
    timer = Timer(
        id="t",
        due_ms=5,
        queue="q",
        callback=Callback(url="https://example.com/"),
        payload={"n": 1},
        retry=RetryPolicy(max_attempts=3),
        attempt=2,
        state=State.DEAD,
        created_ms=1,
        updated_ms=4,
        last_error="boom",
        first_claimed_ms=3,
    )
    assert stored_timer(*(getattr(timer, field.name) for field in fields(Timer))) == timer
    scheduled = as_scheduled(timer, 9, attempt=2)
    assert scheduled == Timer(
        id="t",
        due_ms=5,
        queue="q",
        callback=timer.callback,
        payload={"n": 1},
        retry=timer.retry,
        attempt=2,
        created_ms=9,
        updated_ms=9,
    )


def test_state_codes_are_fixed() -> None:
    """Stored files and keyspaces keep their codes: paused came last, after dead."""
    codes = {state: state_code(state) for state in State}
    assert codes == {
        State.SCHEDULED: 0,
        State.LEASED: 1,
        State.DONE: 2,
        State.DEAD: 3,
        State.PAUSED: 4,
    }
    assert all(state_of(code) is state for state, code in codes.items())


_maybe_text = st.none() | st.text()
_maybe_int = st.none() | st.integers(min_value=-(2**63), max_value=2**63)


@given(
    st.builds(
        Attempt,
        attempt=st.integers(min_value=0, max_value=2**31),
        at_ms=st.integers(min_value=0, max_value=2**53),
        worker=st.text(),
        outcome=st.sampled_from(["ack", "retry", "dead"]),
        status=_maybe_int,
        error=_maybe_text,
        latency_ms=st.floats(allow_nan=False, allow_infinity=False),
        body=_maybe_text,
        next_due_ms=_maybe_int,
    )
)
def test_an_attempt_s_json_is_what_json_dumps_writes(attempt: Attempt) -> None:
    """`Attempt.to_json` writes its fields itself: the same text as `json.dumps`, read back
    as the same attempt."""
    text = attempt.to_json()
    assert text == json.dumps(list(attempt), separators=(",", ":"), ensure_ascii=False)
    assert Attempt.from_json(text) == attempt
