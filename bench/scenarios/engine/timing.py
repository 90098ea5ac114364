"""The clocks of the engine runs: epoch ms, sleeping until an instant, CPU used from an instant."""

from __future__ import annotations

import asyncio
import time

from harness.machine import HZ, own_cpu_s, pid_ticks


def wall_ms() -> float:
    """Epoch ms with µs precision: Redis's ``TIME`` on this host reads the same clock."""
    return time.time_ns() / 1e6


async def sleep_until(epoch_ms: float) -> None:
    """Sleep to within a ms of `epoch_ms`, then yield to the loop until it has passed."""
    ahead_s = (epoch_ms - wall_ms()) / 1000 - 0.002
    if ahead_s > 0:
        await asyncio.sleep(ahead_s)
    # the last ms: poll each loop turn, as AsyncScheduler does (a sleep rounds up to whole ms)
    while wall_ms() < epoch_ms:  # noqa: ASYNC110
        await asyncio.sleep(0)


class CpuSnapshot:
    """CPU seconds this process and redis-server use from an instant on (read by the loop)."""

    def __init__(self, redis_pid: int | None) -> None:
        self._redis_pid = redis_pid
        self._start: tuple[float, int] | None = None

    @classmethod
    def at(cls, epoch_ms: float, redis_pid: int | None) -> CpuSnapshot:
        """Return a snapshot the running loop takes at `epoch_ms`."""
        snapshot = cls(redis_pid)
        delay_s = max(0.0, (epoch_ms - wall_ms()) / 1000)
        asyncio.get_running_loop().call_later(delay_s, snapshot.take)
        return snapshot

    def take(self) -> None:
        """Read the CPU used so far by this process and redis-server."""
        self._start = (own_cpu_s(), pid_ticks(self._redis_pid))

    def used(self) -> dict[str, float]:
        """CPU seconds since the snapshot: {"bench": ..., "redis": ...}."""
        if self._start is None:
            return {}
        cpu, ticks = self._start
        return {"bench": own_cpu_s() - cpu, "redis": (pid_ticks(self._redis_pid) - ticks) / HZ}
