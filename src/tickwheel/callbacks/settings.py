"""The HTTP target's settings: how callbacks are signed, which addresses they may reach, and how
many connections they may hold."""

from __future__ import annotations

from dataclasses import dataclass, field

from tickwheel.errors import InvalidArgument


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpSettings:
    """How the HTTP target calls receivers.

    `signing_secret` signs every body (``Tickwheel-Signature``) and is kept out of `repr`.
    `max_per_host` bounds the connections open to one scheme, host and port; by default a
    quarter of `max_connections`, so endpoints that never answer cannot take them all. An
    origin starts with 4 and earns more by answering promptly.
    """

    signing_secret: str | None = field(default=None, repr=False)
    allow_private_targets: bool = False  # let callbacks reach loopback, private, link-local
    max_connections: int = 256  # connections open at once, over all hosts
    max_per_host: int | None = None
    user_agent: str | None = None  # sent unless a timer sets its own; tickwheel/<version> if None

    def __post_init__(self) -> None:
        if self.signing_secret is not None and not isinstance(self.signing_secret, str):
            raise InvalidArgument("signing_secret", "must be a string")
        if not isinstance(self.allow_private_targets, bool):
            raise InvalidArgument("allow_private_targets", "must be True or False")
        for name in ("max_connections", "max_per_host"):
            value = getattr(self, name)
            if value is None and name == "max_per_host":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(name, f"must be an integer >= 1, got {value!r}")
        agent = self.user_agent
        if agent is not None and (
            not isinstance(agent, str) or any(char in agent for char in "\r\n\0")
        ):
            raise InvalidArgument("user_agent", "must be text without line breaks or NUL")
