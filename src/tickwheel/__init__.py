"""tickwheel: run work at a chosen future time, from a timing wheel in one process upwards.

Importing tickwheel imports nothing outside the standard library: the in-process timers, the
model and the store protocol come with it; the stores and the engine's names load on first
use, and one that needs an
extra (`HttpTarget`: ``pip install 'tickwheel[service]'``, `RedisStore`: ``tickwheel[redis]``)
names it when it is missing.
"""

import importlib as _importlib
import typing as _typing

from tickwheel.core import DelayHeap, TimingWheel
from tickwheel.errors import (
    Closed,
    InvalidArgument,
    InvalidTimer,
    LeaseLost,
    NotReplicated,
    ScheduleExists,
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
    Series,
    SystemClock,
    TimerHandle,
)
from tickwheel.schedule import Misfire, Schedule, ScheduleState
from tickwheel.stores import Lease, Store, StoreSettings, open_store

if _typing.TYPE_CHECKING:
    from tickwheel.callbacks.http import HttpTarget
    from tickwheel.callbacks.settings import HttpSettings
    from tickwheel.engine.consume import Delivery, consume
    from tickwheel.engine.settings import WorkerSettings
    from tickwheel.engine.worker import Worker
    from tickwheel.stores.memory import MemoryStore
    from tickwheel.stores.redis import RedisStore
    from tickwheel.stores.sqlite import SqliteStore

# names loaded on first use: their module, and the extra it needs (None: the base install)
_LAZY = {
    "Delivery": ("tickwheel.engine.consume", None),
    "HttpSettings": ("tickwheel.callbacks.settings", None),
    "HttpTarget": ("tickwheel.callbacks.http", "service"),
    "MemoryStore": ("tickwheel.stores.memory", None),
    "RedisStore": ("tickwheel.stores.redis", "redis"),
    "SqliteStore": ("tickwheel.stores.sqlite", None),
    "Worker": ("tickwheel.engine.worker", None),
    "WorkerSettings": ("tickwheel.engine.settings", None),
    "consume": ("tickwheel.engine.consume", None),
}

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
    "HttpSettings",
    "HttpTarget",
    "InvalidArgument",
    "InvalidTimer",
    "Lease",
    "LeaseLost",
    "MemoryStore",
    "Misfire",
    "NotReplicated",
    "RedisStore",
    "RetryPolicy",
    "Schedule",
    "ScheduleExists",
    "ScheduleState",
    "Scheduler",
    "Series",
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


def __getattr__(name: str) -> object:
    """Load a name of `_LAZY` on first use, or say which extra brings what it is missing.

    Raises:
        AttributeError: `name` is not one of tickwheel's.
        ImportError: `name` needs an extra that is not installed.
    """
    try:
        module, extra = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'tickwheel' has no attribute {name!r}") from None
    try:
        value: object = getattr(_importlib.import_module(module), name)
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if extra is None or not missing or missing == "tickwheel":
            raise
        raise ImportError(
            f"tickwheel.{name} needs {missing}, which comes with an extra: "
            f"pip install 'tickwheel[{extra}]'",
            name=missing,
        ) from error
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
