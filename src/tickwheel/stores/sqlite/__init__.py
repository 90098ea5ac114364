"""Timers in one SQLite file, the embedded default store: `SqliteStore` (``store.py``, assembled
from one module per concept), its file and schema (``schema.py``), and its SQL and rows
(``queries.py``)."""

from tickwheel.stores.sqlite.store import SqliteStore

__all__ = ["SqliteStore"]
