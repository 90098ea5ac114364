"""The machine a benchmark runs on: what it is, and how busy other processes keep it.

On 2 shared cores another process's work inflates every timing, so each table notes the CPUs
that processes other than the benchmark (and the servers it started) kept busy meanwhile.
"""

from __future__ import annotations

import gc
import os
import platform
import sys
import time
from importlib import metadata

from harness.report import Table

HZ = os.sysconf("SC_CLK_TCK")  # the unit of the CPU ticks in /proc


def cpu_model() -> str:
    """Return the CPU model name from /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_ticks() -> tuple[int, int]:
    """Return (busy ticks of the whole machine, ticks used by this process) from /proc."""
    try:
        with open("/proc/stat", encoding="utf-8") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        busy = sum(fields) - fields[3] - fields[4]  # minus idle and iowait
    except (OSError, ValueError, IndexError):
        return 0, 0
    times = os.times()
    own = round((times.user + times.system) * HZ)
    return busy, own


def pid_ticks(pid: int | None) -> int:
    """Return the CPU ticks (user + system) process `pid` has used, 0 when unknown."""
    if pid is None:
        return 0
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, ValueError, IndexError):
        return 0


def own_cpu_s() -> float:
    """Return the CPU seconds (user + system) this process has used."""
    times = os.times()
    return times.user + times.system


class OtherLoad:
    """CPUs kept busy by processes other than this one and the ones it tracks (a redis-server,
    a receiver), from its creation on."""

    def __init__(self, *pids: int | None) -> None:
        self._pids = {pid: pid_ticks(pid) for pid in pids if pid is not None}
        self._ended: dict[int, int] = {}
        self._machine, self._own = cpu_ticks()
        self._start = time.monotonic()

    def track(self, pid: int) -> None:
        """Count `pid` as ours from now on."""
        self._pids[pid] = pid_ticks(pid)

    def untrack(self, pid: int) -> None:
        """Keep what `pid` used so far as ours; call before it exits."""
        self._ended[pid] = pid_ticks(pid) - self._pids.pop(pid, 0)

    def other(self) -> float:
        """Return the average CPUs other processes kept busy so far."""
        machine, own = cpu_ticks()
        ours = sum(pid_ticks(pid) - start for pid, start in self._pids.items())
        ours += sum(self._ended.values())
        seconds = time.monotonic() - self._start
        ticks = (machine - self._machine) - (own - self._own) - ours
        return max(0.0, ticks / HZ / seconds) if seconds > 0 else 0.0

    def note(self) -> str:
        """Return a table note stating the load seen so far."""
        return f"other processes kept {self.other():.2f} CPUs busy on average during this phase"


def sample_other_load(seconds: float = 1.0) -> float:
    """Measure the CPUs other processes use right now, over `seconds`."""
    meter = OtherLoad()
    time.sleep(seconds)
    return meter.other()


def version_of(package: str) -> str:
    """Return an installed package's version, or "not installed"."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_table(load_now: float) -> Table:
    """Describe the interpreter, the machine and its load."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    table = Table("Machine", ["item", "value"])
    table.rows = [
        ["python", f"{sys.version.split()[0]} ({platform.python_implementation()})"],
        ["platform", platform.platform()],
        ["cpu", cpu_model()],
        ["nproc", f"{os.cpu_count()} (usable {usable})"],
        ["gc", f"enabled={gc.isenabled()} thresholds={gc.get_threshold()}"],
        ["switch interval", f"{sys.getswitchinterval() * 1000:g} ms"],
        ["load average", " ".join(f"{x:.2f}" for x in os.getloadavg())],
        ["other processes at start", f"{load_now:.2f} CPUs busy (1 s sample)"],
    ]
    return table
