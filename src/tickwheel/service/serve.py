"""Run the service: the API and a worker in one process (`serve`), or workers alone (`work`).

Both share one store object per process, so an API add wakes the in-process worker at once, and
stop gracefully on SIGTERM or SIGINT: the worker hands back what it holds, uvicorn closes its
connections, the store closes, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from tickwheel.engine.settings import WorkerSettings
from tickwheel.runtime.pauses import steady_gc
from tickwheel.service.gate import MAX_REQUEST_HEADER_BYTES
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.urls import redact

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    import uvicorn
    from prometheus_client import CollectorRegistry

logger = logging.getLogger("tickwheel.service")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
API_HURRIED_S = 1.0  # after a second signal, how long the API may still take to shut down


async def serve(
    settings: ServiceSettings,
    *,
    worker_settings: WorkerSettings | None = None,
    stop: asyncio.Event | None = None,
    out: TextIO | None = None,
) -> None:
    """Run the API (and, if `settings.worker`, a worker) until `stop` is set or a stop signal.

    Prints one startup line with the URL actually bound (``--port 0`` picks a free one), the
    store without its password and whether the worker runs.

    Raises:
        OSError: the address cannot be listened on.
        InvalidArgument: the store URL is not one `open_store` knows, or the API would be
            reachable from other machines without a token (`ServiceSettings.check_exposure`).
    """
    settings.check_exposure()  # before anything is opened or bound
    # imported here: `tickwheel ls` and friends should not pay for FastAPI and uvicorn
    import uvicorn
    from prometheus_client import CollectorRegistry

    from tickwheel.engine.http import HttpTarget
    from tickwheel.engine.metrics import Metrics
    from tickwheel.engine.worker import Worker
    from tickwheel.service.api import create_app
    from tickwheel.stores.open import open_store

    stop = stop or asyncio.Event()
    async with contextlib.AsyncExitStack() as cleanup:
        store = open_store(settings.store_url)
        cleanup.push_async_callback(store.close)  # last: after the worker and the API are done
        sock = cleanup.enter_context(_listen(settings.host, settings.port))
        registry = CollectorRegistry()  # the worker counts on it, the app's /metrics renders it
        app = create_app(settings, store, registry=registry)
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            server_header=False,
            # h11 bounds the headers it buffers; httptools reads headers of any size
            http="h11",
            h11_max_incomplete_event_size=MAX_REQUEST_HEADER_BYTES,
        )
        server = _server(config)
        worker = None
        if settings.worker:
            target = HttpTarget(
                signing_secret=settings.signing_secret,
                allow_private_targets=settings.allow_private_targets,
            )
            cleanup.push_async_callback(target.close)
            worker = Worker(store, target, worker_settings, metrics=Metrics(registry))
        hurry = cleanup.enter_context(_stop_on_signals(stop))
        tasks = await cleanup.enter_async_context(_Tasks())
        serving = tasks.start(server.serve(sockets=[sock]), "api")
        working = None if worker is None else tasks.start(worker.run(), "worker")
        # uvicorn offers no event for "started"; the lifespan startup takes a few ms
        while not server.started and not serving.done():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if server.started:
            _say(
                out,
                f"tickwheel serving {_url(sock)} · store {redact(settings.store_url)}"
                f" · worker {'off' if worker is None else 'on'}",
            )
        steady_gc()  # what startup made (FastAPI's app and models among it) is kept for good
        await tasks.wait(stop)  # or until a task ends by itself, say uvicorn failing
        if worker is not None and working is not None:
            worker.stop()
            # held timers are handed back before the API goes away
            await tasks.finish(working, hurry)
        server.should_exit = True
        # even when hurried, uvicorn gets a moment to end its app's lifespan: cancelled, it logs
        # the lifespan's CancelledError as an error with a traceback
        await tasks.finish(serving, hurry, grace_s=API_HURRIED_S)


async def work(
    store_url: str,
    worker_settings: WorkerSettings,
    *,
    signing_secret: str | None = None,
    allow_private_targets: bool = False,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    stop: asyncio.Event | None = None,
    out: TextIO | None = None,
) -> None:
    """Run a worker alone on `store_url` until `stop` is set or a stop signal.

    With `metrics_port` (0 for any free port), its metrics are served on
    ``http://metrics_host:port/metrics`` from a thread, as the API's ``/metrics`` shows them.

    Raises:
        OSError: the metrics port cannot be listened on.
    """
    from prometheus_client import CollectorRegistry

    from tickwheel.engine.http import HttpTarget
    from tickwheel.engine.metrics import Metrics
    from tickwheel.engine.worker import Worker
    from tickwheel.stores.open import open_store

    stop = stop or asyncio.Event()
    async with contextlib.AsyncExitStack() as cleanup:
        store = open_store(store_url)
        cleanup.push_async_callback(store.close)
        registry = CollectorRegistry()
        shown = ""
        if metrics_port is not None:
            exporter = _export(metrics_host, metrics_port, registry)
            cleanup.push_async_callback(_unexport, exporter)
            shown = f" · metrics http://{metrics_host}:{exporter.server_port}/metrics"
        target = HttpTarget(
            signing_secret=signing_secret, allow_private_targets=allow_private_targets
        )
        cleanup.push_async_callback(target.close)
        worker = Worker(store, target, worker_settings, metrics=Metrics(registry))
        hurry = cleanup.enter_context(_stop_on_signals(stop))
        tasks = await cleanup.enter_async_context(_Tasks())
        working = tasks.start(worker.run(), "worker")
        _say(
            out,
            f"tickwheel worker · store {redact(store_url)} · "
            f"queues {', '.join(worker_settings.queues)} · "
            f"concurrency {worker_settings.concurrency}{shown}",
        )
        steady_gc()
        await tasks.wait(stop)
        worker.stop()
        await tasks.finish(working, hurry)


def _export(host: str, port: int, registry: CollectorRegistry) -> WSGIServer:
    """Serve `registry` on ``http://host:port/metrics`` from a thread.

    Raises:
        OSError: the port cannot be listened on, with a message naming it.
    """
    from prometheus_client import start_http_server

    try:
        exporter, _ = start_http_server(port, host, registry)
    except OSError as error:
        raise OSError(error.errno, f"cannot listen on {host}:{port}: {error.strerror}") from None
    return exporter


async def _unexport(exporter: WSGIServer) -> None:
    await asyncio.to_thread(exporter.shutdown)  # waits out its 0.5 s poll
    exporter.server_close()


def run(main: Coroutine[Any, Any, None]) -> None:
    """Run `main` on a new event loop: uvloop's when installed (``uvicorn[standard]`` brings it)."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency via uvicorn[standard]
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main)


def _say(out: TextIO | None, line: str) -> None:
    stream = out or sys.stdout
    print(line, file=stream, flush=True)


def _listen(host: str, port: int) -> socket.socket:
    """Bind the API's socket here rather than in uvicorn, which exits the process when it cannot.

    Raises:
        OSError: the address is taken or not ours, with a message naming it.
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as error:
        raise OSError(error.errno, f"cannot listen on {host}:{port}: {error.strerror}") from None


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _server(config: uvicorn.Config) -> uvicorn.Server:
    """Return a uvicorn server that leaves the stop signals to `serve`.

    uvicorn's own handlers re-raise a caught SIGTERM once it has shut down, which would end the
    process with status -15 before the worker and the store are closed.
    """
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Generator[None, None, None]:
            yield

    return Server(config)


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[asyncio.Event]:
    """Set `stop` on SIGTERM or SIGINT, and the yielded event on a second one (main thread only).

    The second signal means "do not wait": the worker's held timers then come back to a worker
    only when their leases lapse.
    """
    loop = asyncio.get_running_loop()
    hurry = asyncio.Event()
    installed = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, _on_signal, stop, hurry, sig)
        except (ValueError, RuntimeError, NotImplementedError):
            continue  # not the main thread (tests), or no signals on this platform
        installed.append(sig)
    try:
        yield hurry
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
    """The long-running tasks of a process; on leaving the block, unfinished ones are cancelled."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> _Tasks:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
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
