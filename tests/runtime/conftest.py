"""Fixtures for the runtime drivers: a fake clock, helper threads, and no thread left behind."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tickwheel.runtime import DelayQueue, FakeClock, Scheduler

# how long a helper thread may take to finish once nothing blocks it any more
JOIN_S = 5.0


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a thread running: schedulers and helpers must all be shut down."""
    before = set(threading.enumerate())
    yield
    leaked = []
    for thread in threading.enumerate():
        if thread not in before:
            thread.join(JOIN_S)
            if thread.is_alive():
                leaked.append(thread.name)
    assert not leaked, f"threads still running after the test: {leaked}"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class Worker:
    """A helper thread running one call, keeping its result or exception."""

    def __init__(self, fn: Callable[..., Any], *args: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(fn, args), name="test-worker")
        self.thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            self.result = fn(*args)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout)


@pytest.fixture
def spawn() -> Iterator[Callable[..., Worker]]:
    """Start helper threads; teardown joins them (fixtures built on this one close first)."""
    workers: list[Worker] = []

    def start(fn: Callable[..., Any], *args: Any) -> Worker:
        worker = Worker(fn, *args)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.thread.join(JOIN_S)
    assert not [w for w in workers if w.thread.is_alive()], "a helper thread is stuck"


@pytest.fixture
def make_scheduler(spawn: Callable[..., Worker]) -> Iterator[Callable[..., Scheduler]]:
    """Build schedulers that are closed at teardown, before the helper threads are joined."""
    made: list[Scheduler] = []

    def make(**kwargs: Any) -> Scheduler:
        scheduler = Scheduler(**kwargs)
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        scheduler.close()


@pytest.fixture
def make_queue(spawn: Callable[..., Worker]) -> Iterator[Callable[..., DelayQueue[Any]]]:
    """Build delay queues that are closed at teardown, waking any helper blocked in `get`."""
    made: list[DelayQueue[Any]] = []

    def make(**kwargs: Any) -> DelayQueue[Any]:
        q: DelayQueue[Any] = DelayQueue(**kwargs)
        made.append(q)
        return q

    yield make
    for q in made:
        q.close()
