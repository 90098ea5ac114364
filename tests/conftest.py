"""Session fixtures: real ``redis-server`` processes, standalone and a three-master Cluster.

Each server runs on a free loopback port in a temp dir, without persistence, and is stopped by
its pid. Nothing starts unless a test asks for it. Tests share a server and keep apart by key
prefix, never by FLUSHALL.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from budget import CI_PROFILE
from hypothesis import settings
from pg_server import PostgresServer

if TYPE_CHECKING:
    import redis

START_TIMEOUT_S = 10.0
BIND_ATTEMPTS = 5

# `make test` runs `--hypothesis-profile=ci`: each property test's CI example count
# (tests/budget.py), no per-example deadline (two workers a core make timings noisy), and a
# failure prints the blob that replays it.
settings.register_profile(CI_PROFILE, deadline=None, print_blob=True)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (as `make test` runs) starts two workers per usable core: the suite spends
    most of its time waiting on servers, processes and timers, not computing (serial, 30% of
    one core). ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * len(os.sched_getaffinity(0))


def pytest_configure(config: pytest.Config) -> None:
    """typer's `CliRunner` builds the app's click command again on every invoke (70 ms of CPU a
    command line run in process); build each app's once a process, as ``tickwheel`` does."""
    from typer import testing

    testing._get_command = functools.cache(testing._get_command)


# what a module that marks a test `latency` says in its own text (a decorator or `pytestmark`)
LATENCY_MARK = "mark.latency"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m latency`` (`make test`'s second part) import only the test modules that name
    the mark: each worker importing all of them cost 12 s of CPU to keep a tenth."""
    if config.getoption("markexpr") != "latency" or not collection_path.name.startswith("test_"):
        return None
    if collection_path.suffix != ".py" or LATENCY_MARK in collection_path.read_text("utf-8"):
        return None
    return True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test marked `latency` whose module does not name the mark in its text: the
    ``-m latency`` part would never import it (`pytest_ignore_collect`), so it would not run."""
    named: dict[Path, bool] = {}
    for item in items:
        if item.get_closest_marker("latency") is None:
            continue
        if item.path not in named:
            named[item.path] = LATENCY_MARK in item.path.read_text("utf-8")
        if not named[item.path]:
            raise pytest.UsageError(f"{item.nodeid} is marked latency without {LATENCY_MARK!r}")


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH: the Redis tests start real servers "
            "(install Redis >= 7, e.g. `apt-get install redis-server`)",
            pytrace=False,
        )
    return path


def free_port(*, cluster: bool = False) -> int:
    """Return a loopback port nobody listens on (and, for Cluster, its bus port + 10000)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port == 6379 or (cluster and port > 55_535):
            continue
        if not cluster or _is_free(port + 10_000):
            return port
    raise RuntimeError("no free port pair found")


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1; `restart` keeps its port (and, with
    `appendonly`, its data). `options` are more ``--name value`` arguments for the server."""

    def __init__(
        self,
        directory: Path,
        *,
        cluster: bool = False,
        appendonly: bool = False,
        appendfsync: str = "always",
        options: Sequence[str] = (),
    ) -> None:
        self.directory = directory
        self.cluster = cluster
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.options = tuple(options)
        self.port = free_port(cluster=cluster)
        self._process: subprocess.Popen[bytes] | None = None
        self._started = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start it and wait until it answers. A port taken since it was picked (a client's
        ephemeral port, another test's server) means another pick on a first start, and
        waiting for it on a restart, which must keep the port."""
        for _ in range(BIND_ATTEMPTS):
            if self._launch():
                self._started = True
                return
            if self._started:
                time.sleep(0.2)
            else:
                self.port = free_port(cluster=self.cluster)
        raise RuntimeError(f"redis-server found no free port: {self.log()}")

    def _launch(self) -> bool:
        """Run the server; False if it could not bind its ports, True once it answers."""
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            _binary("redis-server"),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--dir", str(self.directory),
            "--logfile", str(self.directory / "redis.log"),
            *self.options,
        ]  # fmt: skip
        if self.cluster:
            nodes = self.directory / "nodes.conf"
            nodes.unlink(missing_ok=True)
            args += ["--cluster-enabled", "yes", "--cluster-config-file", str(nodes)]
        log_path = self.directory / "redis.log"
        logged = log_path.stat().st_size if log_path.exists() else 0
        process = self._process = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if process.poll() is not None:
                self._process = None
                assert process.stderr is not None
                with process.stderr:
                    error = process.stderr.read().decode()
                this_run = log_path.read_bytes()[logged:].decode(errors="replace")
                if "Address already in use" in this_run:
                    return False
                raise RuntimeError(f"redis-server on {self.port} exited: {error}{this_run}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server on {self.port} did not start: {self.log()}")
            time.sleep(0.01)
        return True

    def stop(self) -> None:
        """Terminate the server by pid and wait for it (killing it if it lingers)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=5)
        if process.stderr is not None:
            process.stderr.close()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send `sig` (a crash by default) and wait for the process to end; `start` again
        brings it back on the same port."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, sig)
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self) -> redis.Redis:
        """A synchronous client for inspecting the server (INFO, CLUSTER, KEYS)."""
        import redis  # only the Redis tests need the client library

        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)

    def log(self) -> str:
        path = self.directory / "redis.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64).startswith(b"+PONG")
        except OSError:
            return False


class RedisClusterProcesses:
    """Three masters (and `replicas` per master), all 16384 slots assigned by ``redis-cli
    --cluster create``; `options` go to every node."""

    def __init__(
        self, directory: Path, masters: int = 3, *, replicas: int = 0, options: Sequence[str] = ()
    ) -> None:
        self.replicas = replicas
        self.nodes = [
            RedisServer(directory / f"node{n}", cluster=True, options=options)
            for n in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}"

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        subprocess.run(
            [
                _binary("redis-cli"),
                "--cluster", "create",
                *(f"127.0.0.1:{node.port}" for node in self.nodes),
                "--cluster-replicas", str(self.replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(self._ok(node) for node in self.nodes):
            if time.monotonic() > deadline:
                raise RuntimeError("cluster did not reach cluster_state:ok")
            time.sleep(0.05)
        while not all(self._synced(node) for node in self.nodes):
            if time.monotonic() > deadline + START_TIMEOUT_S:
                raise RuntimeError("the replicas did not sync with their masters")
            time.sleep(0.05)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    @staticmethod
    def _ok(node: RedisServer) -> bool:
        with node.client() as client:
            info = client.execute_command("CLUSTER", "INFO")
        return "cluster_state:ok" in str(info)

    @staticmethod
    def _synced(node: RedisServer) -> bool:
        with node.client() as client:
            info = client.info("replication")
        return info["role"] == "master" or info.get("master_link_status") == "up"


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A standalone Redis shared by the whole session."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcesses]:
    """A three-master Redis Cluster shared by the whole session."""
    cluster = RedisClusterProcesses(tmp_path_factory.mktemp("redis-cluster"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def start_redis(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., RedisServer]]:
    """Start private standalone servers (to stop or restart in a test); all stopped after it.

    `start(appendonly=True)` keeps an AOF fsynced on every write (`appendfsync` says otherwise),
    so a restart keeps the data; `options` are more server arguments.
    """
    started: list[RedisServer] = []

    def start(
        *, appendonly: bool = False, appendfsync: str = "always", options: Sequence[str] = ()
    ) -> RedisServer:
        server = RedisServer(
            tmp_path_factory.mktemp("redis-own"),
            appendonly=appendonly,
            appendfsync=appendfsync,
            options=options,
        )
        started.append(server)
        server.start()
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


@pytest.fixture
def start_redis_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., RedisClusterProcesses]]:
    """Start private Clusters (`replicas` per master, `options` for every node) to crash
    nodes of; all stopped after the test."""
    started: list[RedisClusterProcesses] = []

    def start(*, replicas: int = 0, options: Sequence[str] = ()) -> RedisClusterProcesses:
        cluster = RedisClusterProcesses(
            tmp_path_factory.mktemp("redis-cluster-own"), replicas=replicas, options=options
        )
        started.append(cluster)
        cluster.start()
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop()


WORKER_MAIN = Path(__file__).parent / "engine" / "worker_main.py"


@pytest.fixture
def worker_process() -> Iterator[Callable[[str, int], subprocess.Popen[str]]]:
    """Start worker processes (tests/engine/worker_main.py) on a store URL with a lease in ms;
    any still running are killed after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(store_url: str, lease_ms: int) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, str(WORKER_MAIN), store_url, str(lease_ms)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        )
        started.append(process)
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "worker ready"
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL cluster shared by the session (one per xdist worker); tests keep apart by
    schema."""
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()
