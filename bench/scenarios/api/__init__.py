"""The scenarios of ``bench/api.py``: `POST /v1/timers` beside a bare FastAPI endpoint."""
