"""Callback signatures: a signed body verifies; tampered, wrong-secret, stale, malformed fail."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from tickwheel.engine.signing import sign, verify_signature

NOW = 1_700_000_000
BODY = b'{"order": 42}'


def _headers(value: str, name: str = "Tickwheel-Signature") -> dict[str, str]:
    return {name: value}


def test_header_format_is_timestamp_and_hex_hmac_of_t_dot_body() -> None:
    expected = hmac.new(b"secret", f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign("secret", BODY, NOW) == f"t={NOW},v1={expected}"
    assert sign(b"secret", BODY, NOW) == sign("secret", BODY, NOW)


def test_a_signed_body_verifies() -> None:
    headers = _headers(sign("secret", BODY, NOW))
    assert verify_signature("secret", headers, BODY, now_s=NOW)
    assert verify_signature(b"secret", headers, BODY, now_s=NOW + 1.5)


@pytest.mark.parametrize("name", ["tickwheel-signature", "TICKWHEEL-SIGNATURE"])
def test_header_name_is_case_insensitive(name: str) -> None:
    assert verify_signature("secret", _headers(sign("secret", BODY, NOW), name), BODY, now_s=NOW)


def test_empty_body_signs_and_verifies() -> None:
    assert verify_signature("s", _headers(sign("s", b"", NOW)), b"", now_s=NOW)


def test_tampered_body_fails() -> None:
    headers = _headers(sign("secret", BODY, NOW))
    assert not verify_signature("secret", headers, BODY + b" ", now_s=NOW)


def test_wrong_secret_fails() -> None:
    assert not verify_signature("other", _headers(sign("secret", BODY, NOW)), BODY, now_s=NOW)


def test_changed_timestamp_fails() -> None:
    mac = sign("secret", BODY, NOW).split(",v1=")[1]
    assert not verify_signature("secret", _headers(f"t={NOW + 1},v1={mac}"), BODY, now_s=NOW)


@pytest.mark.parametrize("offset_s", [-301, 301, -10_000])
def test_stale_or_future_timestamp_fails(offset_s: int) -> None:
    headers = _headers(sign("secret", BODY, NOW + offset_s))
    assert not verify_signature("secret", headers, BODY, now_s=NOW)


def test_tolerance_is_inclusive_and_configurable() -> None:
    headers = _headers(sign("secret", BODY, NOW - 300))
    assert verify_signature("secret", headers, BODY, now_s=NOW)
    assert not verify_signature("secret", headers, BODY, tolerance_s=60, now_s=NOW)


def test_default_clock_is_the_wall_clock() -> None:
    now = int(time.time())
    assert verify_signature("secret", _headers(sign("secret", BODY, now)), BODY)
    assert not verify_signature("secret", _headers(sign("secret", BODY, now - 3600)), BODY)


def test_any_of_several_v1_values_matches_for_rotation() -> None:
    old = sign("old", BODY, NOW).split(",v1=")[1]
    new = sign("new", BODY, NOW).split(",v1=")[1]
    headers = _headers(f"t={NOW},v1={old},v1={new}")
    assert verify_signature("old", headers, BODY, now_s=NOW)
    assert verify_signature("new", headers, BODY, now_s=NOW)
    assert not verify_signature("third", headers, BODY, now_s=NOW)


def test_unknown_schemes_are_ignored() -> None:
    value = sign("secret", BODY, NOW) + ",v0=abc"
    assert verify_signature("secret", _headers(value), BODY, now_s=NOW)


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
        "t=١٢٣,v1=ab",
        f"t={NOW},v1=zz\u00e9",
    ],
)
def test_malformed_header_fails(value: str) -> None:
    assert not verify_signature("secret", _headers(value), BODY, now_s=NOW)


def test_missing_header_fails() -> None:
    assert not verify_signature("secret", {}, BODY, now_s=NOW)
