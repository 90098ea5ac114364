"""A private ``redis-server`` for one benchmark run.

The server listens on a free loopback port in a temp dir, without persistence, and is stopped
by its pid: a benchmark never talks to another Redis.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from harness.machine import version_of
from harness.report import progress

START_TIMEOUT_S = 10.0


def free_port() -> int:
    """Return a loopback port nobody listens on (never 6379)."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port != 6379:
            return port
    raise RuntimeError("no free port found")


class OwnRedis:
    """A private ``redis-server`` on 127.0.0.1, no persistence, stopped by its pid."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise SystemExit("redis-server is not on PATH (apt-get install redis-server)")
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def version(self) -> str:
        """Return the server's version and allocator, from ``redis-server --version``."""
        out = subprocess.run(
            [self.binary, "--version"], capture_output=True, text=True, check=False
        ).stdout
        fields = dict(part.split("=", 1) for part in out.split() if "=" in part)
        return f"{fields.get('v', out.strip())} (malloc={fields.get('malloc', '?')})"

    def rows(self) -> list[list[str]]:
        """Describe the server and its Python client, as rows of the machine table."""
        return [
            ["redis-server", f"{self.version()} on 127.0.0.1:{self.port} (own, no persistence)"],
            ["redis-py / hiredis", f"{version_of('redis')} / {version_of('hiredis')}"],
        ]

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.directory),
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server on port {self.port} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop the server by its pid (SIGTERM, then SIGKILL after 10 s)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=5)
        if process.stderr is not None:
            process.stderr.close()

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(64).startswith(b"+PONG")
        except OSError:
            return False


@contextlib.contextmanager
def private_redis(prefix: str) -> Iterator[OwnRedis]:
    """Run an `OwnRedis` in a new temp dir named `prefix`... for the block, then stop it.

    SIGTERM leaves the block as an exception does, so the server is stopped either way; after
    Ctrl-C the process exits with status 130 once the server is stopped and its dir removed.
    """

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    server = OwnRedis(directory)
    interrupted = False
    try:
        server.start()
        progress(f"redis-server pid {server.pid} on port {server.port}, dir {directory}")
        yield server
    except KeyboardInterrupt:
        interrupted = True
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    if interrupted:
        progress("interrupted; our redis-server is stopped and its temp dir removed")
        raise SystemExit(130)
