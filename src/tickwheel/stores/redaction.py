"""Store URLs fit to print: whatever in them may be a credential is masked."""

from __future__ import annotations

_SECRET_PARAMS = ("password", "secret", "token")


def redact(url: str) -> str:
    """Return a store URL fit to print: the password in its user info or query is masked."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    # the last "@": a password may hold "/" or "@" unescaped, and must not leak through them
    userinfo, at, tail = rest.rpartition("@")
    if at and ":" in userinfo:
        rest = f"{userinfo.partition(':')[0]}:***@{tail}"
    else:
        tail = rest
    where, question, query = tail.partition("?")
    if question:
        pairs = [_mask(pair) for pair in query.split("&")]
        rest = rest.removesuffix(tail) + f"{where}?{'&'.join(pairs)}"
    return f"{scheme}{separator}{rest}"


def _mask(pair: str) -> str:
    name, equals, _ = pair.partition("=")
    if equals and any(word in name.lower() for word in _SECRET_PARAMS):
        return f"{name}=***"
    return pair
