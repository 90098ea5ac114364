"""Pure timer data structures over integer milliseconds: no clock, no threads, no I/O."""

from tickwheel.core.heap import DelayHeap
from tickwheel.core.wheel import TimingWheel, WheelEntry

__all__ = ["DelayHeap", "TimingWheel", "WheelEntry"]
