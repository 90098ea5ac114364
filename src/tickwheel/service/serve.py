"""Run the service: the API and a worker in one process (`serve`), or workers alone (`work`).

Both are a `Process` (process.py: the store, the metrics, the worker, the signals) with one
store object, so an API add wakes the in-process worker at once, and stop gracefully on SIGTERM
or SIGINT: the worker hands back what it holds, uvicorn closes its connections, the store
closes, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from collections.abc import Callable, Coroutine, Generator
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, TextIO

from tickwheel.engine.settings import WorkerSettings
from tickwheel.errors import StoreUnavailable
from tickwheel.service.api_workers import ApiWorkers
from tickwheel.service.process import Process
from tickwheel.service.settings import ServiceSettings
from tickwheel.stores.base import Store, StoreSettings
from tickwheel.stores.redaction import redact

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    import uvicorn
    from prometheus_client import CollectorRegistry


logger = logging.getLogger("tickwheel.service")

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
    store without its password, whether the worker runs and the names of a tokens file's tenants.

    Raises:
        OSError: the address cannot be listened on.
        InvalidArgument: the store URL is not one `open_store` knows, or the API would be
            reachable from other machines without a token (`ServiceSettings.check_exposure`).
    """
    settings.check_exposure()  # before anything is opened or bound
    stopping = stop or asyncio.Event()
    async with Process(settings.store_url, stopping, settings.store_settings()) as process:
        shared = settings.api_workers > 1
        sock = process.cleanup.enter_context(_listen(settings.host, settings.port, shared))
        if settings.worker:
            process.add_worker(
                worker_settings,
                signing_secret=settings.signing_secret,
                allow_private_targets=settings.allow_private_targets,
            )
        await _check_store(process.store)
        server, serving = _start_api(process, settings, sock)
        process.watch_queues()
        process.start_worker()
        await _started(server, serving)
        line = (
            f"tickwheel serving {_url(sock)} · store {redact(settings.store_url)}"
            f" · worker {'off' if process.worker is None else 'on'}"
        )
        if process.worker is not None:
            line += f" · {_queues(process.worker.settings)}"
        if settings.tenants is not None:  # the names only: they are what the metrics label
            line += f" · tokens {', '.join(sorted(t.name for t in settings.tenants))}"
        if shared and server.started:
            others = ApiWorkers(
                settings, sock.getsockname()[1], settings.api_workers - 1, run_api_process
            )
            process.cleanup.push_async_callback(others.stop)
            await others.start()
            process.start(others.watch(), "api-workers")
            line += f" · api workers {settings.api_workers}"
        # held timers are handed back before the API goes away
        await process.run(line if server.started else None, out)
        process.changes.close()  # event streams end, or uvicorn would wait on them
        server.should_exit = True
        # even when hurried, uvicorn gets a moment to end its app's lifespan: cancelled, it logs
        # the lifespan's CancelledError as an error with a traceback
        await process.finish(serving, grace_s=API_HURRIED_S)


async def serve_api(settings: ServiceSettings, ready: Connection) -> None:
    """Answer the API alone on `settings.port`, which `serve` and its other API processes
    listen on too (``SO_REUSEPORT``), until a stop signal; tell `ready` once listening.

    Raises:
        OSError: the address cannot be listened on.
    """
    async with Process(settings.store_url, asyncio.Event(), settings.store_settings()) as process:
        sock = process.cleanup.enter_context(_listen(settings.host, settings.port, True))
        server, serving = _start_api(process, settings, sock)
        process.watch_queues()
        await _started(server, serving)
        if server.started:
            ready.send(None)
            ready.close()
        await process.run(None, None)
        process.changes.close()
        server.should_exit = True
        await process.finish(serving, grace_s=API_HURRIED_S)


def run_api_process(settings: ServiceSettings, ready: Connection) -> None:
    """The API processes' entry point: serve `settings` on its port shared with the others,
    telling `ready` once listening (None) or why it cannot (a message)."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        run(serve_api(settings, ready))
    except Exception as error:
        if not ready.closed:
            ready.send(str(error))
        raise SystemExit(1) from None


def _start_api(
    process: Process, settings: ServiceSettings, sock: socket.socket
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    """Start uvicorn on `sock` with the app over the process's store and registry."""
    # imported here: `tickwheel ls` and friends should not pay for FastAPI and uvicorn
    import uvicorn

    from tickwheel.service.api import create_app
    from tickwheel.service.protocol import BoundedHttpTools

    app = create_app(settings, process.store, registry=process.registry, changes=process.changes)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        http=BoundedHttpTools,  # httptools' parsing, the request head bounded
    )
    server = _server(config)
    return server, process.start(server.serve(sockets=[sock]), "api")


async def _started(server: uvicorn.Server, serving: asyncio.Task[None]) -> None:
    """Wait until uvicorn listens, or has ended (its error comes out of `Process.run`)."""
    # uvicorn offers no event for "started"; the lifespan startup takes a few ms
    while not server.started and not serving.done():  # noqa: ASYNC110
        await asyncio.sleep(0.01)


async def work(
    store_url: str,
    worker_settings: WorkerSettings,
    *,
    signing_secret: str | None = None,
    allow_private_targets: bool = False,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    store_settings: StoreSettings | None = None,
    stop: asyncio.Event | None = None,
    out: TextIO | None = None,
) -> None:
    """Run a worker alone on `store_url` until `stop` is set or a stop signal.

    With `metrics_port` (0 for any free port), its metrics are served on
    ``http://metrics_host:port/metrics`` from a thread, as the API's ``/metrics`` shows them.

    Raises:
        OSError: the metrics port cannot be listened on.
    """
    async with Process(store_url, stop or asyncio.Event(), store_settings) as process:
        await _check_store(process.store)
        shown = ""
        if metrics_port is not None:
            exporter = _export(metrics_host, metrics_port, process.registry)
            process.cleanup.push_async_callback(_unexport, exporter)
            shown = f" · metrics http://{metrics_host}:{exporter.server_port}/metrics"
        process.add_worker(
            worker_settings,
            signing_secret=signing_secret,
            allow_private_targets=allow_private_targets,
        )
        process.watch_queues()
        process.start_worker()
        line = (
            f"tickwheel worker · store {redact(store_url)} · "
            f"{_queues(worker_settings)} · "
            f"concurrency {worker_settings.concurrency}{shown}"
        )
        await process.run(line, out)


async def _check_store(store: Store) -> None:
    """Before serving, read a Redis prefix's shard count, so that a ``?shards=`` the prefix was
    not written in stops the process with its one message, not in each task; and say in the log
    when a store that waits for a replica (``durability=replicated``) has none.

    A store down now is no error (the worker waits for it), nor is a missing replica: one
    restarting or resyncing as the service starts would otherwise stop it, and each write it
    cannot confirm answers 507 ``not_replicated`` anyway.
    """
    if "tickwheel.stores.redis" not in sys.modules:  # no Redis store opened: skip redis-py
        return
    from tickwheel.stores.redis import RedisStore

    if not isinstance(store, RedisStore):
        return
    with contextlib.suppress(StoreUnavailable):
        await store.sync_clock()
    if store.durability is None:
        return
    try:
        replicas = await store.replicas()
    except StoreUnavailable as error:
        logger.warning("durability=replicated: could not count the store's replicas: %s", error)
        return
    if replicas == 0:
        logger.warning(
            "durability=replicated, but the Redis master has no replica: every create and "
            "change waits %d ms and answers 507 not_replicated until one connects",
            store.durability.wait_ms,
        )
    else:
        logger.info("durability=replicated: %d replica(s) connected", replicas)


def _queues(settings: WorkerSettings) -> str:
    """The startup line's words for the queues a worker fires."""
    return "queues " + (", ".join(settings.queues) if settings.queues else "all")


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


def _listen(host: str, port: int, shared: bool = False) -> socket.socket:
    """Bind the API's socket here rather than in uvicorn, which exits the process when it cannot;
    `shared` lets other API processes of this user listen on the same address.

    Raises:
        OSError: the address is taken or not ours, with a message naming it.
    """
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048, reuse_port=shared)
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
