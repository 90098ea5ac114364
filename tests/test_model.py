"""The timer model: generated ids, validation with messages naming the field, trusted restore."""

from __future__ import annotations

import pytest

from tickwheel import Callback, InvalidTimer, RetryPolicy, State, Timer
from tickwheel.model import MAX_BODY_BYTES, MAX_PAYLOAD_BYTES, new_id, restore


def test_generated_ids_are_unique_and_sort_by_creation() -> None:
    ids = [new_id(now_ms=ms) for ms in (1, 2, 3, 1_700_000_000_000)]
    assert ids == sorted(ids)
    assert all(len(i) == 26 for i in ids)
    assert len({new_id() for _ in range(1000)}) == 1000
    assert len(Timer(due_ms=1).id) == 26


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
    ],
)
def test_bad_retry_policies_are_named(fields: dict[str, float], argument: str) -> None:
    with pytest.raises(InvalidTimer) as caught:
        RetryPolicy(**fields)  # type: ignore[arg-type]
    assert caught.value.argument == argument


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
