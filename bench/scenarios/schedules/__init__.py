"""The scenarios of ``bench/schedules.py``: schedules on RedisStore beside one-shot timers."""
