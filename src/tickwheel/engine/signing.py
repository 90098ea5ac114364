"""Sign callback bodies and verify them: ``Tickwheel-Signature: t=<unix s>,v1=<hex HMAC-SHA256>``.

The MAC covers ``f"{t}."`` + body, so a receiver can refuse a tampered body and, by checking the
timestamp against its own clock, a replay of an old request. Several ``v1=`` values may be sent
while a secret is rotated; one match is enough.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

SIGNATURE_HEADER = "Tickwheel-Signature"
DEFAULT_TOLERANCE_S = 300.0


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def _mac(key: bytes, body: bytes, timestamp_s: int) -> str:
    return hmac.new(key, f"{timestamp_s}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str | bytes, body: bytes, timestamp_s: int) -> str:
    """Return the ``Tickwheel-Signature`` header value for `body` sent at `timestamp_s`."""
    return f"t={timestamp_s},v1={_mac(_key(secret), body, timestamp_s)}"


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    lowered = name.lower()
    return next((v for k, v in headers.items() if k.lower() == lowered), None)


def _parse(value: str) -> tuple[int, list[str]] | None:
    timestamp: int | None = None
    macs: list[str] = []
    for part in value.split(","):
        key, sep, item = part.strip().partition("=")
        if not sep:
            return None
        if key == "t":
            if timestamp is not None or not item.isascii() or not item.isdigit():
                return None
            timestamp = int(item)
        elif key == "v1":
            macs.append(item)
    if timestamp is None or not macs:
        return None
    return timestamp, macs


def verify_signature(
    secret: str | bytes,
    headers: Mapping[str, str],
    body: bytes,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now_s: float | None = None,
) -> bool:
    """Return whether `headers` carry a valid, fresh ``Tickwheel-Signature`` for `body`.

    The header name is matched case-insensitively; a timestamp more than `tolerance_s` away from
    `now_s` (default: the wall clock) either way is refused, as is a malformed header.
    """
    value = _header(headers, SIGNATURE_HEADER)
    parsed = None if value is None else _parse(value)
    if parsed is None:
        return False
    timestamp, macs = parsed
    now = time.time() if now_s is None else now_s
    if abs(now - timestamp) > tolerance_s:
        return False
    expected = _mac(_key(secret), body, timestamp).encode()
    # compare every candidate so the time taken does not say which one matched
    matches = [hmac.compare_digest(expected, mac.encode()) for mac in macs]
    return any(matches)
