"""`open_store`: build a store from a URL, as ``tickwheel serve --store URL`` takes it.

=================================  ==========================================================
``memory://``                      `MemoryStore`: this process only, lost on exit
``sqlite:///relative/path.db``     `SqliteStore` on a path relative to the working directory
``sqlite:////absolute/path.db``    `SqliteStore` on an absolute path (four slashes)
``redis://host:port/db``           `RedisStore` on a standalone Redis (``rediss://`` for TLS)
``redis+cluster://host:port``      `RedisStore` on a Redis Cluster, from any one node
``postgresql://user@host:port/db`` `PostgresStore` (``postgres://`` too), in schema ``tickwheel``
=================================  ==========================================================

A Redis URL may end in ``?prefix=NAME`` to keep its keys under NAME (default ``tickwheel``),
so that several stores share one server, and set ``shards=N``: the prefix's count of virtual
shards, which the first store to use a prefix records in Redis and every later one takes
(a timer's shard is a hash of its id modulo N); without it a new prefix gets 1 on a standalone
server and 16 on a Cluster, and a count other than the recorded one is refused.
``durability=replicated`` (with ``wait_ms=N``, 1 to 10,000, default 1,000) makes each create or
change wait until a replica has it (`tickwheel.stores.redis.durability`); only a Redis store
takes it.

A PostgreSQL URL may end in ``?schema=NAME`` to keep the store's tables in schema NAME (default
``tickwheel``); the rest of it is libpq's (``sslmode=``, ``application_name=`` ...).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tickwheel.errors import InvalidArgument, StoreUnavailable
from tickwheel.stores.base import Store, StoreSettings
from tickwheel.stores.redaction import redact

Opener = Callable[[str, StoreSettings | None], Store]


def open_store(url: str, settings: StoreSettings | None = None) -> Store:
    """Return the store `url` names; it connects on first use.

    Raises:
        InvalidArgument: the URL's scheme is unknown or the URL is malformed (``argument="url"``).
        StoreUnavailable: the SQLite file's directory cannot be created.
    """
    scheme, separator, _ = url.partition("://")
    opener = _OPENERS.get(scheme.lower()) if separator else None
    if opener is None:
        known = ", ".join(f"{name}://" for name in sorted(_OPENERS))
        raise InvalidArgument("url", f"{redact(url)!r} is not a store URL; expected one of {known}")
    return opener(url, settings)


def _memory(url: str, settings: StoreSettings | None) -> Store:
    _refuse_durability(url, "memory://")
    if url.partition("://")[2] not in {"", "/"}:
        raise InvalidArgument("url", f"memory:// takes no host or path, got {redact(url)!r}")
    from tickwheel.stores.memory import MemoryStore  # each backend loads when it is opened

    return MemoryStore(settings)


def _sqlite(url: str, settings: StoreSettings | None) -> Store:
    _refuse_durability(url, "sqlite://")
    rest = url.partition("://")[2]
    if not rest.startswith("/") or len(rest) < 2:
        raise InvalidArgument(
            "url",
            f"{redact(url)!r} names no file: write sqlite:///relative.db or sqlite:////absolute.db",
        )
    # like SQLAlchemy: the third slash ends the (empty) host, what follows is the path
    path = Path(rest[1:])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreUnavailable(f"cannot create the directory of {path}: {error}") from error
    from tickwheel.stores.sqlite import SqliteStore

    return SqliteStore(path, settings)


def _refuse_durability(url: str, scheme: str) -> None:
    """Refuse a Redis-only durability parameter on a store with no replicas to wait for."""
    query = url.partition("?")[2]
    for name in _DURABILITY_PARAMS:
        if any(key == name for key, _ in parse_qsl(query, keep_blank_values=True)):
            raise InvalidArgument(
                name,
                f"only a Redis store takes ?{name}= (it waits for a Redis replica); "
                f"a {scheme} store has no replicas: {redact(url)!r}",
            )


# the Redis store reads them (durability.PARAMS; not imported here: it imports redis-py)
_DURABILITY_PARAMS = ("durability", "wait_ms")
_STORE_PARAMS = ("prefix", "shards")  # the store's own; the rest of the query is redis-py's


def _redis(url: str, settings: StoreSettings | None) -> Store:
    # imported here so that memory and SQLite users never import redis-py
    try:
        from tickwheel.stores.redis import RedisStore
        from tickwheel.stores.redis.keys import DEFAULT_PREFIX
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] != "redis":
            raise
        raise ImportError(
            "a Redis store needs redis-py, which comes with an extra: "
            "pip install 'tickwheel[redis]'",
            name="redis",
        ) from error

    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {name: [value for key, value in query if key == name] for name in _STORE_PARAMS}
    for name, values in ours.items():
        if len(values) > 1:
            raise InvalidArgument("url", f"give ?{name}= at most once")
    shards = ours["shards"][0] if ours["shards"] else None
    if shards is not None and not (shards.isascii() and shards.isdigit()):
        raise InvalidArgument("shards", f"must be an integer, got {shards!r}")
    rest = urlencode([(name, value) for name, value in query if name not in _STORE_PARAMS])
    return RedisStore.from_url(
        urlunsplit(parts._replace(query=rest)),
        settings,
        prefix=ours["prefix"][0] if ours["prefix"] else DEFAULT_PREFIX,
        shards=None if shards is None else int(shards),
    )


def _postgres(url: str, settings: StoreSettings | None) -> Store:
    _refuse_durability(url, "postgresql://")
    # imported here so that other stores' users never import psycopg
    try:
        from tickwheel.stores.postgres import PostgresStore
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in {"psycopg", "psycopg_pool"}:
            raise
        raise ImportError(
            "a PostgreSQL store needs psycopg, which comes with an extra: "
            "pip install 'tickwheel[postgres]'",
            name="psycopg",
        ) from error
    return PostgresStore(url, settings)


_OPENERS: dict[str, Opener] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "redis": _redis,
    "rediss": _redis,
    "redis+cluster": _redis,
    "rediss+cluster": _redis,
    "postgresql": _postgres,
    "postgres": _postgres,
}
