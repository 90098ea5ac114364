"""Drivers that own a clock and a loop: the thread and asyncio schedulers and delay queues."""

from tickwheel.runtime.async_scheduler import AsyncScheduler
from tickwheel.runtime.clock import Clock, FakeClock, SystemClock
from tickwheel.runtime.delay_queue import AsyncDelayQueue, DelayQueue
from tickwheel.runtime.pauses import steady_gc
from tickwheel.runtime.scheduler import Scheduler
from tickwheel.runtime.series import Series
from tickwheel.runtime.timers import TimerHandle

__all__ = [
    "AsyncDelayQueue",
    "AsyncScheduler",
    "Clock",
    "DelayQueue",
    "FakeClock",
    "Scheduler",
    "Series",
    "SystemClock",
    "TimerHandle",
    "steady_gc",
]
