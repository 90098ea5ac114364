"""The scenarios of ``bench/stores.py``: RedisStore, SqliteStore and MemoryStore beside the raw floor."""
