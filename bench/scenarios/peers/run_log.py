"""When each job ran: one line per run appended to a file, from any thread or process.

A peer's job may run in its worker's thread, in a prefork child (celery) or in a child forked
per job (rq), so the no-op job writes ``"<i> <epoch s>\\n"`` to a file opened with
``O_APPEND`` (a single short write is atomic there) instead of counting in memory. The path is
in ``PEERS_RUN_LOG``, which the worker processes inherit. Imports the standard library only:
rq's forked children import this module by name to run `record`.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field

ENV = "PEERS_RUN_LOG"
POLL_S = 0.02
_fd: dict[int, int] = {}  # one descriptor per process: a fork re-opens its own


def record(i: int) -> None:
    """The peers' no-op job: note that job `i` ran, and when (epoch seconds, this host)."""
    pid = os.getpid()
    fd = _fd.get(pid)
    if fd is None:
        fd = _fd[pid] = os.open(os.environ[ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"{i} {time.time():.6f}\n".encode())


@dataclass
class Runs:
    """What the log held: each job's first run (epoch s), and how many ran again."""

    first: dict[int, float] = field(default_factory=dict)
    again: int = 0


class RunLog:
    """Read the log as it grows; `clear` it between phases while no worker runs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.runs = Runs()
        self._offset = 0
        self._rest = b""
        os.environ[ENV] = path
        self.clear()

    def clear(self) -> None:
        with open(self.path, "wb"):
            pass
        self.runs = Runs()
        self._offset = 0
        self._rest = b""

    def read(self) -> Runs:
        """Take in the lines written since the last read."""
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        *lines, self._rest = (self._rest + data).split(b"\n")
        for line in lines:
            i, at = line.split()
            if int(i) in self.runs.first:
                self.runs.again += 1
            else:
                self.runs.first[int(i)] = float(at)
        return self.runs

    async def wait(self, n: int, until_s: float, idle_s: float | None = None) -> Runs:
        """Wait until `n` distinct jobs ran or the epoch time `until_s` passed; with `idle_s`,
        also stop once nothing has run for that long (a drain whose rest was dropped)."""
        last_count, last_change = -1, time.time()
        while True:
            runs = self.read()
            now = time.time()
            if len(runs.first) >= n or now >= until_s:
                return runs
            if len(runs.first) != last_count:
                last_count, last_change = len(runs.first), now
            elif idle_s is not None and last_count > 0 and now - last_change > idle_s:
                return runs
            await asyncio.sleep(POLL_S)
