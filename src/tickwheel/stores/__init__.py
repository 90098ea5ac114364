"""Durable homes for timers behind one `Store` protocol: memory, SQLite, Redis (Cluster),
PostgreSQL."""

from tickwheel.stores.base import Lease, Page, Stats, Store, StoreSettings
from tickwheel.stores.memory import MemoryStore
from tickwheel.stores.open import open_store
from tickwheel.stores.sqlite import SqliteStore

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
