"""The scenarios of ``bench/engine.py``: `consume` and `Worker` on RedisStore beside a raw floor."""
