"""`Origins`: which ``Host`` a request may name and which web pages may change state.

Two attacks from a web page the operator visits, which need no token when the service has none
and ride on nothing but the browser:

- DNS rebinding: a page on ``attacker.example`` makes its name resolve to 127.0.0.1 and reads
  the API as same-origin. The browser still sends ``Host: attacker.example``, so every request
  must name a host the service serves: a loopback name, the address it binds (when not a
  wildcard), or one given by ``--allowed-hosts``. Else 421 (400 without a Host).
- Cross-site requests: a form can POST to any URL without a preflight. A state-changing request
  whose ``Origin`` is not the service's own, or whose ``Sec-Fetch-Site`` says another site (the
  same site included: ``localhost:3000`` is the same site as ``localhost:8080``), is refused
  403, token or not. The dashboard and ``/docs`` fetch from their own origin and pass.

See docs/decisions.md ("Host and Origin checks") for why ``/healthz`` skips the Host check.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.datastructures import Headers

from tickwheel.service.api_errors import ApiError

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""Names of this machine a browser can use without DNS, so no page can rebind them."""
WILDCARD_HOSTS = frozenset({"0.0.0.0", "[::]", ""})
"""Addresses that bind every interface: they name no host a client would send."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing: a page may send them, and cannot read the answer cross-origin."""
HOST_FREE_PATHS = frozenset({"/healthz"})
"""Paths answered whatever the Host: a load balancer checks health by IP address."""
_BROWSER_SITES = frozenset({"cross-site", "same-site"})
MAX_SHOWN_CHARS = 100


def host_name(value: str) -> str:
    """Return the host part of a ``Host`` header or of ``--host``, lower case, IPv6 in brackets,
    without a port or a trailing dot."""
    text = value.strip().lower()
    if text.startswith("["):
        return text.partition("]")[0] + "]"
    name, colon, port = text.rpartition(":")
    if colon and ":" not in name and port.isdigit():
        text = name
    elif ":" in text:  # a bare IPv6 address, as --host takes it
        text = f"[{text}]"
    return text.rstrip(".")


class Origins:
    """The hosts the service answers as, and the check that refuses what a web page forged.

    Args:
        bind_host: the address the service listens on (``--host``); served unless a wildcard.
        allowed_hosts: more names (``--allowed-hosts``); ``*`` serves any Host, for a service
            behind a proxy that checks it.
    """

    def __init__(self, bind_host: str, allowed_hosts: Iterable[str] = ()) -> None:
        names = {host_name(name) for name in allowed_hosts}
        self.any_host = "*" in names
        names.discard("*")
        names |= LOOPBACK_HOSTS
        bound = host_name(bind_host)
        if bound not in WILDCARD_HOSTS:
            names.add(bound)
        self.hosts = frozenset(names)

    def refuse(self, method: str, path: str, headers: Headers) -> ApiError | None:
        """Return why the request is refused, or None: a Host the service does not serve (421,
        400 when missing), or a state-changing request sent by another site's page (403)."""
        host = headers.get("host")
        if path not in HOST_FREE_PATHS:
            if host is None or not host.strip():
                return ApiError(400, "the request has no Host header", field="Host")
            if not self.any_host and host_name(host) not in self.hosts:
                return ApiError(
                    421,
                    f"this service does not serve the host {_shown(host)}: use one it serves, "
                    "or add it with --allowed-hosts",
                    code="misdirected_request",
                    field="Host",
                )
        if method in SAFE_METHODS:
            return None
        site = headers.get("sec-fetch-site", "").strip().lower()
        if site in _BROWSER_SITES:
            return _forged(f"Sec-Fetch-Site: {site}")
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            return _forged(f"Origin {_shown(origin)}")
        return None


def _same_origin(origin: str, host: str | None) -> bool:
    """Whether `origin` (``scheme://host[:port]``) names the host and port the request was sent
    to. The scheme is not compared: a proxy in front may end TLS."""
    scheme, sep, netloc = origin.strip().lower().partition("://")
    if not sep or scheme not in {"http", "https"} or host is None:
        return False  # "null" (a sandboxed frame, a file) and other schemes are not ours
    return netloc.rstrip("/") == host.strip().lower()


def _forged(what: str) -> ApiError:
    return ApiError(
        403,
        f"refused a state-changing request from another site's page ({what}); send it from "
        "the service's own origin or without browser headers",
        code="cross_site",
    )


def _shown(text: str) -> str:
    return repr(text[:MAX_SHOWN_CHARS])
