"""tickwheel: run work at a chosen future time, from a timing wheel in one process upwards."""

from tickwheel.core import DelayHeap, TimingWheel
from tickwheel.errors import Closed, InvalidArgument, TickwheelError
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

__all__ = [
    "AsyncDelayQueue",
    "AsyncScheduler",
    "Clock",
    "Closed",
    "DelayHeap",
    "DelayQueue",
    "FakeClock",
    "InvalidArgument",
    "Scheduler",
    "SystemClock",
    "TickwheelError",
    "TimerHandle",
    "TimingWheel",
]
