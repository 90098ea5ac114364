"""The timers every in-process scenario schedules, and the helpers they share."""

from __future__ import annotations

import dataclasses
import gc
import random
import time
import uuid
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

NS = time.perf_counter_ns
SPAN_MS = 60_000  # add/cancel/fire due times are spread over this span
FAR_MS = 3_600_000  # "far in the future": one hour
LEVEL4_MS = 1 << 24  # 64**4 ms: the wheel's level-4 span
SEED = 20240601

Callback = Callable[[], None]


def fresh() -> None:
    """Free what the previous measurement left behind."""
    gc.collect()


def best(samples: Sequence[float]) -> float | None:
    """Return the fastest sample, or None when there is none."""
    return min(samples) if samples else None


def make_counter() -> tuple[Callback, list[int]]:
    """Return a trivial callback that increments a counter, and the counter's box."""
    box = [0]

    def tick() -> None:
        box[0] += 1

    return tick, box


def aligned_base_ms() -> int:
    """Return now (epoch ms) moved to 1 s after a 64**4 ms boundary, for repeatable cascades."""
    now_ms = time.time_ns() // 1_000_000
    return (now_ms // LEVEL4_MS) * LEVEL4_MS + 1_000


@dataclass
class Workload:
    """N timers: pre-made keys, offsets in ms after the base, due times and a cancel order."""

    n: int
    base_ms: int
    keys: list[Hashable]
    offsets: list[int]
    dues: list[int]
    cancel_keys: list[Hashable]
    cancel_index: list[int]


def make_workload(n: int, base_ms: int, lead_ms: int = 0) -> Workload:
    """Build N keys as a user's look, ``order-<uuid hex>``, with due times uniform over
    (base + lead, base + lead + SPAN_MS]: ints 0..N-1 would hash to neighbouring dict slots,
    which real keys never do (`with_int_keys` gives them, for an info row)."""
    rng = random.Random(SEED + n)
    keys: list[Hashable] = [f"order-{uuid.UUID(int=rng.getrandbits(128)).hex}" for _ in range(n)]
    offsets = [lead_ms + rng.randint(1, SPAN_MS) for _ in range(n)]
    dues = [base_ms + off for off in offsets]
    order = list(range(n))
    rng.shuffle(order)
    return Workload(n, base_ms, keys, offsets, dues, [keys[i] for i in order], order)


def with_int_keys(w: Workload) -> Workload:
    """The same workload keyed by the ints 0..N-1."""
    return dataclasses.replace(w, keys=list(range(w.n)), cancel_keys=list(w.cancel_index))


def far_delays(w: Workload) -> list[float]:
    """Return call_later delays (seconds) an hour out, in the workload's spread."""
    return [FAR_MS / 1000 + off / 1000 for off in w.offsets]
