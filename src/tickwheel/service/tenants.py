"""Tenants: the tokens of a ``serve --tokens FILE``, each with a role, queue patterns and quotas.

The file is TOML, one ``[[token]]`` table per tenant::

    [[token]]
    name = "billing"
    token_file = "billing.token"   # or token = "...", at least 16 characters
    queues = ["billing-*"]         # glob patterns; "*" for every queue
    role = "write"                 # read, write or admin
    max_pending = 100000           # quotas, each optional
    creates_per_second = 200

A bearer token is resolved by the SHA-256 of what the client sent, looked up in a dict: the
cost is one hash whatever the number of tokens, and a lookup's timing can only tell a caller
about digests it cannot steer, never about a prefix of a real token. The tokens themselves are
kept nowhere after loading, so no repr or log can show one.
"""

from __future__ import annotations

import enum
import fnmatch
import hashlib
import logging
import math
import os
import re
import stat
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tickwheel.errors import InvalidArgument
from tickwheel.service.secret_file import read_secret_file

logger = logging.getLogger("tickwheel.service")

MIN_TOKEN_CHARS = 16
"""A shorter token can be guessed: `openssl rand -hex 32` gives 64 characters."""
MAX_TOKENS_FILE_BYTES = 1024 * 1024
MAX_CREATES_PER_SECOND = 1_000_000.0
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PATTERN = re.compile(r"^[A-Za-z0-9_.:*?\[\]!-]{1,200}$")
TOKEN_TENANT = "--token"
"""The name of the admin that ``--token`` gives beside a tokens file: no file name can take it."""
SCOPE_KEY = "tickwheel.tenant"
"""Where the `Gate` puts the request's `Tenant` in the ASGI scope for the routes."""
MATCH_CACHE = 4096
"""Queue names one tenant remembers the verdict for; a client chooses names, so it is bounded."""

_FIELDS = frozenset(
    {
        "name",
        "token",
        "token_file",
        "queues",
        "role",
        "max_pending",
        "max_schedules",
        "max_queues",
        "creates_per_second",
    }
)
# what only an admin may call: host limits are every tenant's, metrics name every queue
_ADMIN_PATHS = ("/v1/limits", "/metrics")
_READS = frozenset({"GET", "HEAD", "OPTIONS"})


class Role(enum.IntEnum):
    """What a token may do; each role may do what the roles below it may."""

    READ = 1
    WRITE = 2
    ADMIN = 3


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Tenant:
    """One token's name, role, queue patterns and quotas (None: no quota). Holds no secret."""

    name: str
    role: Role
    queues: tuple[str, ...]
    max_pending: int | None = None
    max_schedules: int | None = None
    max_queues: int | None = None
    creates_per_second: float | None = None
    _seen: dict[str, bool] = field(default_factory=dict, repr=False)

    @property
    def all_queues(self) -> bool:
        """Whether the tenant sees every queue (a ``"*"`` pattern)."""
        return "*" in self.queues

    @property
    def only_queue(self) -> str | None:
        """The one queue the tenant sees, when its patterns name exactly one without a glob."""
        if len(self.queues) == 1 and not any(c in self.queues[0] for c in "*?["):
            return self.queues[0]
        return None

    @property
    def counted(self) -> bool:
        """Whether a quota needs the tenant's timers or queues counted."""
        return self.max_pending is not None or self.max_queues is not None

    def sees(self, queue: str) -> bool:
        """Whether `queue` matches one of the tenant's patterns (case-sensitive globs)."""
        seen = self._seen.get(queue)
        if seen is None:
            seen = any(fnmatch.fnmatchcase(queue, pattern) for pattern in self.queues)
            if len(self._seen) >= MATCH_CACHE:
                self._seen.clear()
            self._seen[queue] = seen
        return seen

    def refusal(self, method: str, path: str) -> str | None:
        """Why the tenant's role may not call `method` `path`, or None when it may."""
        if path.startswith(_ADMIN_PATHS) and self.role < Role.ADMIN:
            return f"token {self.name!r} has role {self.role.name.lower()}: {path} needs admin"
        if method not in _READS and self.role < Role.WRITE:
            return f"token {self.name!r} has role read: {method} needs write"
        return None


class Tenants:
    """The tenants of a service, found by token."""

    def __init__(self, by_digest: Mapping[bytes, Tenant]) -> None:
        self._by_digest = dict(by_digest)

    def __repr__(self) -> str:
        names = ", ".join(sorted(t.name for t in self))
        return f"Tenants({names})"

    def __iter__(self) -> Iterator[Tenant]:
        return iter(self._by_digest.values())

    def __len__(self) -> int:
        return len(self._by_digest)

    def resolve(self, token: bytes) -> Tenant | None:
        """The tenant whose token is `token`, or None; one SHA-256 whatever the count."""
        return self._by_digest.get(hashlib.sha256(token).digest())

    def with_admin(self, token: str | None) -> Tenants:
        """These tenants and, when `token` is set, an admin of every queue named ``--token``.

        Raises:
            InvalidArgument: `token` is also one of the file's tokens.
        """
        if token is None:
            return self
        digest = _digest(token)
        if digest in self._by_digest:
            raise InvalidArgument("token", "is also a token of the tokens file: give it once")
        admin = Tenant(name=TOKEN_TENANT, role=Role.ADMIN, queues=("*",))
        return Tenants({**self._by_digest, digest: admin})


def tenants_of(tokens: Tenants | None, token: str | None) -> Tenants | None:
    """The tenants a service checks tokens against: those of its tokens file with ``--token``
    as one more admin; None without a tokens file (then ``--token`` alone, if any, is checked).
    """
    return None if tokens is None else tokens.with_admin(token)


def load_tenants(path: str | Path, argument: str = "--tokens") -> Tenants:
    """Read and check the tokens file at `path`; warn when other users may read it.

    Raises:
        InvalidArgument: the file cannot be read or is not valid, naming the table and field.
    """
    path = Path(path)
    try:
        with open(path, "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            raw = file.read(MAX_TOKENS_FILE_BYTES + 1)
    except OSError as error:
        raise InvalidArgument(argument, f"cannot read {path}: {error.strerror or error}") from None
    if len(raw) > MAX_TOKENS_FILE_BYTES:
        raise InvalidArgument(argument, f"{path} is over {MAX_TOKENS_FILE_BYTES} bytes")
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        logger.warning("%s holds tokens and other users may read it: chmod 600 %s", path, path)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise InvalidArgument(argument, f"{path} is not UTF-8 text") from None
    return parse_tenants(text, base=path.parent, argument=argument)


def parse_tenants(text: str, *, base: Path = Path(), argument: str = "--tokens") -> Tenants:
    """Check a tokens file's `text`; a ``token_file`` is relative to `base`.

    Raises:
        InvalidArgument: not TOML, no ``[[token]]`` table, or a table that is not valid
            (``token[2].role: ...``); no secret is ever in the message.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise InvalidArgument(argument, f"is not valid TOML: {error}") from None
    extra = sorted(set(document) - {"token"})
    if extra:
        raise InvalidArgument(argument, f"unknown key {extra[0]!r}: only [[token]] tables")
    tables = document.get("token")
    if not isinstance(tables, list) or not tables:
        raise InvalidArgument(argument, "has no [[token]] table")
    by_digest: dict[bytes, Tenant] = {}
    names: set[str] = set()
    for index, table in enumerate(tables):
        where = f"token[{index}]"
        if not isinstance(table, dict):
            raise InvalidArgument(argument, f"{where} is not a table")
        secret, tenant = _tenant(table, where, base)
        if tenant.name in names:
            raise InvalidArgument(f"{where}.name", f"{tenant.name!r} is given twice")
        digest = _digest(secret)
        if digest in by_digest:
            other = by_digest[digest].name
            raise InvalidArgument(f"{where}.token", f"is the same as the token of {other!r}")
        names.add(tenant.name)
        by_digest[digest] = tenant
    return Tenants(by_digest)


def _tenant(table: dict[str, Any], where: str, base: Path) -> tuple[str, Tenant]:
    unknown = sorted(set(table) - _FIELDS)
    if unknown:
        raise InvalidArgument(f"{where}.{unknown[0]}", f"is not a field (one of {sorted(_FIELDS)})")
    name = table.get("name")
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise InvalidArgument(
            f"{where}.name", "must be 1-64 letters, digits, '_', '.' or '-', starting alphanumeric"
        )
    secret = _secret(table, where, base)
    role_name = table.get("role")
    roles = {role.name.lower(): role for role in Role}
    if role_name not in roles:
        raise InvalidArgument(
            f"{where}.role", f"must be one of read, write, admin, got {role_name!r}"
        )
    queues = table.get("queues")
    if not isinstance(queues, list) or not queues:
        raise InvalidArgument(f"{where}.queues", 'must be a non-empty list of patterns ("*": all)')
    for pattern in queues:
        if not isinstance(pattern, str) or PATTERN.fullmatch(pattern) is None:
            raise InvalidArgument(
                f"{where}.queues", f"{pattern!r} is not a queue name or glob pattern"
            )
    tenant = Tenant(
        name=name,
        role=roles[role_name],
        queues=tuple(dict.fromkeys(queues)),
        max_pending=_count(table, where, "max_pending"),
        max_schedules=_count(table, where, "max_schedules"),
        max_queues=_count(table, where, "max_queues"),
        creates_per_second=_rate(table, where),
    )
    return secret, tenant


def _secret(table: dict[str, Any], where: str, base: Path) -> str:
    token, token_file = table.get("token"), table.get("token_file")
    if (token is None) == (token_file is None):
        raise InvalidArgument(f"{where}.token", "give token or token_file, one of them")
    if token_file is not None:
        if not isinstance(token_file, str) or not token_file:
            raise InvalidArgument(f"{where}.token_file", "must be a path")
        token = read_secret_file(base / token_file, f"{where}.token_file")
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
        raise InvalidArgument(
            f"{where}.token",
            f"must be at least {MIN_TOKEN_CHARS} characters (openssl rand -hex 32)",
        )
    if not all("!" <= c <= "~" for c in token):  # what an Authorization header carries as is
        raise InvalidArgument(f"{where}.token", "must be printable ASCII without spaces")
    return token


def _count(table: dict[str, Any], where: str, name: str) -> int | None:
    value = table.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{where}.{name}", f"must be a positive integer, got {value!r}")
    return value


def _rate(table: dict[str, Any], where: str) -> float | None:
    value = table.get("creates_per_second")
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= MAX_CREATES_PER_SECOND
    ):
        raise InvalidArgument(
            f"{where}.creates_per_second",
            f"must be a number above 0 and at most {MAX_CREATES_PER_SECOND:g}, got {value!r}",
        )
    return float(value)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
