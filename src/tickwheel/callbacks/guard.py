"""Which callback targets tickwheel may call: public addresses only unless private ones are allowed.

A timer service that calls URLs its users choose is a server-side request forgery tool unless it
refuses the addresses behind its own firewall: loopback, private ranges, link-local (cloud metadata
at 169.254.169.254), and the like. The URL is checked when a timer is created (literal addresses
and local names) and again, on the resolved address actually connected to, when it fires.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tickwheel.errors import InvalidTimer
from tickwheel.urls import CallbackUrl, parse_url

if TYPE_CHECKING:
    from tickwheel.callbacks.resolver import AddressInfo

ALLOW_PRIVATE_ENV = "TICKWHEEL_ALLOW_PRIVATE_TARGETS"
_LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain")
# IPv6 ranges that embed an IPv4 address in their low 32 bits: a translator (NAT64, SIIT) or a
# dual stack host reaches that IPv4 address through them. (IPv4-mapped ::ffff:0:0/96 and 6to4
# are Python's `ipv4_mapped` and `sixtofour`.)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # SIIT, RFC 2765 / RFC 6145
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
_EMBEDDING = (_NAT64, _IPV4_TRANSLATED, _IPV4_COMPATIBLE)
# refused whatever they embed: local-use NAT64 (RFC 8215) translates to whatever the local
# network chooses, and Teredo relays through a server to an obfuscated client address; ranges
# that some Python versions' `is_global` calls global
_LOCAL_IPV6 = (ipaddress.IPv6Network("64:ff9b:1::/48"), ipaddress.IPv6Network("2001::/32"))


def is_public_address(address: str) -> bool:
    """Return whether `address` (an IP literal) is globally routable, so safe to call.

    IPv6 forms that carry an IPv4 address (mapped, translated, compatible, 6to4, NAT64) are
    judged by that address too: ``::ffff:127.0.0.1`` and ``::ffff:0:127.0.0.1`` are loopback
    however they are spelled. Teredo and local-use NAT64 addresses are refused.

    Raises:
        ValueError: `address` is not an IP literal.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None and not _is_public(embedded):
            return False
        if ip.is_site_local or any(ip in net for net in _LOCAL_IPV6):
            return False
    return _is_public(ip)


def _is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_global and not ip.is_multicast


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _EMBEDDING):
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def is_legacy_ipv4(host: str) -> bool:
    """Return whether `host` is an IPv4 address in a non-dotted-quad form (``127.1``, ``0x7f.1``).

    The C resolver maps such names onto addresses, so they would dodge a check of the literal.
    """
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return True
    return False


class PrivateAddressRefused(OSError):
    """A callback host resolved only to addresses tickwheel may not call."""

    def __init__(self, host: str) -> None:
        # not the address: a timer's last_error is read back through the API, and naming the
        # private address a name resolves to would map the network behind the firewall
        super().__init__(f"refused: {host} resolves only to private addresses")


def keep_public(host: str, found: Sequence[AddressInfo]) -> list[AddressInfo]:
    """Return the public addresses in `found`; raise `PrivateAddressRefused` if none are."""
    public = [info for info in found if is_public_address(str(info[4][0]))]
    if not public and found:
        raise PrivateAddressRefused(host)
    return public


@functools.lru_cache(maxsize=4096)
def _may_call(host: str) -> bool:
    """Whether a callback host, as a URL names it, is a public address or a name that is not
    local-only; kept per host, as most timers of a service call a few hosts."""
    try:
        return is_public_address(host)
    except ValueError:
        return (
            host != "localhost" and not host.endswith(_LOCAL_SUFFIXES) and not is_legacy_ipv4(host)
        )


def check_target_url(url: CallbackUrl | str, *, allow_private: bool) -> None:
    """Refuse a callback URL whose host is a private address or a local-only name.

    The host is read as the request will read it: `url` as parsed (a callback's `parsed_url`),
    or parsed here when given as text; names are resolved only when the timer fires, so this
    catches what is knowable without DNS.

    Raises:
        InvalidTimer: naming `callback.url`.
    """
    if allow_private:
        return
    host = (url if isinstance(url, CallbackUrl) else parse_url(url)).host.rstrip(".")
    if not _may_call(host):
        raise InvalidTimer(
            "callback.url",
            f"host {host!r} is a private, loopback or link-local target; "
            f"allow it with allow_private_targets ({ALLOW_PRIVATE_ENV}=1)",
        )
