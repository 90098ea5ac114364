"""`ServiceSettings`: how the service listens, where it keeps timers, and what it accepts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tickwheel.errors import InvalidArgument

MIB = 1024 * 1024
DEFAULT_MAX_BODY_BYTES = 4 * MIB
"""A batch of 1,000 timers of up to ~4 KiB each as JSON (docs/decisions.md, entry 10)."""

_SECRETS = frozenset({"token", "signing_secret"})
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})
# environment variable -> field; every value is a string, converted by the field's type
_ENV = {
    "TICKWHEEL_STORE": "store_url",
    "TICKWHEEL_HOST": "host",
    "TICKWHEEL_PORT": "port",
    "TICKWHEEL_TOKEN": "token",
    "TICKWHEEL_SIGNING_SECRET": "signing_secret",
    "TICKWHEEL_ALLOW_PRIVATE_TARGETS": "allow_private_targets",
    "TICKWHEEL_WORKER": "worker",
    "TICKWHEEL_MAX_BODY_BYTES": "max_body_bytes",
}
_INTS = frozenset({"port", "max_body_bytes"})
_BOOLS = frozenset({"allow_private_targets", "worker"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceSettings:
    """Settings of the HTTP service and its worker; validated when built, secrets kept out of repr.

    Args:
        store_url: where timers live, as `tickwheel.stores.open_store` takes it.
        host: the address to listen on.
        port: the TCP port to listen on (0 lets the OS choose).
        token: when set, every request but ``/healthz`` needs ``Authorization: Bearer <token>``.
        signing_secret: when set, callbacks carry ``Tickwheel-Signature`` (HMAC-SHA256).
        allow_private_targets: accept callback URLs on loopback, private and link-local hosts.
        worker: run a worker that fires due timers in the same process as the API.
        max_body_bytes: the largest request body accepted; larger ones get 413.
    """

    store_url: str = "sqlite:///./tickwheel.db"
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    signing_secret: str | None = None
    allow_private_targets: bool = False
    worker: bool = True
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    def __post_init__(self) -> None:
        for name in ("store_url", "host"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise InvalidArgument(name, f"must be a non-empty string, got {value!r}")
        if "://" not in self.store_url:
            raise InvalidArgument("store_url", f"must be a store URL, got {self.store_url!r}")
        if _not_int(self.port) or not 0 <= self.port <= 65535:
            raise InvalidArgument("port", f"must be an integer from 0 to 65535, got {self.port!r}")
        for name in sorted(_SECRETS):
            secret = getattr(self, name)
            if secret is not None and (not isinstance(secret, str) or not secret.strip()):
                raise InvalidArgument(name, "must be a non-empty string or None")
            if isinstance(secret, str) and any(c.isspace() for c in secret):
                raise InvalidArgument(name, "must not contain whitespace")
        for name in sorted(_BOOLS):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgument(name, f"must be a bool, got {getattr(self, name)!r}")
        if _not_int(self.max_body_bytes) or self.max_body_bytes < 64 * 1024:
            raise InvalidArgument(
                "max_body_bytes",
                f"must be an integer of at least 65536, got {self.max_body_bytes!r}",
            )

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _SECRETS and value is not None:
                value = "***"
            elif f.name == "store_url":
                value = _without_password(value)
            shown.append(f"{f.name}={value!r}")
        return f"ServiceSettings({', '.join(shown)})"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, **overrides: Any) -> ServiceSettings:
        """Build settings from ``TICKWHEEL_*`` variables; `overrides` that are not None win.

        Raises:
            InvalidArgument: a variable or override is invalid, naming the field.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise InvalidArgument(unknown[0], "is not a ServiceSettings field")
        values: dict[str, Any] = {}
        for variable, name in _ENV.items():
            if variable in environ:
                values[name] = _parse(name, variable, environ[variable])
        values.update({name: value for name, value in overrides.items() if value is not None})
        return cls(**values)


def _without_password(url: str) -> str:
    """Return `url` with the password of its user info (``redis://:secret@host``) masked."""
    scheme, separator, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    return f"{scheme}{separator}{userinfo.partition(':')[0]}:***@{host}"


def _not_int(value: object) -> bool:
    return isinstance(value, bool) or not isinstance(value, int)


def _parse(name: str, variable: str, raw: str) -> Any:
    text = raw.strip()
    if name in _BOOLS:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InvalidArgument(name, f"{variable} must be 1/true/yes or 0/false/no, got {raw!r}")
    if name in _INTS:
        try:
            return int(text)
        except ValueError:
            raise InvalidArgument(name, f"{variable} must be an integer, got {raw!r}") from None
    if name in _SECRETS:
        return text or None
    return text
