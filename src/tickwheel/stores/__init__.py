"""Durable homes for timers behind one `Store` protocol: memory, SQLite, Redis (Cluster),
PostgreSQL.

The protocol and its types come with the package; a store's implementation loads on first use
of its name, so a module that needs only the types (the command line's limits, say) does not
load every backend.
"""

import importlib as _importlib
import typing as _typing

from tickwheel.stores.base import Lease, Page, Stats, Store, StoreSettings
from tickwheel.stores.open import open_store

if _typing.TYPE_CHECKING:
    from tickwheel.stores.memory import MemoryStore
    from tickwheel.stores.sqlite import SqliteStore

_LAZY = {"MemoryStore": "tickwheel.stores.memory", "SqliteStore": "tickwheel.stores.sqlite"}

__all__ = [
    "Lease",
    "MemoryStore",
    "Page",
    "SqliteStore",
    "Stats",
    "Store",
    "StoreSettings",
    "open_store",
]


def __getattr__(name: str) -> object:
    """Load `MemoryStore` or `SqliteStore` on first use.

    Raises:
        AttributeError: `name` is not one of the package's.
    """
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tickwheel.stores' has no attribute {name!r}") from None
    value: object = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
