"""Sign callback requests and verify them: ``Tickwheel-Signature: t=<unix s>,v1=<hex>,v2=<hex>``.

Each value is a hex HMAC-SHA256 under the shared secret. v2 covers the timestamp, the method, the
request target, the timer id, the attempt and the body, so a captured request cannot pass on
another path, as another timer or attempt, or with another body. v1 covers only ``f"{t}."`` +
body; it is still sent so that receivers written before v2 keep verifying, and goes in a later
release; `verify_signature` refuses it unless told to accept it during a migration. Checking
``t`` against the receiver's clock refuses a replay of an old request.
docs/signatures.md describes the scheme for receiver authors.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass

SIGNATURE_HEADER = "Tickwheel-Signature"
TIMER_ID_HEADER = "Tickwheel-Timer-Id"
ATTEMPT_HEADER = "Tickwheel-Attempt"
DEFAULT_TOLERANCE_S = 300.0
MAX_HEADER_CHARS = 1024
MAX_SIGNATURES = 8  # v1 and v2 values together: room for a secret rotation, not for a flood
MAX_TIMESTAMP_DIGITS = 12

# a field of the v2 string holds visible ASCII only, so never the line feed that ends it
_FIELD = re.compile(r"[!-~]+")


@dataclass(frozen=True, slots=True)
class _Parsed:
    timestamp_s: int
    v1: list[str]
    v2: list[str]


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def _hex_mac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def _v1_message(timestamp_s: int, body: bytes) -> bytes:
    return f"{timestamp_s}.".encode() + body


def _v2_message(
    timestamp_s: int, method: str, target: str, timer_id: str, attempt: str, body: bytes
) -> bytes | None:
    """Return the bytes v2 covers, or None if a field could hold a line feed or is empty.

    Six lines, then the body. No line before the body can contain a line feed, so the bytes
    split back into exactly one set of fields: two different requests never sign the same bytes.
    The ``tickwheel-v2`` line also keeps them apart from any v1 message, which starts with digits.
    """
    if not all(_FIELD.fullmatch(field) for field in (method, target, timer_id, attempt)):
        return None
    head = f"tickwheel-v2\n{timestamp_s}\n{method}\n{target}\n{timer_id}\n{attempt}\n"
    return head.encode() + body


def sign(
    secret: str | bytes,
    body: bytes,
    timestamp_s: int,
    *,
    method: str | None = None,
    target: str | None = None,
    timer_id: str | None = None,
    attempt: int | None = None,
) -> str:
    """Return the ``Tickwheel-Signature`` value for a request sent at `timestamp_s`.

    Given the request's `method`, `target` (path and query exactly as on the request line),
    `timer_id` and `attempt`, the value carries v1 and v2; without them, v1 alone, as senders
    did before v2.

    Raises:
        ValueError: only some of the four were given, one is empty or holds a character other
            than visible ASCII, or `timestamp_s` is not 0 to 12 digits.
    """
    if not 0 <= timestamp_s < 10**MAX_TIMESTAMP_DIGITS:
        raise ValueError(f"timestamp_s must be 0 to {MAX_TIMESTAMP_DIGITS} digits")
    key = _key(secret)
    value = f"t={timestamp_s},v1={_hex_mac(key, _v1_message(timestamp_s, body))}"
    if method is None and target is None and timer_id is None and attempt is None:
        return value
    if method is None or target is None or timer_id is None or attempt is None:
        raise ValueError("method, target, timer_id and attempt go together: give all or none")
    message = _v2_message(timestamp_s, method, target, timer_id, str(attempt), body)
    if message is None:
        raise ValueError("method, target and timer_id must be non-empty visible ASCII")
    return f"{value},v2={_hex_mac(key, message)}"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)


def _parse(value: str) -> _Parsed | None:
    """Split a header value; None if it is malformed or over a limit, before any MAC is made."""
    if len(value) > MAX_HEADER_CHARS or not value.isascii():
        return None
    timestamp: int | None = None
    v1: list[str] = []
    v2: list[str] = []
    for part in value.split(","):
        key, sep, item = part.strip().partition("=")
        if not sep:
            return None
        if key == "t":
            # ASCII already, so isdigit() means 0-9 only
            if timestamp is not None or not item.isdigit() or len(item) > MAX_TIMESTAMP_DIGITS:
                return None
            timestamp = int(item)
        elif key == "v1":
            v1.append(item)
        elif key == "v2":
            v2.append(item)
    if timestamp is None or not (v1 or v2) or len(v1) + len(v2) > MAX_SIGNATURES:
        return None
    return _Parsed(timestamp, v1, v2)


def _matches(expected: str, macs: list[str]) -> bool:
    # compare every candidate so the time taken does not say which one matched
    return any([hmac.compare_digest(expected, mac) for mac in macs])


def verify_signature(
    secret: str | bytes,
    headers: Mapping[str, str],
    body: bytes,
    *,
    method: str | None = None,
    target: str | None = None,
    accept_v1: bool = False,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now_s: float | None = None,
) -> bool:
    """Return whether `headers` carry a valid, fresh ``Tickwheel-Signature`` for this request.

    Given the request's `method` and `target` (path and query exactly as on the request line,
    not decoded), v2 is checked against them, the body and the ``Tickwheel-Timer-Id`` and
    ``Tickwheel-Attempt`` headers. A header that carries v2 is then judged by v2 alone, so the
    v1 beside it cannot pass the same request on another path.

    v1 is refused unless `accept_v1`: it binds the body alone, so whoever strips v2 from a
    captured request could replay it to any path, as any timer, within `tolerance_s`. Every
    tickwheel sender with a secret signs v2; pass ``accept_v1=True`` only while migrating from
    senders that sign v1 alone. A header that carries v2 is never judged by its v1.

    The header name is matched case-insensitively. A timestamp more than `tolerance_s` away from
    `now_s` (default: the wall clock) either way is refused, as is a malformed header, one over
    `MAX_HEADER_CHARS` or one with over `MAX_SIGNATURES` values.

    Raises:
        ValueError: only one of `method` and `target` was given, or neither without
            ``accept_v1=True`` (nothing could verify).
    """
    if (method is None) != (target is None):
        raise ValueError("method and target go together: give both or neither")
    if method is None and not accept_v1:
        raise ValueError(
            "give the request's method and target to check v2 against "
            "(or accept_v1=True to accept v1, which binds the body alone, while migrating)"
        )
    value = _header(headers, SIGNATURE_HEADER)
    parsed = None if value is None else _parse(value)
    if parsed is None:
        return False
    now = time.time() if now_s is None else now_s
    if abs(now - parsed.timestamp_s) > tolerance_s:
        return False
    key = _key(secret)
    if parsed.v2 and method is not None and target is not None:
        timer_id = _header(headers, TIMER_ID_HEADER) or ""
        attempt = _header(headers, ATTEMPT_HEADER) or ""
        message = _v2_message(parsed.timestamp_s, method, target, timer_id, attempt, body)
        return message is not None and _matches(_hex_mac(key, message), parsed.v2)
    message = _v1_message(parsed.timestamp_s, body)
    return accept_v1 and _matches(_hex_mac(key, message), parsed.v1)
