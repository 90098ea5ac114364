"""What one run of a part measured, and the sizes of the parts."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from typing import Any

from harness.report import fmt, pct

from scenarios.engine.instrument import Calls
from scenarios.engine.progress_bar import Bar
from scenarios.engine.timing import wall_ms


@dataclass
class Late:
    """Lateness samples in store-clock ms (integers) and wall-clock ms (µs precision)."""

    store_ms: array[int] = field(default_factory=lambda: array("q"))
    wall_ms: array[float] = field(default_factory=lambda: array("d"))

    def add(self, store_now_ms: int, due_ms: int) -> None:
        """Record one firing's lateness by both clocks."""
        self.store_ms.append(store_now_ms - due_ms)
        self.wall_ms.append(wall_ms() - due_ms)

    def cells(self) -> list[str]:
        """Return the table cells: p50, p99, max (store ms), p50 and p99 wall ms, how far the
        store clock ran behind this host's (p50 / p99), early firings (by each clock)."""
        if not self.store_ms:
            return ["—"] * 8
        s, w = list(self.store_ms), list(self.wall_ms)
        behind = [wall - store for wall, store in zip(w, s, strict=True)]
        early = sum(1 for x in s if x < 0)
        return [
            fmt(pct(s, 0.50)),
            fmt(pct(s, 0.99)),
            fmt(max(s)),
            f"{pct(w, 0.50):.2f}",
            f"{pct(w, 0.99):.2f}",
            f"{pct(behind, 0.50):.2f} / {pct(behind, 0.99):.2f}",
            f"{early:,}",
            f"{sum(1 for x in w if x < 0):,}",
        ]


@dataclass
class Run:
    """One measured run of a part."""

    label: str
    count: int
    seconds: float = math.nan  # due instant (or first due) → last ack / arrival
    acked: int = 0
    done: int | None = None  # DONE in the store's stats afterwards
    duplicates: int = 0
    late: Late | None = None
    calls: Calls | None = None
    due_ms: float = 0.0
    first_ms: float | None = None  # first delivery, wall
    last_ms: float | None = None  # last delivery, wall
    cpu: dict[str, float] = field(default_factory=dict)  # cores: bench, receiver, redis
    extra: dict[str, Any] = field(default_factory=dict)
    bars: list[Bar] = field(default_factory=list)


@dataclass
class Sizes:
    """Timers per part, and the spans the spread and HTTP parts are due over."""

    burst: int
    spread: int
    spread_s: float
    http: int
    http_s: float


FULL = Sizes(burst=20_000, spread=20_000, spread_s=20.0, http=30_000, http_s=5.0)
QUICK = Sizes(burst=2_000, spread=1_000, spread_s=1.0, http=2_000, http_s=1.0)
