"""The scenarios of ``bench/adds.py``: single adds as a user writes them, beside raw redis-py."""
