"""Which callback targets tickwheel may call: public addresses only unless private ones are allowed.

A timer service that calls URLs its users choose is a server-side request forgery tool unless it
refuses the addresses behind its own firewall: loopback, private ranges, link-local (cloud metadata
at 169.254.169.254), and the like. The URL is checked when a timer is created (literal addresses
and local names) and again, on the resolved address actually connected to, when it fires.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from tickwheel.errors import InvalidTimer

ALLOW_PRIVATE_ENV = "TICKWHEEL_ALLOW_PRIVATE_TARGETS"
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain")


def is_public_address(address: str) -> bool:
    """Return whether `address` (an IP literal) is globally routable, so safe to call."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def check_target_url(url: str, *, allow_private: bool) -> None:
    """Refuse a callback URL whose host is a private address or a local-only name.

    Names are resolved only when the timer fires; this catches what is knowable without DNS.
    Raises:
        InvalidTimer: naming `callback.url`.
    """
    if allow_private:
        return
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    try:
        public = is_public_address(host)
    except ValueError:
        public = host != "localhost" and not host.endswith(_LOCAL_SUFFIXES)
    if not public:
        raise InvalidTimer(
            "callback.url",
            f"host {host!r} is a private, loopback or link-local target; "
            f"allow it with allow_private_targets ({ALLOW_PRIVATE_ENV}=1)",
        )
