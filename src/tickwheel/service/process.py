"""`Process`: what the service's processes share, from the store they open to the signal
that stops them.

A stop signal (SIGTERM or SIGINT) stops a process gracefully; a second one hurries it: what
still runs is cancelled, and the worker's held timers return only when their leases lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from tickwheel.engine.changes import ChangeFeed
from tickwheel.engine.settings import WorkerSettings
from tickwheel.runtime.pauses import steady_gc

if TYPE_CHECKING:
    from tickwheel.engine.worker import Worker
    from tickwheel.stores.base import StoreSettings

logger = logging.getLogger("tickwheel.service")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Process:
    """What `serve` and `work` share: one store, one metrics registry, at most one worker firing
    HTTP callbacks, the stop signals, and the tasks that run until one arrives.

    One store object per process lets an API add wake the worker at once; one registry lets the
    API's ``/metrics`` show the worker's counts. Leaving cancels the tasks still running, then
    closes in reverse order what was opened: the worker's HTTP target, then the store, last.
    """

    def __init__(
        self, store_url: str, stop: asyncio.Event, store_settings: StoreSettings | None = None
    ) -> None:
        self.store_url = store_url
        self.store_settings = store_settings
        self.stop = stop
        self.cleanup = contextlib.AsyncExitStack()
        self.worker: Worker | None = None
        self._tasks = _Tasks()
        self._hurry = asyncio.Event()
        self._signals = False
        self._working: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Process:
        from prometheus_client import CollectorRegistry

        from tickwheel.service.queue_metrics import QueueGauges
        from tickwheel.stores.open import open_store

        self.store = open_store(self.store_url, self.store_settings)
        self.cleanup.push_async_callback(self.store.close)
        self.registry = CollectorRegistry()
        self.changes = ChangeFeed()
        self.queue_gauges = QueueGauges(self.store)
        self.registry.register(self.queue_gauges)
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        try:
            await self._tasks.cancel()
        finally:
            await self.cleanup.__aexit__(*exc_info)

    def add_worker(
        self,
        settings: WorkerSettings | None,
        *,
        signing_secret: str | None,
        allow_private_targets: bool,
    ) -> Worker:
        """Build the worker that fires the store's timers over HTTP; `start_worker` runs it."""
        from tickwheel.callbacks.http import HttpTarget
        from tickwheel.callbacks.settings import HttpSettings
        from tickwheel.engine.metrics import Metrics
        from tickwheel.engine.worker import Worker

        target = HttpTarget(
            HttpSettings(signing_secret=signing_secret, allow_private_targets=allow_private_targets)
        )
        self.cleanup.push_async_callback(target.close)
        metrics = Metrics(self.registry)
        metrics.changes = self.changes  # what /v1/events streams
        self.worker = Worker(self.store, target, settings, metrics=metrics)
        return self.worker

    def start(self, coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run `coroutine` as a task of the process; the first one installs the stop signals."""
        if not self._signals:
            self.cleanup.enter_context(_stop_on_signals(self.stop, self._hurry))
            self._signals = True
        return self._tasks.start(coroutine, name)

    def watch_queues(self) -> None:
        """Keep the per-queue gauges on the registry up to date, from the store."""
        self.start(self.queue_gauges.run(), "queue-gauges")

    def start_worker(self) -> None:
        """Run the worker, if there is one."""
        if self.worker is not None:
            self._working = self.start(self.worker.run(), "worker")

    async def run(self, line: str | None, out: TextIO | None) -> None:
        """Print the startup `line`, run until a stop, then let the worker hand back its timers.

        Raises whatever error ended a task before the stop.
        """
        if line is not None:
            _say(out, line)
        steady_gc()  # what startup made (FastAPI's app and models among it) is kept for good
        await self._tasks.wait(self.stop)  # or until a task ends by itself, say uvicorn failing
        if self.worker is not None and self._working is not None:
            self.worker.stop()
            await self.finish(self._working)

    async def finish(self, task: asyncio.Task[None], *, grace_s: float = 0.0) -> None:
        """Wait for `task` to end; after a second stop signal, give it `grace_s`, then cancel it."""
        await self._tasks.finish(task, self._hurry, grace_s=grace_s)


def _say(out: TextIO | None, line: str) -> None:
    stream = out or sys.stdout
    print(line, file=stream, flush=True)


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event, hurry: asyncio.Event) -> Iterator[None]:
    """Set `stop` on SIGTERM or SIGINT, and `hurry` on a second one (main thread only).

    The second signal means "do not wait": the worker's held timers then come back to a worker
    only when their leases lapse.
    """
    loop = asyncio.get_running_loop()
    installed = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, _on_signal, stop, hurry, sig)
        except (ValueError, RuntimeError, NotImplementedError):
            continue  # not the main thread (tests), or no signals on this platform
        installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def _on_signal(stop: asyncio.Event, hurry: asyncio.Event, sig: signal.Signals) -> None:
    if not stop.is_set():
        logger.info("%s: stopping (send it again to stop at once)", sig.name)
        stop.set()
    elif not hurry.is_set():
        logger.warning(
            "%s again: stopping at once; held timers return when their leases lapse", sig.name
        )
        hurry.set()


class _Tasks:
    """The long-running tasks of a process."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    async def cancel(self) -> None:
        """Cancel the unfinished tasks and wait for them to end."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def start(self, coroutine: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.append(task)
        return task

    async def wait(self, stop: asyncio.Event) -> None:
        """Return when `stop` is set or any task has ended; a task's error is raised here."""
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait([stopping, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        for task in self._tasks:
            if task.done():
                task.result()  # raises the task's error, if it failed

    async def finish(
        self, task: asyncio.Task[None], hurry: asyncio.Event, *, grace_s: float = 0.0
    ) -> None:
        """Wait for `task` to end; once `hurry` is set, give it `grace_s` more, then cancel it.
        Its error is raised here."""
        hurrying = asyncio.create_task(hurry.wait())
        try:
            await asyncio.wait([task, hurrying], return_when=asyncio.FIRST_COMPLETED)
        finally:
            hurrying.cancel()
        if not task.done() and grace_s > 0:
            await asyncio.wait([task], timeout=grace_s)
        if not task.done():
            task.cancel()
            await asyncio.wait([task])
        if not task.cancelled():
            task.result()
