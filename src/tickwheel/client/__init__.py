"""The Python client of a running tickwheel service: `Client` (blocking) and `AsyncClient`.

::

    from tickwheel.client import Client

    with Client("http://127.0.0.1:8080", token=None) as tw:
        timer = tw.add(url="https://example.com/hook", delay=30, body={"order": 42})
        tw.get(timer.id).state          # "scheduled"
        tw.cancel(timer.id)

Its methods are the ``tickwheel`` command's verbs; the command is built on it. Errors the API
answers raise `tickwheel.errors.ServiceError` and its kinds (`NotFound`, `Conflict`, …). It
needs httpx: ``pip install 'tickwheel[client]'`` (the ``service`` extra brings it too).
"""

from tickwheel.client.aio import AsyncClient
from tickwheel.client.sync import Client
from tickwheel.client.views import (
    AttemptInfo,
    Created,
    HostLimit,
    Limit,
    Page,
    QueueInfo,
    RunInfo,
    ScheduleInfo,
    Stats,
    TimerInfo,
)

__all__ = [
    "AsyncClient",
    "AttemptInfo",
    "Client",
    "Created",
    "HostLimit",
    "Limit",
    "Page",
    "QueueInfo",
    "RunInfo",
    "ScheduleInfo",
    "Stats",
    "TimerInfo",
]
