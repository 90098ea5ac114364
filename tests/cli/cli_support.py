"""Shared parts of the CLI tests that run commands in process against one ``tickwheel serve``
on a SQLite file per test module."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tickwheel.cli import app

Run = Callable[..., Any]
START_TIMEOUT_S = 30.0


def stop_process(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> int:
    """Signal `process` (SIGKILL if it outlasts 30 s), close its stdout, return its status."""
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    if process.stdout is not None:
        process.stdout.close()
    return process.returncode


# ``python -m tickwheel`` as run from a terminal, where Ctrl-C reaches it: a command started in
# the background of a non-interactive shell (``make test &``, as CI may run it) inherits SIGINT
# ignored, Python then installs no KeyboardInterrupt handler, and ``ls --watch`` outlives the
# SIGINT a test sends it
_FROM_A_TERMINAL = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('tickwheel', run_name='__main__', alter_sys=True)"
)


class Process:
    """A ``python -m tickwheel ARGS`` process whose stdout is read line by line."""

    def __init__(self, directory: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.log = directory / f"{args[0]}.log"
        command = [sys.executable, "-c", _FROM_A_TERMINAL, *args]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWHEEL_")} | (env or {})
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=env
            )
        assert self.process.stdout is not None
        os.set_blocking(self.process.stdout.fileno(), False)
        self._read = b""
        self.first_line = self.read_line()

    def read_line(self, timeout_s: float = START_TIMEOUT_S) -> str:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._read:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"no line from {self.process.args}: {self._read!r}\n{self.stderr()}")
            self._read += self.process.stdout.read() or b""
            time.sleep(0.02)
        line, _, self._read = self._read.partition(b"\n")
        return line.decode()

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        return stop_process(self.process, sig)


class Service(Process):
    """A ``python -m tickwheel serve --port 0`` process; `url` is the address it printed."""

    def __init__(self, directory: Path, *args: str, env: dict[str, str] | None = None) -> None:
        super().__init__(directory, "serve", "--port", "0", *args, env=env)
        found = re.search(r"serving (http://\S+)", self.first_line)
        assert found, self.first_line
        self.url = found[1]


def sqlite_service(name: str, *args: str) -> Any:
    """A module-scoped fixture: ``tickwheel serve ARGS`` on a SQLite file in a temp dir `name`."""

    @pytest.fixture(scope="module")
    def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
        directory = tmp_path_factory.mktemp(name)
        started = Service(
            directory, "--store", f"sqlite:///{directory}/t.db", "--allow-private-targets", *args
        )
        try:
            yield started
        finally:
            started.stop()

    return service


def ok_json(result: Any) -> Any:
    """The JSON a command that succeeded printed."""
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def wait_until(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.fixture
def tw(service: Service) -> Run:
    """Run ``tickwheel ARGS --api <service>`` in process (the module's `service`); return the
    click `Result`."""
    runner = CliRunner()

    def run(*args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> Any:
        command = [*args, "--api", service.url]
        return runner.invoke(app, command, env=env, input=input, catch_exceptions=False)

    return run
