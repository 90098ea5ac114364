"""Run ``tickwheel`` commands as real processes for the CLI and end-to-end tests.

Signals go through a pidfd, never through ``asyncio.subprocess.Process.send_signal``: on Python
3.11 and 3.12 that calls ``Popen.poll()``, a ``waitpid`` that can reap a child which has just
exited before asyncio's child watcher does, and the watcher then reports "Unknown child
process" and exit status 255 instead of the real one (CPython gh-87744). A pidfd names this
very process, so a signal can neither reap it nor reach another process that reused its pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
_URL = re.compile(r"serving (http://\S+)")


class TickwheelProcess:
    """One ``python -m tickwheel ...`` process; its stderr goes to a file shown on failure."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args = args
        self.log = log
        self.first_line = ""
        self.process: asyncio.subprocess.Process | None = None
        self._pidfd: int | None = None

    @property
    def url(self) -> str:
        found = _URL.search(self.first_line)
        assert found, f"no URL in {self.first_line!r}"
        return found[1]

    async def start(self) -> TickwheelProcess:
        """Start it and wait for its startup line (both `serve` and `worker` print one)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")}
        with self.log.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tickwheel",
                *self.args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env=env,
            )
        with contextlib.suppress(ProcessLookupError):  # gone already: nothing to signal
            self._pidfd = os.pidfd_open(self.process.pid)
        assert self.process.stdout is not None
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                line = await self.process.stdout.readline()
        except TimeoutError:
            raise AssertionError(f"{self.args} printed nothing in time:\n{self.stderr()}") from None
        if not line:
            await self.process.wait()
            raise AssertionError(f"{self.args} exited {self.process.returncode}:\n{self.stderr()}")
        self.first_line = line.decode()
        return self

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig` and return the exit status (it must exit by itself in time)."""
        assert self.process is not None
        self.send_signal(sig)
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.process.wait()
        except TimeoutError:
            self.kill()
            raise AssertionError(f"{self.args} ignored signal {sig}:\n{self.stderr()}") from None
        assert self.process.returncode is not None
        return self.process.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the process unless it has exited (an exited one is left to the watcher)."""
        if self._pidfd is not None and self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Release the pidfd (the process itself is waited for by its owner)."""
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            os.close(pidfd)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


class Processes:
    """Starts tickwheel processes and, whatever happens, kills the ones still running."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[TickwheelProcess] = []

    async def start(self, *args: str) -> TickwheelProcess:
        log = self.directory / f"process-{len(self.started)}-{args[0]}.log"
        process = TickwheelProcess(list(args), log)
        self.started.append(process)
        return await process.start()

    async def close(self) -> None:
        for process in self.started:
            process.kill()
        for process in self.started:
            if process.process is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(10):
                        # to the end of its stdout too: asyncio closes a child's transports
                        # once it has both its exit and its pipe's end, and transports left
                        # open when the loop closes warn (an error here) when collected
                        await process.process.communicate()
            process.close()


@contextlib.asynccontextmanager
async def processes(directory: Path) -> AsyncIterator[Processes]:
    started = Processes(directory)
    try:
        yield started
    finally:
        await started.close()
