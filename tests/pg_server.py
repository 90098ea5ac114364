"""`PostgresServer`: a real PostgreSQL cluster made by ``initdb`` in a temp dir, run by ``pg_ctl``
on a free loopback port, for the PostgreSQL store's tests.

As root it runs as the ``postgres`` user (the server refuses root) through ``runuser``, and its
directory is handed to that user. Durability is off (``fsync``, ``synchronous_commit``): the
tests check the store's logic, not the disk, except the fault test, which asks for it on.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

START_TIMEOUT_S = 30.0
BIND_ATTEMPTS = 5
_USER = "postgres"


def pg_binary(name: str) -> str:
    """The path of a PostgreSQL server program: on PATH, or where Debian puts it."""
    found = shutil.which(name)
    if found is None:
        candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
        found = candidates[-1] if candidates else None
    if found is None:
        pytest.fail(
            f"{name} is missing: the PostgreSQL tests start their own server "
            "(apt-get install postgresql, or `make tools`)",
            pytrace=False,
        )
    return found


def _free_port() -> int:
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port: int = probe.getsockname()[1]
        if port != 5432:
            return port
    raise RuntimeError("no free port found")


class PostgresServer:
    """One PostgreSQL cluster on 127.0.0.1 in a temp dir of its own; `kill` and `start` keep
    its data and port; `remove` stops it and deletes the dir. `durable` keeps fsync and
    synchronous commit on.

    The dir is made in the system's temp dir, not pytest's: the ``postgres`` user must reach
    it, and pytest keeps its base dir private to root.
    """

    def __init__(self, *, durable: bool = False) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="tickwheel-pg-"))
        self.data = self.directory / "data"
        self.port = _free_port()
        self._started = False
        self.durable = durable
        self._as_postgres = os.geteuid() == 0
        self._initdb()

    @property
    def url(self) -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        prefix = ["runuser", "-u", _USER, "--"] if self._as_postgres else []
        return subprocess.run(
            [*prefix, *args], capture_output=True, text=True, check=check, timeout=60
        )

    def _initdb(self) -> None:
        if self._as_postgres:
            user = pwd.getpwnam(_USER)
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        self._run(
            pg_binary("initdb"), "-D", str(self.data), "-U", _USER, "--auth=trust",
            "--no-sync", "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        durability = "on" if self.durable else "off"
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.directory}'",
            "fsync": durability,
            "synchronous_commit": durability,
            "full_page_writes": durability,
            "max_connections": "200",
            "shared_buffers": "64MB",
            "log_min_messages": "warning",
        }
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())

    def start(self) -> None:
        """Start it and wait until it answers. A port taken since it was picked (a client's
        ephemeral port, another test's server) means another pick on a first start, and
        waiting for it on a restart, which must keep the port."""
        log = self.directory / "log"
        for _ in range(BIND_ATTEMPTS):
            logged = log.stat().st_size if log.exists() else 0
            started = self._run(
                pg_binary("pg_ctl"), "-D", str(self.data), "-l", str(log),
                "-w", "-t", str(int(START_TIMEOUT_S)), "start", check=False,
            )  # fmt: skip
            if started.returncode == 0:
                break
            this_run = log.read_bytes()[logged:].decode(errors="replace") if log.exists() else ""
            if "could not bind" not in this_run:
                raise RuntimeError(f"pg_ctl start failed: {started.stderr}{this_run}")
            if self._started:
                time.sleep(0.2)
            else:
                self.port = _free_port()
                with (self.data / "postgresql.conf").open("a") as conf:
                    conf.write(f"port = {self.port}\n")  # the last setting of a name wins
        else:
            raise RuntimeError(f"postgres found no free port: {self.log()}")
        self._started = True
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres on {self.port} did not start: {self.log()}")
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the server fast (rolling back open transactions), if it runs."""
        if self.pid() is not None:
            self._run(pg_binary("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        """Stop the server and delete its directory."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends, as a crash would; `start` recovers."""
        pid = self.pid()
        if pid is None:
            return
        children = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        for each in (pid, *map(int, children)):
            try:
                os.kill(each, signal.SIGKILL)
            except ProcessLookupError:
                continue
        deadline = time.monotonic() + 10
        while self._alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        # what a crashed postmaster leaves, which would stop the next one
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        for leftover in self.directory.glob(f".s.PGSQL.{self.port}*"):
            leftover.unlink(missing_ok=True)

    def pid(self) -> int | None:
        path = self.data / "postmaster.pid"
        try:
            pid = int(path.read_text().split()[0])
        except (FileNotFoundError, IndexError, ValueError):
            return None
        return pid if self._alive(pid) else None

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().split()[2] != "Z"
        except FileNotFoundError:
            return False

    def log(self) -> str:
        path = self.directory / "log"
        return path.read_text()[-2000:] if path.exists() else ""

    def _answers(self) -> bool:
        result = self._run(
            pg_binary("pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), check=False
        )
        return result.returncode == 0
