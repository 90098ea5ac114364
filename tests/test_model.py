"""The timer model: generated ids, validation with messages naming the field, trusted restore."""

from __future__ import annotations

import pytest

from tickwheel import Callback, InvalidTimer, RetryPolicy, State, Timer
from tickwheel.model import (
    MAX_BACKOFF_S,
    MAX_BODY_BYTES,
    MAX_DUE_MS,
    MAX_JSON_DEPTH,
    MAX_PAYLOAD_BYTES,
    MAX_RETRY_S,
    MAX_TIMEOUT_S,
    new_id,
    occurrence_id,
    occurrence_of,
    restore,
)

DAY_S = 86_400


def _nested(depth: int) -> list[object]:
    """Return `depth` lists, each inside the next."""
    nested: list[object] = []
    for _ in range(depth - 1):
        nested = [nested]
    return nested


def _cycle() -> list[object]:
    cycle: list[object] = []
    cycle.append(cycle)
    return cycle


def test_generated_ids_are_unique_and_sort_by_creation() -> None:
    ids = [new_id(now_ms=ms) for ms in (1, 2, 3, 1_700_000_000_000)]
    assert ids == sorted(ids)
    assert all(len(i) == 26 for i in ids)
    assert len({new_id() for _ in range(1000)}) == 1000
    assert len(Timer(due_ms=1).id) == 26
    # ULID layout: the first 10 characters are the 48-bit ms in Crockford base32
    assert new_id(now_ms=0)[:10] == "0000000000"
    assert new_id(now_ms=2**48 - 1)[:10] == "7ZZZZZZZZZ"
    assert new_id(now_ms=1_469_922_850_259)[:10] == "01ARZ3NDEK"  # the ULID spec's example


@pytest.mark.parametrize(
    ("fields", "argument"),
    [
        ({"id": "has space"}, "id"),
        ({"id": "x" * 129}, "id"),
        ({"queue": ""}, "queue"),
        ({"due_ms": -1}, "due_ms"),
        ({"due_ms": 1.5}, "due_ms"),
        ({"due_ms": True}, "due_ms"),
        ({"payload": object()}, "payload"),
        ({"payload": float("nan")}, "payload"),
        ({"payload": "x" * (MAX_PAYLOAD_BYTES + 1)}, "payload"),
        ({"payload": "\ud800"}, "payload"),
        ({"payload": {"\udc00": 1}}, "payload"),
        ({"payload": _nested(129)}, "payload"),
        ({"payload": _nested(100_000)}, "payload"),
        ({"payload": _cycle()}, "payload"),
        ({"due_ms": MAX_DUE_MS + 1}, "due_ms"),
        ({"due_ms": 10**400}, "due_ms"),
        ({"id": 10**400}, "id"),
    ],
)
def test_bad_timer_fields_are_named(fields: dict[str, object], argument: str) -> None:
    values: dict[str, object] = {"due_ms": 1000, **fields}
    with pytest.raises(InvalidTimer) as caught:
        Timer(**values)  # type: ignore[arg-type]
    assert caught.value.argument == argument
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("fields", "argument"),
    [
        ({"url": "ftp://example.com/x"}, "callback.url"),
        ({"url": "https://"}, "callback.url"),
        ({"url": "https://user:secret@example.com/"}, "callback.url"),
        ({"url": "https://example.com/a b"}, "callback.url"),
        ({"url": "https://example.com:99999/"}, "callback.url"),
        ({"method": "TRACE"}, "callback.method"),
        ({"headers": {"Bad Name": "x"}}, "callback.headers"),
        ({"headers": {"X-A": "line\r\nInjected: 1"}}, "callback.headers"),
        ({"headers": {"Tickwheel-Attempt": "9"}}, "callback.headers"),
        ({"headers": {"Host": "evil"}}, "callback.headers"),
        ({"body": "x" * (MAX_BODY_BYTES + 1)}, "callback.body"),
        ({"body": "\ud800"}, "callback.body"),
        ({"body": b"bytes"}, "callback.body"),
        ({"url": "https://example.com/\udc00"}, "callback.url"),
        ({"url": "https://a..b/"}, "callback.url"),
        ({"url": "https://.x/"}, "callback.url"),
        ({"url": "https://x../"}, "callback.url"),
        ({"url": "https://" + "a" * 64 + ".com/"}, "callback.url"),
        ({"url": "https://" + "a." * 127 + "com/"}, "callback.url"),
        ({"url": "https://" + "ü" * 60 + ".com/"}, "callback.url"),
        ({"method": ["POST"]}, "callback.method"),
        ({"headers": [("X", "1")]}, "callback.headers"),
        ({"headers": {"X": "a\x01b"}}, "callback.headers"),
        ({"headers": {"X": "a\x7f"}}, "callback.headers"),
        ({"headers": {"X": "a\x9bb"}}, "callback.headers"),
        ({"headers": {"X": "a\u2029b"}}, "callback.headers"),
        ({"headers": {"X": "\ud800"}}, "callback.headers"),
        ({"headers": {"X-A": "1", "x-a": "2"}}, "callback.headers"),
    ],
)
def test_bad_callbacks_are_named(fields: dict[str, object], argument: str) -> None:
    values: dict[str, object] = {"url": "https://example.com/hook", **fields}
    with pytest.raises(InvalidTimer) as caught:
        Callback(**values)  # type: ignore[arg-type]
    assert caught.value.argument == argument


@pytest.mark.parametrize(
    ("fields", "argument"),
    [
        ({"max_attempts": 0}, "retry.max_attempts"),
        ({"min_backoff_s": -1}, "retry.min_backoff_s"),
        ({"timeout_s": 0}, "retry.timeout_s"),
        ({"max_backoff_s": float("inf")}, "retry.max_backoff_s"),
        ({"min_backoff_s": 10, "max_backoff_s": 1}, "retry.min_backoff_s"),
        ({"max_attempts": True}, "retry.max_attempts"),
        ({"max_attempts": 1001}, "retry.max_attempts"),
        ({"max_attempts": 10**400}, "retry.max_attempts"),
        ({"timeout_s": 1801}, "retry.timeout_s"),
        ({"timeout_s": 10**400}, "retry.timeout_s"),
        ({"timeout_s": float("nan")}, "retry.timeout_s"),
        ({"min_backoff_s": 2.5e11, "max_backoff_s": 2.5e11}, "retry.min_backoff_s"),
        ({"max_backoff_s": 7 * DAY_S + 1}, "retry.max_backoff_s"),
        ({"max_backoff_s": -(10**400)}, "retry.max_backoff_s"),
        ({"max_retry_s": 365 * DAY_S + 1}, "retry.max_retry_s"),
        ({"max_retry_s": float("nan")}, "retry.max_retry_s"),
        ({"max_retry_s": True}, "retry.max_retry_s"),
    ],
)
def test_bad_retry_policies_are_named(fields: dict[str, float], argument: str) -> None:
    with pytest.raises(InvalidTimer) as caught:
        RetryPolicy(**fields)  # type: ignore[arg-type]
    assert caught.value.argument == argument


def test_bounds_are_inclusive_and_named_in_the_message() -> None:
    assert (MAX_TIMEOUT_S, MAX_BACKOFF_S, MAX_RETRY_S) == (1800, 7 * DAY_S, 365 * DAY_S)
    policy = RetryPolicy(
        min_backoff_s=MAX_BACKOFF_S,
        max_backoff_s=MAX_BACKOFF_S,
        timeout_s=MAX_TIMEOUT_S,
        max_retry_s=MAX_RETRY_S,
    )
    assert policy.timeout_s == 1800
    with pytest.raises(InvalidTimer, match="at most 1800 s"):
        RetryPolicy(timeout_s=MAX_TIMEOUT_S + 0.5)
    assert Timer(due_ms=MAX_DUE_MS).due_ms == 253_402_300_799_999


@pytest.mark.parametrize(
    "url",
    [
        "https://" + "a" * 63 + ".example.com/",
        "https://example.com./",
        "https://a_b.example.com/",
        "https://bücher.example/",
        "http://1.2.3.4:8080/",
        "http://[2001:db8::1]/",
        "http://[fe80::1%25eth0]/",
    ],
)
def test_hosts_that_fire_are_accepted(url: str) -> None:
    assert Callback(url=url).url == url


def test_header_values_may_hold_tabs_and_non_ascii() -> None:
    headers = {"X-A": "a\tb c ~", "X-B": "José 日本 \U0001f4a5"}
    assert Callback(url="https://example.com/", headers=headers).headers == headers


def test_headers_are_a_read_only_copy() -> None:
    """Stores share one decoded callback between timers: no timer may change another's."""
    given = {"X-A": "1"}
    timer = Timer(due_ms=1, callback=Callback(url="https://example.com/", headers=given))
    assert timer.callback is not None
    given["X-A"] = "2"
    assert timer.callback.headers == {"X-A": "1"}
    with pytest.raises(TypeError):
        timer.callback.headers["X-A"] = "3"  # type: ignore[index]
    # another callback's headers are accepted as given, and checked again
    copied = Callback(url="https://example.org/", headers=timer.callback.headers)
    assert copied.headers == {"X-A": "1"}
    with pytest.raises(InvalidTimer) as caught:
        Callback(url="https://example.org/", headers={"Host": "x"})
    assert caught.value.argument == "callback.headers"


def test_messages_stay_short_for_huge_input() -> None:
    with pytest.raises(InvalidTimer) as caught:
        RetryPolicy(timeout_s=10**5000)
    assert len(str(caught.value)) < 200
    with pytest.raises(InvalidTimer) as caught:
        Callback(url="https://example.com/", headers={"x " * 4000: "1"})
    assert len(str(caught.value)) < 200


def test_payload_may_nest_up_to_the_bound() -> None:
    assert Timer(due_ms=1, payload=_nested(MAX_JSON_DEPTH)).payload == _nested(MAX_JSON_DEPTH)


def test_payload_is_kept_as_json_returns_it() -> None:
    assert Timer(due_ms=1, payload=(1, 2)).payload == [1, 2]
    assert Timer(due_ms=1, payload={1: "a"}).payload == {"1": "a"}


def test_spec_decides_sameness_not_bookkeeping() -> None:
    first = Timer(id="t", due_ms=5, payload=1)
    assert first.spec() == first.evolve(attempt=3, state=State.DEAD).spec()
    assert first.first_claimed_ms is None
    assert first.spec() == first.evolve(first_claimed_ms=7).spec()
    assert first.spec() != first.evolve(due_ms=6).spec()


def test_restore_rebuilds_without_validating() -> None:
    timer = Timer(id="t", due_ms=5, callback=Callback(url="https://example.com/"))
    fields = {name: getattr(timer, name) for name in Timer.__dataclass_fields__}
    assert restore(Timer, **fields) == timer
    # a stored record is trusted as it is: no validation runs on the way out
    assert restore(Timer, **{**fields, "id": "not valid here"}).id == "not valid here"


@pytest.mark.parametrize("timer_id", ["s1@0", "report.daily@1700000000000", "a:b@5"])
def test_an_occurrence_id_names_its_schedule_and_nominal_time(timer_id: str) -> None:
    timer = Timer(id=timer_id, due_ms=0)
    schedule_id, _, nominal = timer_id.rpartition("@")
    assert occurrence_of(timer.id) == (schedule_id, int(nominal))
    assert occurrence_id(schedule_id, int(nominal)) == timer_id


@pytest.mark.parametrize("timer_id", ["@5", "s1@", "s1@x", "s1@05", "s@1@2", "s 1@2", "s1@-1"])
def test_other_ids_with_an_at_sign_are_refused(timer_id: str) -> None:
    assert occurrence_of(timer_id) is None
    with pytest.raises(InvalidTimer, match=r"^id:"):
        Timer(id=timer_id, due_ms=0)


def test_a_plain_id_is_no_occurrence() -> None:
    assert occurrence_of("plain:123") is None
