"""Callback URLs, parsed once into what calling them takes.

A timer's URL is needed three times: when the timer is made (may it be stored?), by the SSRF
guard and the limits (which host is it?) and when it fires (which origin, which request line?).
It is parsed once, when its `Callback` is built (or first used, for one a store rebuilt), and
the `Callback` carries the result (`Callback.parsed_url`) to the others, so the host that was
checked is the host that is called.

It reads a URL as aiohttp's yarl did when tickwheel sent callbacks with it, so requests stay
byte for byte what they were: the host lower-cased, IDNA-encoded when not ASCII, an IP literal
in its compressed form; path and query requoted (characters that may not appear raw are
percent-encoded, valid escapes kept, escapes of unreserved characters decoded); dot segments
resolved; the fragment dropped. Where the standard library's `urlsplit` was the stricter of the
two (ports in ASCII digits, brackets around IPv6 addresses only), its rule holds. Only the
standard library is imported here; the `idna` package is loaded for the first non-ASCII host.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import string
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote

from tickwheel.errors import InvalidTimer

MAX_LABEL_CHARS = 63
DEFAULT_PORTS = {"http": 80, "https": 443}
PARSED_URLS_KEPT = 1024
"""URLs whose parse `parse_url` keeps: most timers of a batch call one of a few URLs, and a
parse costs microseconds."""

_LEADING_JUNK = "".join(map(chr, range(33)))  # C0 controls and space, stripped as browsers do
_SCHEME_CHARS = frozenset(string.ascii_letters + string.digits + "+-.")
_IPV_FUTURE = re.compile(r"v[a-fA-F0-9]+\..+", re.DOTALL)
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# characters that stay as they are in a path or a query; the rest are percent-encoded
_SUB_DELIMS = "!$'()*,"
_PATH_SAFE = _SUB_DELIMS + "+&=;@:/"
_QUERY_SAFE = _SUB_DELIMS + "?/:@=+&;"
# escapes that keep their meaning as escapes: decoding them would change how the part splits
_PATH_PROTECTED = frozenset("/+")
_QUERY_PROTECTED = frozenset("=+&;")
_UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
# code points that IDNA deletes or folds away without a trace (zero-width spaces, joiners, bidi
# controls, variation selectors, tags), so the name resolved would not be the name written
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u1806\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


class InvalidUrl(InvalidTimer):
    """`callback.url` cannot be called; `host` is its host as written, when one was found.

    The host lets a message name the target without quoting the URL, whose query may carry
    a token.
    """

    def __init__(self, message: str, host: str | None = None) -> None:
        super().__init__("callback.url", message)
        self.host = host


@dataclass(frozen=True, slots=True)
class CallbackUrl:
    """A callback URL as it is called: where to connect, and the request line's parts."""

    scheme: str  # "http" or "https"
    host: str  # as resolved: lower case, IDNA for other scripts, IPs compressed, no brackets
    port: int  # the URL's, or the scheme's default
    target: str  # the request target: path and query, percent-encoded, no fragment
    host_header: str  # the Host header: no trailing dot, the port unless the scheme's default
    is_ip: bool  # the host is an IP literal (a zone after "%" aside): an address, not a name

    @property
    def origin(self) -> tuple[str, str, int]:
        """Scheme, host and port: what one pool of connections serves."""
        return (self.scheme, self.host, self.port)


@functools.lru_cache(maxsize=PARSED_URLS_KEPT)
def parse_url(url: str) -> CallbackUrl:
    """Parse an absolute http(s) URL into the request that calls it (the same `CallbackUrl`
    for a URL parsed lately: it is immutable).

    Raises:
        InvalidUrl: the URL is malformed, is not http(s), has no host, carries credentials,
            names port 0, or has a host no resolver would look up.
    """
    url = url.lstrip(_LEADING_JUNK).replace("\t", "").replace("\r", "").replace("\n", "")
    scheme, rest = _split_scheme(url)
    netloc, path, query = _split_rest(rest)
    written, port = _split_netloc(netloc)
    if scheme not in DEFAULT_PORTS:
        raise InvalidUrl(f"scheme must be http or https, got {_shown(url)}")
    if not written:
        raise InvalidUrl(f"has no host: {_shown(url)}")
    shown_host = _lower_but_zone(written)
    if "@" in netloc:
        raise InvalidUrl("must not carry credentials; send them in headers", shown_host)
    if port == 0:
        raise InvalidUrl("port must not be 0", shown_host)
    host, is_ip = _encode_host(written, shown_host)
    port = DEFAULT_PORTS[scheme] if port is None else port
    return CallbackUrl(
        scheme=scheme,
        host=host,
        port=port,
        target=_target(path, query),
        host_header=_host_header(host, port, DEFAULT_PORTS[scheme]),
        is_ip=is_ip,
    )


def _shown(text: str) -> str:
    """`text` quoted for a message, cut short: a URL may hold thousands of characters."""
    return repr(text) if len(text) <= 60 else repr(text[:60]) + "…"


def _lower_but_zone(host: str) -> str:
    """`host` in lower case but for an IPv6 zone, whose case the OS may mind."""
    name, percent, zone = host.partition("%")
    return name.lower() + percent + zone


def _split_scheme(url: str) -> tuple[str, str]:
    scheme, colon, rest = url.partition(":")
    if colon and scheme[:1].isalpha() and all(char in _SCHEME_CHARS for char in scheme):
        return scheme.lower(), rest
    return "", url


def _split_rest(rest: str) -> tuple[str, str, str]:
    """Split what follows the scheme into authority, path and query; drop the fragment."""
    netloc = ""
    if rest.startswith("//"):
        end = len(rest)
        for delimiter in "/?#":
            found = rest.find(delimiter, 2)
            if 0 <= found < end:
                end = found
        netloc, rest = rest[2:end], rest[end:]
    path, _, query = rest.partition("#")[0].partition("?")
    return netloc, path, query


def _split_netloc(netloc: str) -> tuple[str, int | None]:
    """Return the host as written and the port, if any, of an authority.

    Raises:
        InvalidUrl: brackets anywhere but around a whole IPv6 host, a backslash, a port that
            is not a number of at most 65535, or characters that NFKC turns into delimiters.
    """
    if "\\" in netloc:
        raise _malformed("a backslash is not allowed before the path")
    if not netloc.isascii():
        _check_nfkc(netloc)
    userinfo, _, hostinfo = netloc.rpartition("@")
    if "[" in netloc or "]" in netloc:
        host, bracket, after = hostinfo[1:].partition("]")
        if (
            not (hostinfo.startswith("[") and bracket)
            or "[" in userinfo
            or "]" in userinfo
            or "[" in host
            or "]" in after
            or (after and not after.startswith(":"))
        ):
            raise _malformed("Invalid IPv6 URL")
        _check_bracketed(host)
        port = after[1:]
    else:
        host, _, port = hostinfo.partition(":")
    if not port:
        return host, None
    if not (port.isascii() and port.isdigit()):
        raise _malformed(f"Port could not be cast to integer value as {_shown(port)}")
    number = int(port)
    if number > 65535:
        raise _malformed("Port out of range 0-65535")
    return host, number


def _check_bracketed(host: str) -> None:
    if host.startswith("v"):
        if not _IPV_FUTURE.fullmatch(host):
            raise _malformed("IPvFuture address is invalid")
        return
    try:
        address = ipaddress.ip_address(host)
    except ValueError as error:
        raise _malformed(str(error)) from None
    if address.version == 4:
        raise _malformed("An IPv4 address cannot be in brackets")


def _check_nfkc(netloc: str) -> None:
    """Refuse characters that NFKC, which IDNA applies, turns into URL delimiters (``℀``)."""
    kept = netloc.replace("@", "").replace(":", "").replace("#", "").replace("?", "")
    normalized = unicodedata.normalize("NFKC", kept)
    if normalized != kept and any(char in normalized for char in "/?#@:%"):
        raise _malformed(
            f"netloc {_shown(netloc)} contains invalid characters under NFKC normalization"
        )


def _malformed(reason: str) -> InvalidUrl:
    return InvalidUrl(f"is not a valid URL: {reason}")


def _encode_host(written: str, shown: str) -> tuple[str, bool]:
    """Return the host as it is resolved and whether it is an IP literal.

    Raises:
        InvalidUrl: (naming `shown`) IDNA cannot encode it, or a label is empty or over
            63 characters, which the resolver's own IDNA codec refuses.
    """
    host, is_ip = _address(written)
    if not is_ip:
        if not written.isascii() and _INVISIBLE.search(written):
            raise InvalidUrl(f"host {_shown(shown)} holds an invisible character", shown)
        try:
            host = written.lower() if written.isascii() else _idna(written)
        except UnicodeError as error:
            raise _not_a_domain(shown, error) from None
        # an address with junk after a "%" is no name either: it is judged as the address
        is_ip = "%" in host and _address(host.partition("%")[0])[1]
    try:
        host.encode("idna")  # what getaddrinfo does with it
    except UnicodeError as error:
        raise _not_a_domain(shown, error) from None
    return host, is_ip


def _address(host: str) -> tuple[str, bool]:
    """Return an IP literal (and a zone after "%") with the address compressed, and True;
    or `host` and False if it is none."""
    # only a host that ends in a digit or holds a colon may be one (the parse is slow)
    if host[-1:].isdigit() or ":" in host:
        raw, separator, zone = host.partition("%25" if "%25" in host else "%")
        try:
            address = ipaddress.ip_address(raw)
        except ValueError:
            pass
        else:
            return address.compressed + separator + zone, True
    return host, False


def _idna(host: str) -> str:
    """Encode a non-ASCII host with UTS 46 (the `idna` package), else the standard library's
    IDNA 2003 codec, as yarl did."""
    import idna

    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except UnicodeError:
        return host.encode("idna").decode("ascii")


def _not_a_domain(shown: str, error: UnicodeError) -> InvalidUrl:
    return InvalidUrl(
        f"host {_shown(shown)} is not a valid domain name ({error}): each dot-separated "
        f"label must be 1-{MAX_LABEL_CHARS} characters, as punycode for other scripts",
        shown,
    )


def _target(path: str, query: str) -> str:
    path = _requote(path, _PATH_SAFE, _PATH_PROTECTED, plus=False)
    if "." in path:
        path = _drop_dot_segments(path)
    query = _requote(query, _QUERY_SAFE, _QUERY_PROTECTED, plus=True)
    return f"{path or '/'}?{query}" if query else path or "/"


def _requote(text: str, safe: str, protected: frozenset[str], *, plus: bool) -> str:
    """Percent-encode what may not appear raw in `text`, keeping the escapes it has.

    An escape of an unreserved or `safe` character is decoded unless `protected`; other valid
    escapes are kept in upper case; a ``%`` that starts none is encoded. With `plus`, spaces
    become ``+`` (a query).
    """
    if not text:
        return text
    text = text.encode("utf-8", "ignore").decode()  # lone surrogates are dropped
    parts = []
    start = 0
    for escape in _ESCAPE.finditer(text):
        parts.append(_quote(text[start : escape.start()], safe, plus=plus))
        char = chr(int(escape[1], 16))
        if char not in protected and (char in _UNRESERVED or char in safe):
            parts.append(char)
        else:
            parts.append(escape[0].upper())
        start = escape.end()
    parts.append(_quote(text[start:], safe, plus=plus))
    return "".join(parts)


def _quote(text: str, safe: str, *, plus: bool) -> str:
    if plus and " " in text:
        return quote(text, safe + " ").replace(" ", "+")
    return quote(text, safe)


def _drop_dot_segments(path: str) -> str:
    """Resolve ``.`` and ``..`` segments (RFC 3986 5.2.4); ``..`` never climbs above the root."""
    root = "/" if path.startswith("/") else ""
    segments = path[len(root) :].split("/")
    kept: list[str] = []
    for segment in segments:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment != ".":
            kept.append(segment)
    if segments[-1] in (".", ".."):
        kept.append("")  # "/a/." is the directory "/a/"
    return root + "/".join(kept)


def _host_header(host: str, port: int, default_port: int) -> str:
    name = host.rstrip(".")  # trailing dots are valid in DNS, but break TLS name checks
    if ":" in name:
        name = f"[{name}]"
    header = name if port == default_port else f"{name}:{port}"
    return header or host
