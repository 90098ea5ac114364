"""Timers in this process only, the reference behaviour of the `Store` protocol: `MemoryStore`
(``store.py``, assembled from one module per concept, as the other backends are)."""

from tickwheel.stores.memory.store import MemoryStore

__all__ = ["MemoryStore"]
