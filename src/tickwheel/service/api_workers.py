"""`ApiWorkers`: more processes answering the API on the port `serve` listens on.

One process parses, validates and encodes about one create at a time per core: with
``--api-workers N`` the `serve` process starts N - 1 more, each its own interpreter with its own
store connection and no worker, listening on the same address with ``SO_REUSEPORT``, so that
the kernel spreads connections over them all. They stop with `serve`: on its stop signal each
gets SIGTERM and finishes what it answers; one that exits by itself stops `serve` with an error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import multiprocessing
import os
import signal
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess

from tickwheel.service.settings import ServiceSettings

logger = logging.getLogger("tickwheel.service")

START_TIMEOUT_S = 60.0
"""How long an API process may take to import, open its store and listen."""
STOP_TIMEOUT_S = 15.0
"""How long an API process may take to finish its requests once told to stop."""


class ApiWorkers:
    """`count` API processes beside this one, listening on `settings.host` and `port`."""

    def __init__(self, settings: ServiceSettings, port: int, count: int) -> None:
        self.settings = dataclasses.replace(settings, port=port, worker=False, api_workers=1)
        self.count = count
        self.processes: list[BaseProcess] = []
        self._stopping = False

    async def start(self) -> None:
        """Start the processes and wait until each listens.

        Raises:
            OSError: one could not start (its store, its port); the others are stopped.
        """
        context = multiprocessing.get_context("spawn")  # a fresh interpreter, no loop inherited
        readies = []
        for _ in range(self.count):
            ours, theirs = context.Pipe(duplex=False)
            process = context.Process(
                target=run_api_process, args=(self.settings, theirs), daemon=True
            )
            process.start()
            theirs.close()
            self.processes.append(process)
            readies.append(ours)
        try:
            failures = await asyncio.gather(*(asyncio.to_thread(_ready, r) for r in readies))
        finally:
            for ready in readies:
                ready.close()
        failed = [failure for failure in failures if failure is not None]
        if failed:
            await self.stop()
            raise OSError(f"an API process did not start: {failed[0]}")

    async def watch(self) -> None:
        """Return never while the processes run; raise when one of them exits by itself.

        Raises:
            ChildProcessError: an API process exited before `serve` stopped it.
        """
        while not self._stopping:
            ended = await asyncio.to_thread(_ended, self.processes, 1.0)
            if ended is not None and not self._stopping:
                gone = ended
                gone.join()
                raise ChildProcessError(f"API process {gone.pid} exited with {gone.exitcode}")

    async def stop(self) -> None:
        """Send each process SIGTERM and wait for it; one that outlasts `STOP_TIMEOUT_S` is
        killed."""
        self._stopping = True
        for process in self.processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        for process in self.processes:
            await asyncio.to_thread(process.join, STOP_TIMEOUT_S)
            if process.is_alive():
                logger.warning("API process %s did not stop in time: killed", process.pid)
                process.kill()
                await asyncio.to_thread(process.join)


def _ended(processes: list[BaseProcess], timeout_s: float) -> BaseProcess | None:
    """Wait up to `timeout_s` for one of `processes` to exit; return it, or None."""
    ended = wait([process.sentinel for process in processes], timeout_s)
    return next((p for p in processes if p.sentinel in ended), None)


def _ready(ready: Connection) -> str | None:
    """Wait for a started process's word: None once it listens, else why it could not."""
    if not ready.poll(START_TIMEOUT_S):
        return f"not listening after {START_TIMEOUT_S:g} s"
    try:
        word: str | None = ready.recv()
    except EOFError:
        return "it exited before listening"
    return word


def run_api_process(settings: ServiceSettings, ready: Connection) -> None:
    """The API processes' entry point: serve `settings` on its port shared with the others,
    telling `ready` once listening (None) or why it cannot (a message)."""
    from tickwheel.service.serve import run, serve_api

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        run(serve_api(settings, ready))
    except Exception as error:
        if not ready.closed:
            ready.send(str(error))
        raise SystemExit(1) from None
