"""Callback signatures: v1 (body) and v2 (request and body) verify; tampered, wrong-secret, stale,
malformed and replayed-elsewhere requests fail."""

from __future__ import annotations

import functools
import hashlib
import hmac
import time

import pytest

from tickwheel.callbacks.signing import sign, verify_signature

NOW = 1_700_000_000
BODY = b'{"order": 42}'
REQUEST = {"method": "POST", "target": "/hooks/a?b=1", "timer_id": "timer-1", "attempt": 3}


# v1 is refused unless asked for (a migration from senders signing v1 alone)
verify_v1 = functools.partial(verify_signature, accept_v1=True)


def _headers(value: str, name: str = "Tickwheel-Signature") -> dict[str, str]:
    return {name: value}


def test_header_format_is_timestamp_and_hex_hmac_of_t_dot_body() -> None:
    expected = hmac.new(b"secret", f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign("secret", BODY, NOW) == f"t={NOW},v1={expected}"
    assert sign(b"secret", BODY, NOW) == sign("secret", BODY, NOW)


def test_a_signed_body_verifies() -> None:
    headers = _headers(sign("secret", BODY, NOW))
    assert verify_v1("secret", headers, BODY, now_s=NOW)
    assert verify_v1(b"secret", headers, BODY, now_s=NOW + 1.5)


@pytest.mark.parametrize("name", ["tickwheel-signature", "TICKWHEEL-SIGNATURE"])
def test_header_name_is_case_insensitive(name: str) -> None:
    assert verify_v1("secret", _headers(sign("secret", BODY, NOW), name), BODY, now_s=NOW)


def test_empty_body_signs_and_verifies() -> None:
    assert verify_v1("s", _headers(sign("s", b"", NOW)), b"", now_s=NOW)


def test_tampered_body_fails() -> None:
    headers = _headers(sign("secret", BODY, NOW))
    assert not verify_v1("secret", headers, BODY + b" ", now_s=NOW)


def test_wrong_secret_fails() -> None:
    assert not verify_v1("other", _headers(sign("secret", BODY, NOW)), BODY, now_s=NOW)


def test_changed_timestamp_fails() -> None:
    mac = sign("secret", BODY, NOW).split(",v1=")[1]
    assert not verify_v1("secret", _headers(f"t={NOW + 1},v1={mac}"), BODY, now_s=NOW)


@pytest.mark.parametrize("offset_s", [-301, 301, -10_000])
def test_stale_or_future_timestamp_fails(offset_s: int) -> None:
    headers = _headers(sign("secret", BODY, NOW + offset_s))
    assert not verify_v1("secret", headers, BODY, now_s=NOW)


def test_tolerance_is_inclusive_and_configurable() -> None:
    headers = _headers(sign("secret", BODY, NOW - 300))
    assert verify_v1("secret", headers, BODY, now_s=NOW)
    assert not verify_v1("secret", headers, BODY, tolerance_s=60, now_s=NOW)


def test_default_clock_is_the_wall_clock() -> None:
    now = int(time.time())
    assert verify_v1("secret", _headers(sign("secret", BODY, now)), BODY)
    assert not verify_v1("secret", _headers(sign("secret", BODY, now - 3600)), BODY)


def test_any_of_several_v1_values_matches_for_rotation() -> None:
    old = sign("old", BODY, NOW).split(",v1=")[1]
    new = sign("new", BODY, NOW).split(",v1=")[1]
    headers = _headers(f"t={NOW},v1={old},v1={new}")
    assert verify_v1("old", headers, BODY, now_s=NOW)
    assert verify_v1("new", headers, BODY, now_s=NOW)
    assert not verify_v1("third", headers, BODY, now_s=NOW)


def test_unknown_schemes_are_ignored() -> None:
    value = sign("secret", BODY, NOW) + ",v0=abc"
    assert verify_v1("secret", _headers(value), BODY, now_s=NOW)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "garbage",
        f"t={NOW}",
        "v1=abcdef",
        "t=,v1=ab",
        f"t=-{NOW},v1=ab",
        f"t={NOW}.5,v1=ab",
        f"t={NOW},t={NOW},v1=ab",
        f"t={NOW},v1",
        f"t={NOW},,v1=ab",
        "t=١٢٣,v1=ab",
        f"t={NOW},v1=zz\u00e9",
    ],
)
def test_malformed_header_fails(value: str) -> None:
    assert not verify_v1("secret", _headers(value), BODY, now_s=NOW)


def test_missing_header_fails() -> None:
    assert not verify_v1("secret", {}, BODY, now_s=NOW)


# --- v2: the request and the body -------------------------------------------------------------


def _v2_headers(value: str, timer_id: str = "timer-1", attempt: str = "3") -> dict[str, str]:
    return {
        "Tickwheel-Signature": value,
        "Tickwheel-Timer-Id": timer_id,
        "Tickwheel-Attempt": attempt,
    }


def _verify_v2(headers: dict[str, str], body: bytes = BODY, **request: object) -> bool:
    where = {"method": "POST", "target": "/hooks/a?b=1", **request}
    return verify_signature(
        "secret",
        headers,
        body,
        method=str(where["method"]),
        target=str(where["target"]),
        accept_v1=False,
        now_s=NOW,
    )


def test_v2_header_carries_v1_then_v2_of_the_canonical_string() -> None:
    signed = f"tickwheel-v2\n{NOW}\nPOST\n/hooks/a?b=1\ntimer-1\n3\n".encode() + BODY
    v1 = hmac.new(b"secret", f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    v2 = hmac.new(b"secret", signed, hashlib.sha256).hexdigest()
    assert sign("secret", BODY, NOW, **REQUEST) == f"t={NOW},v1={v1},v2={v2}"


def test_a_signed_request_verifies_with_v2_alone() -> None:
    assert _verify_v2(_v2_headers(sign("secret", BODY, NOW, **REQUEST)))


def test_timer_and_attempt_headers_are_found_case_insensitively() -> None:
    value = sign("secret", BODY, NOW, **REQUEST)
    headers = {
        "tickwheel-signature": value,
        "TICKWHEEL-TIMER-ID": "timer-1",
        "tickwheel-attempt": "3",
    }
    assert _verify_v2(headers)


@pytest.mark.parametrize(
    ("request_change", "timer_id", "attempt", "body"),
    [
        ({"method": "PUT"}, "timer-1", "3", BODY),
        ({"target": "/hooks/b?b=1"}, "timer-1", "3", BODY),
        ({"target": "/hooks/a?b=2"}, "timer-1", "3", BODY),
        ({"target": "/hooks/a"}, "timer-1", "3", BODY),
        ({}, "timer-2", "3", BODY),
        ({}, "timer-1", "4", BODY),
        ({}, "timer-1", "03", BODY),
        ({}, "timer-1", "3", BODY + b" "),
    ],
)
def test_v2_refuses_any_other_request(
    request_change: dict[str, str], timer_id: str, attempt: str, body: bytes
) -> None:
    headers = _v2_headers(sign("secret", BODY, NOW, **REQUEST), timer_id, attempt)
    assert not _verify_v2(headers, body, **request_change)


def test_v2_refuses_a_changed_timestamp_and_a_wrong_secret() -> None:
    value = sign("secret", BODY, NOW, **REQUEST)
    assert not _verify_v2(_v2_headers(value.replace(f"t={NOW}", f"t={NOW + 1}")))
    assert not _verify_v2(_v2_headers(sign("other", BODY, NOW, **REQUEST)))


@pytest.mark.parametrize("missing", ["Tickwheel-Timer-Id", "Tickwheel-Attempt"])
def test_v2_refuses_a_request_without_timer_or_attempt_header(missing: str) -> None:
    headers = _v2_headers(sign("secret", BODY, NOW, **REQUEST))
    del headers[missing]
    assert not _verify_v2(headers)


def test_any_of_several_v2_values_matches_for_rotation() -> None:
    old = sign("old", BODY, NOW, **REQUEST).split(",v2=")[1]
    new = sign("new", BODY, NOW, **REQUEST).split(",v2=")[1]
    headers = _v2_headers(f"t={NOW},v2={old},v2={new}")
    for secret in ("old", "new"):
        assert verify_signature(
            secret, headers, BODY, method="POST", target="/hooks/a?b=1", now_s=NOW
        )
    assert not _verify_v2(headers)


def test_a_header_with_v2_is_judged_by_v2_alone_even_while_v1_is_accepted() -> None:
    headers = _v2_headers(sign("secret", BODY, NOW, **REQUEST))
    # the v1 value beside it is still valid for this body, on any path
    assert verify_v1("secret", headers, BODY, now_s=NOW)
    assert not verify_v1("secret", headers, BODY, method="POST", target="/elsewhere", now_s=NOW)


def test_a_v1_only_header_verifies_only_while_v1_is_accepted() -> None:
    headers = _v2_headers(sign("secret", BODY, NOW))
    for accept_v1 in (True, False):
        valid = verify_signature(
            "secret",
            headers,
            BODY,
            method="POST",
            target="/hooks/a?b=1",
            accept_v1=accept_v1,
            now_s=NOW,
        )
        assert valid is accept_v1


def test_without_method_and_target_only_v1_can_verify() -> None:
    value = sign("secret", BODY, NOW, **REQUEST)
    v2_only = _v2_headers(f"t={NOW},v2={value.split(',v2=')[1]}")
    assert not verify_v1("secret", v2_only, BODY, now_s=NOW)


@pytest.mark.parametrize(
    "given",
    [{"method": "POST"}, {"method": "POST", "target": "/", "timer_id": "t"}, {"attempt": 1}],
)
def test_sign_wants_all_four_request_fields_or_none(given: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="all or none"):
        sign("secret", BODY, NOW, **given)


@pytest.mark.parametrize(
    "change",
    [
        {"target": "/a\nPOST"},
        {"target": "/a b"},
        {"target": ""},
        {"target": "/é"},
        {"timer_id": "t\r1"},
        {"method": ""},
    ],
)
def test_sign_refuses_a_field_that_could_hold_a_line_break(change: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="visible ASCII"):
        sign("secret", BODY, NOW, **{**REQUEST, **change})


@pytest.mark.parametrize("timestamp_s", [-1, 10**12])
def test_sign_refuses_a_timestamp_a_verifier_would_not_parse(timestamp_s: int) -> None:
    with pytest.raises(ValueError, match="12 digits"):
        sign("secret", BODY, timestamp_s)


def test_verify_wants_method_and_target_together() -> None:
    headers = _v2_headers(sign("secret", BODY, NOW, **REQUEST))
    with pytest.raises(ValueError, match="give both"):
        verify_signature("secret", headers, BODY, method="POST", now_s=NOW)
    with pytest.raises(ValueError, match="give both"):
        verify_signature("secret", headers, BODY, target="/", now_s=NOW)


def test_refusing_v1_without_a_request_to_check_v2_is_a_mistake() -> None:
    with pytest.raises(ValueError, match="method and target to check v2"):
        verify_signature("secret", {}, BODY)
    with pytest.raises(ValueError, match="method and target to check v2"):
        verify_signature("secret", {}, BODY, accept_v1=False)


def test_a_header_stripped_of_v2_is_refused_by_default() -> None:
    signed = sign("secret", BODY, NOW, **REQUEST)
    stripped = _v2_headers(signed.split(",v2=")[0])
    # the v1 left binds the body alone: it would pass on another path, as another timer
    assert not verify_signature("secret", stripped, BODY, method="POST", target="/x", now_s=NOW)
    assert not _verify_v2(stripped)
    assert verify_signature(
        "secret", _v2_headers(signed), BODY, method="POST", target="/hooks/a?b=1", now_s=NOW
    )
