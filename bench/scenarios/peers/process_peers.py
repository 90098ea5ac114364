"""The libraries whose worker is a command of its own: celery (its default prefork pool) and
rq (its default worker, a fork per job, with ``--with-scheduler``). Each worker process is
started from the throwaway venv in a session of its own and stopped by its process group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from peer_base import Peer

HERE = Path(__file__).parent
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0


def utc(when_s: float) -> datetime:
    return datetime.fromtimestamp(when_s, tz=UTC)


class ProcessPeer(Peer):
    """A worker run as a command; `ready` says when it takes jobs."""

    def __init__(self, name: str, redis_url: str, postgres_url: str) -> None:
        super().__init__(name, redis_url, postgres_url)
        self.directory = Path(tempfile.mkdtemp(prefix=f"peers-{name}-"))
        self.ready_file = self.directory / "ready"
        os.environ["PEERS_REDIS_URL"] = redis_url
        os.environ["PEERS_READY_FILE"] = str(self.ready_file)
        os.environ["PYTHONPATH"] = str(HERE)
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def _launch(self) -> subprocess.Popen[bytes]:
        """Start the worker command in a session of its own, its output to a log file."""
        self.ready_file.unlink(missing_ok=True)
        with open(self.directory / "worker.log", "ab") as log:
            process = subprocess.Popen(
                self.command(), cwd=HERE, stdout=log, stderr=log, start_new_session=True
            )
        if "PEERS_PGID_DIR" in os.environ:  # for bench/peers.py to kill, should this one die
            Path(os.environ["PEERS_PGID_DIR"], f"{process.pid}.pgid").write_text(str(process.pid))
        return process

    async def start(self) -> None:
        self.process = self._launch()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = (self.directory / "worker.log").read_bytes()[-300:].decode(errors="replace")
                await self.stop()
                raise SystemExit(f"{self.name} worker did not start: {tail}")
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        """SIGTERM its process group (a warm shutdown), SIGKILL after `STOP_TIMEOUT_S`."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(process.wait, STOP_TIMEOUT_S)
        with contextlib.suppress(ProcessLookupError):  # what outlived the warm shutdown
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)

    async def close(self) -> None:
        await self.stop()


class CeleryPeer(ProcessPeer):
    package = "celery"
    settings = (
        f"`celery -A app worker` defaults: prefork, concurrency {os.cpu_count()} "
        "(the CPUs), prefetch multiplier 4, log level WARNING"
    )
    timing = (
        "apply_async(eta=datetime); the worker takes the message at once and holds it "
        "in memory until its eta (its timer)"
    )

    async def open(self) -> None:
        from celery_tasks import app, job

        self.app = app
        self.job = job

    def command(self) -> list[str]:
        return [sys.executable, "-m", "celery", "-A", "celery_tasks", "worker"]

    def ready(self) -> bool:
        return self.ready_file.exists()

    async def enqueue(self, i: int, when_s: float | None) -> None:
        if when_s is None:
            self.job.delay(i)
        else:
            self.job.apply_async(args=(i,), eta=utc(when_s))

    async def close(self) -> None:
        await super().close()
        self.app.close()


class RqPeer(ProcessPeer):
    package = "rq"
    settings = "`rq worker --with-scheduler` defaults: one job at a time, a fork per job"
    timing = (
        "queue.enqueue_at(datetime); the scheduler moves due jobs every 1 s (whole-second scores)"
    )

    async def open(self) -> None:
        from redis import Redis
        from rq import Queue
        from run_log import record

        self.redis: Any = Redis.from_url(self.redis_url)
        self.queue = Queue(connection=self.redis)
        self.record = record

    def command(self) -> list[str]:
        rq = str(Path(sys.executable).parent / "rq")
        return [rq, "worker", "--url", self.redis_url, "--with-scheduler"]

    def ready(self) -> bool:
        return bool(self.redis.scard("rq:workers"))

    async def enqueue(self, i: int, when_s: float | None) -> None:
        if when_s is None:
            self.queue.enqueue(self.record, i)
        else:
            self.queue.enqueue_at(utc(when_s), self.record, i)

    async def close(self) -> None:
        await super().close()
        self.redis.close()


def make(name: str, redis_url: str, postgres_url: str) -> Peer:
    kinds: dict[str, type[Peer]] = {"celery": CeleryPeer, "rq": RqPeer}
    return kinds[name](name, redis_url, postgres_url)
