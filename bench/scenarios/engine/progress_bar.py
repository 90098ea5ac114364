"""A progress bar for the long phases, refreshed from the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class Bar:
    """Progress of one long phase on stderr: a rich bar on a terminal, else "[done/total]" lines.

    Refreshed by hand from the event loop (no refresh thread competing for the GIL while
    lateness is measured), at most `every_s`; the time spent refreshing is kept for the notes.
    """

    def __init__(self, description: str, total: int, every_s: float = 0.5) -> None:
        self.description = description
        self.total = total
        self.every_s = every_s
        self.refresh_s = 0.0
        self.refreshes = 0
        self._last = 0.0
        console = Console(stderr=True)
        self._progress: Progress | None = None
        if console.is_terminal:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                auto_refresh=False,
                transient=True,
            )
            self._task = self._progress.add_task(description, total=total)
            self._progress.start()
        else:
            self.every_s = max(every_s, 1.0)

    def update(self, done: int, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        t0 = time.perf_counter()
        if self._progress is not None:
            self._progress.update(self._task, completed=done)
            self._progress.refresh()
        else:
            print(f"[{done}/{self.total}] {self.description}", file=sys.stderr, flush=True)
        self.refresh_s += time.perf_counter() - t0
        self.refreshes += 1

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


@contextlib.asynccontextmanager
async def tracking(description: str, total: int, done: Callable[[], int]) -> AsyncIterator[Bar]:
    """Show a `Bar` following `done()` while the block runs."""
    bar = Bar(description, total)

    async def follow() -> None:
        while True:
            bar.update(done())
            await asyncio.sleep(bar.every_s)

    ticker = asyncio.create_task(follow())
    try:
        yield bar
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker
        bar.update(done(), force=True)
        bar.close()
