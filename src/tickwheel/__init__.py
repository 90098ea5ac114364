"""tickwheel: run work at a chosen future time, from a timing wheel in one process upwards."""

from tickwheel.core import DelayHeap, TimingWheel
from tickwheel.engine import Delivery, Worker, WorkerSettings, consume
from tickwheel.errors import (
    Closed,
    InvalidArgument,
    InvalidTimer,
    LeaseLost,
    StoreUnavailable,
    TickwheelError,
    TimerExists,
)
from tickwheel.model import Callback, RetryPolicy, State, Timer
from tickwheel.runtime import (
    AsyncDelayQueue,
    AsyncScheduler,
    Clock,
    DelayQueue,
    FakeClock,
    Scheduler,
    SystemClock,
    TimerHandle,
)
from tickwheel.stores import Lease, MemoryStore, SqliteStore, Store, StoreSettings, open_store

__all__ = [
    "AsyncDelayQueue",
    "AsyncScheduler",
    "Callback",
    "Clock",
    "Closed",
    "DelayHeap",
    "DelayQueue",
    "Delivery",
    "FakeClock",
    "InvalidArgument",
    "InvalidTimer",
    "Lease",
    "LeaseLost",
    "MemoryStore",
    "RetryPolicy",
    "Scheduler",
    "SqliteStore",
    "State",
    "Store",
    "StoreSettings",
    "StoreUnavailable",
    "SystemClock",
    "TickwheelError",
    "Timer",
    "TimerExists",
    "TimerHandle",
    "TimingWheel",
    "Worker",
    "WorkerSettings",
    "consume",
    "open_store",
]
