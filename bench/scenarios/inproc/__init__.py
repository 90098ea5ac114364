"""The scenarios of ``bench/inproc.py``: tickwheel's in-process timers beside asyncio and heapq."""
