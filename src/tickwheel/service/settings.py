"""`ServiceSettings`: how the service listens, where it keeps timers, and what it accepts."""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from tickwheel.errors import InvalidArgument
from tickwheel.service.secret_file import read_secret_file
from tickwheel.stores.attempt_record import (
    DEFAULT_ATTEMPT_HISTORY,
    DEFAULT_ATTEMPT_RETENTION_MS,
    MAX_ATTEMPT_HISTORY,
    MAX_ATTEMPT_RETENTION_S,
)
from tickwheel.stores.base import DAY_MS, HOUR_MS, MAX_SCHEDULES, StoreSettings
from tickwheel.stores.limit import MAX_LIMITS
from tickwheel.stores.redaction import redact

if TYPE_CHECKING:
    from tickwheel.service.tenants import Tenants

MAX_QUEUES = 100_000
"""Queues one store may hold by default: ten times a deployment with many queues."""
MIB = 1024 * 1024
DEFAULT_MAX_BODY_BYTES = 4 * MIB
"""Room for a batch of 1,000 timers of up to ~4 KiB each as JSON (the batch route's limit)."""
MAX_MAX_BODY_BYTES = 64 * MIB
"""The highest `max_body_bytes` accepted: each request's body is held in memory whole."""
MAX_API_WORKERS = 64
"""API processes one `serve` may run: far more than the cores of any one host it runs on."""

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
    "TICKWHEEL_INSECURE": "insecure",
    "TICKWHEEL_ALLOWED_HOSTS": "allowed_hosts",
    "TICKWHEEL_MAX_QUEUES": "max_queues",
    "TICKWHEEL_MAX_SCHEDULES": "max_schedules",
    "TICKWHEEL_MAX_LIMITS": "max_limits",
    "TICKWHEEL_MIN_SCHEDULE_INTERVAL": "min_schedule_interval_s",
    "TICKWHEEL_OCCURRENCE_RETENTION": "occurrence_retention_s",
    "TICKWHEEL_API_WORKERS": "api_workers",
    "TICKWHEEL_ATTEMPT_HISTORY": "attempt_history",
    "TICKWHEEL_ATTEMPT_RETENTION": "attempt_retention_s",
}
# a secret may come from a file instead, so that it is not in the environment of every child
_SECRET_FILES = {
    "TICKWHEEL_TOKEN_FILE": ("token", "TICKWHEEL_TOKEN"),
    "TICKWHEEL_SIGNING_SECRET_FILE": ("signing_secret", "TICKWHEEL_SIGNING_SECRET"),
}
_HOST = re.compile(r"\*|(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]{1,253})(:[0-9]{1,5})?")
_INTS = frozenset(
    {
        "port",
        "max_body_bytes",
        "max_queues",
        "max_schedules",
        "max_limits",
        "min_schedule_interval_s",
        "occurrence_retention_s",
        "api_workers",
        "attempt_history",
        "attempt_retention_s",
    }
)
_BOOLS = frozenset({"allow_private_targets", "worker", "insecure"})


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
        insecure: let `serve` listen on a non-loopback address without a token.
        allowed_hosts: ``Host`` names served besides loopback ones and `host` (``*``: any, for
            a service behind a proxy that checks the Host); others get 421.
        tenants: the tokens of a tokens file (``--tokens``), each with its role, queues and
            quotas; `token`, when set too, is one more admin.
        max_queues: queues the store may hold (with pending timers or settings); a timer,
            schedule or setting for a new queue past it gets 429.
        max_schedules: schedules the store may hold; a new one past it gets 429.
        max_limits: host limits the store may hold; a new one past it gets 429.
        min_schedule_interval_s: the least time between two occurrences of a schedule; a
            rule that fires more often is refused (422).
        occurrence_retention_s: how long a schedule's done occurrence is kept (at most the
            day every done timer is kept).
        api_workers: processes answering the API on one port (``SO_REUSEPORT``), the first
            with the worker; above 1 the store must be one processes share (not memory).
        attempt_history: attempts kept per timer (0: none recorded), newest first.
        attempt_retention_s: how long an attempt is kept, its timer's life at most.
    """

    store_url: str = "sqlite:///./tickwheel.db"
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    signing_secret: str | None = None
    allow_private_targets: bool = False
    worker: bool = True
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    insecure: bool = False
    allowed_hosts: tuple[str, ...] = ()
    tenants: Tenants | None = None
    max_queues: int = MAX_QUEUES
    max_schedules: int = MAX_SCHEDULES
    max_limits: int = MAX_LIMITS
    min_schedule_interval_s: int = 1
    occurrence_retention_s: int = HOUR_MS // 1000
    api_workers: int = 1
    attempt_history: int = DEFAULT_ATTEMPT_HISTORY
    attempt_retention_s: int = DEFAULT_ATTEMPT_RETENTION_MS // 1000

    def __post_init__(self) -> None:
        from tickwheel.service.tenants import Tenants

        if self.tenants is not None:
            if not isinstance(self.tenants, Tenants):
                raise InvalidArgument("tenants", f"must be Tenants or None, got {self.tenants!r}")
            self.tenants.with_admin(self.token)  # refuses a --token that is one of the file's
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
        if _not_int(self.max_body_bytes) or not 64 * 1024 <= self.max_body_bytes <= (
            MAX_MAX_BODY_BYTES
        ):
            raise InvalidArgument(
                "max_body_bytes",
                f"must be an integer from 65536 to {MAX_MAX_BODY_BYTES}, "
                f"got {self.max_body_bytes!r}",
            )
        check_allowed_hosts(self.allowed_hosts)

        for name in ("max_queues", "max_schedules", "max_limits", "min_schedule_interval_s"):
            value = getattr(self, name)
            if _not_int(value) or not 1 <= value <= 1_000_000_000:
                raise InvalidArgument(name, f"must be a positive integer, got {value!r}")
        retention = self.occurrence_retention_s
        if _not_int(retention) or not 0 <= retention <= DAY_MS // 1000:
            raise InvalidArgument(
                "occurrence_retention_s", f"must be 0 to 86400 seconds, got {retention!r}"
            )
        history, kept_s = self.attempt_history, self.attempt_retention_s
        if _not_int(history) or not 0 <= history <= MAX_ATTEMPT_HISTORY:
            raise InvalidArgument("attempt_history", f"must be 0 to {MAX_ATTEMPT_HISTORY}")
        if _not_int(kept_s) or not 0 <= kept_s <= MAX_ATTEMPT_RETENTION_S:
            raise InvalidArgument(
                "attempt_retention_s", f"must be 0 to {MAX_ATTEMPT_RETENTION_S} seconds"
            )
        if _not_int(self.api_workers) or not 1 <= self.api_workers <= MAX_API_WORKERS:
            raise InvalidArgument(
                "api_workers", f"must be 1 to {MAX_API_WORKERS}, got {self.api_workers!r}"
            )
        if self.api_workers > 1 and self.store_url.startswith("memory:"):
            raise InvalidArgument(
                "api_workers",
                "more than one API process needs a store they share (sqlite or redis), "
                "not memory://",
            )

    def store_settings(self) -> StoreSettings:
        """The store's settings these call for: its caps, the occurrences' retention and the
        attempt history's."""
        return StoreSettings(
            occurrence_retention_ms=self.occurrence_retention_s * 1000,
            max_schedules=self.max_schedules,
            max_limits=self.max_limits,
            attempt_history=self.attempt_history,
            attempt_retention_ms=self.attempt_retention_s * 1000,
        )

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _SECRETS and value is not None:
                value = "***"
            elif f.name == "store_url":
                value = redact(value)
            shown.append(f"{f.name}={value!r}")
        return f"ServiceSettings({', '.join(shown)})"

    def check_exposure(self) -> None:
        """Refuse to serve an API that other machines can reach and that asks for no token.

        Anyone who reaches such an API can schedule callbacks and read their headers, so it
        takes `insecure` (``--insecure``) to say this is meant.

        Raises:
            InvalidArgument: `host` is not loopback, there is neither `token` nor `tenants`,
                and `insecure` is False.
        """
        tokenless = self.token is None and self.tenants is None
        if tokenless and not self.insecure and not is_loopback(self.host):
            raise InvalidArgument(
                "host",
                f"refusing to serve on {self.host}, which other machines can reach, without a "
                "token: give --token-file (or --token), listen on 127.0.0.1, or pass --insecure",
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, **overrides: Any) -> ServiceSettings:
        """Build settings from ``TICKWHEEL_*`` variables; `overrides` that are not None win.

        A secret may be given as ``TICKWHEEL_TOKEN_FILE`` or ``TICKWHEEL_SIGNING_SECRET_FILE``,
        the path of a file holding it (see `read_secret_file`), but not both ways at once.

        Raises:
            InvalidArgument: a variable or override is invalid, naming the field (or the
                variable, for a secret file that cannot be used).
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise InvalidArgument(unknown[0], "is not a ServiceSettings field")
        given = {name: value for name, value in overrides.items() if value is not None}
        values: dict[str, Any] = {}
        for variable, name in _ENV.items():
            if variable in environ and name not in given:
                values[name] = _parse(name, variable, environ[variable])
        for variable, (name, direct) in _SECRET_FILES.items():
            path = environ.get(variable, "").strip()
            if not path or name in given:
                continue
            if values.get(name) is not None:
                raise InvalidArgument(variable, f"give {direct} or {variable}, not both")
            values[name] = read_secret_file(path, variable)
        tokens_file = environ.get("TICKWHEEL_TOKENS_FILE", "").strip()
        if tokens_file and "tenants" not in given:
            from tickwheel.service.tenants import load_tenants

            values["tenants"] = load_tenants(tokens_file, "TICKWHEEL_TOKENS_FILE")
        values.update(given)
        return cls(**values)


def is_loopback(host: str) -> bool:
    """Return whether `host` is reachable from this machine only: 127.0.0.0/8, ::1, localhost.

    Any other name counts as reachable from elsewhere: what it resolves to is not ours to trust.
    """
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def check_allowed_hosts(hosts: object) -> None:
    """Refuse an ``--allowed-hosts`` entry that is not a host name (with an optional port).

    Raises:
        InvalidArgument: `hosts` is not a tuple of names such as ``tw.example.com``,
            ``10.0.0.5:8080``, ``[fd00::1]`` or ``*``.
    """
    if not isinstance(hosts, tuple):
        raise InvalidArgument("allowed_hosts", f"must be a tuple of host names, got {hosts!r}")
    for host in hosts:
        if not isinstance(host, str) or not _HOST.fullmatch(host):
            raise InvalidArgument(
                "allowed_hosts",
                f"must be host names such as tw.example.com or [fd00::1] (a port allowed) or *, "
                f"without a scheme or a path, got {host!r}",
            )


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
    if name == "allowed_hosts":
        return split_hosts(text)
    return text


def split_hosts(text: str) -> tuple[str, ...]:
    """Split a comma-separated ``--allowed-hosts`` value; empty entries are dropped."""
    return tuple(part.strip() for part in text.split(",") if part.strip())
