"""A steady stream of timers through a fault, and what became of each.

`Stream` posts timers to the API at a fixed rate, one request at a time per poster, and keeps
the ones the API acknowledged (201) apart from those whose answer was an error or never came
(they may or may not exist). The `Receiver` records every arrival. `FaultReport` then counts,
for the fault window: acknowledged, received, lost (acknowledged, never received), early
(arrived before its ``Tickwheel-Due``), duplicates, and the lateness of timers due during it.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from tickwheel.testing.receiver import Receiver

LATENESS_TARGET_S = 8.0
"""Issue 17's bound: every timer due during a fault arrives within this long of its due time."""


def now_ms() -> float:
    """Wall-clock epoch ms, as the receiver stamps arrivals."""
    return time.time_ns() / 1e6


@dataclass
class Stream:
    """Posts a timer due `delay_s` ahead every 1/`rate` s, spread over `posters` clients.

    `batch` > 1 sends ``POST /v1/timers/batch`` of that many timers instead: a timer of a batch
    counts as acknowledged when the answer came back 200 and its item 201.
    """

    api: str
    receiver: Receiver
    prefix: str
    rate: float = 100.0
    delay_s: float = 1.0
    posters: int = 4
    batch: int = 1
    acknowledged: dict[str, int] = field(default_factory=dict)  # id -> due_ms
    unacknowledged: set[str] = field(default_factory=set)
    failures: Counter[str] = field(default_factory=Counter)
    _sent: int = 0
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self._stopping.clear()
        self._tasks = [asyncio.create_task(self._post_loop(n)) for n in range(self.posters)]

    async def stop(self) -> None:
        self._stopping.set()
        await asyncio.gather(*self._tasks)

    def _timers(self) -> list[dict[str, object]]:
        timers = []
        for _ in range(self.batch):
            self._sent += 1
            timers.append(
                {
                    "id": f"{self.prefix}-{self._sent}",
                    "delay": self.delay_s,
                    "callback": {"url": f"{self.receiver.url}/t", "body": str(self._sent)},
                }
            )
        return timers

    async def _post_loop(self, poster: int) -> None:
        interval_s = self.posters * self.batch / self.rate
        loop = asyncio.get_running_loop()
        next_at = loop.time() + interval_s * poster / self.posters
        async with httpx.AsyncClient(base_url=self.api, timeout=10) as client:
            while not self._stopping.is_set():
                await asyncio.sleep(max(0.0, next_at - loop.time()))
                next_at = max(next_at + interval_s, loop.time())
                timers = self._timers()
                ids = [str(timer["id"]) for timer in timers]
                try:
                    if self.batch == 1:
                        answer = await client.post("/v1/timers", json=timers[0])
                        results = [{"status": answer.status_code, "timer": _json(answer)}]
                    else:
                        answer = await client.post("/v1/timers/batch", json={"timers": timers})
                        body = _json(answer) if answer.status_code == 200 else None
                        results = (body or {}).get("results") or [
                            {"status": answer.status_code}
                        ] * len(ids)
                except httpx.HTTPError as error:
                    self.failures[type(error).__name__] += 1
                    self.unacknowledged.update(ids)
                    await asyncio.sleep(0.05)  # a server that is down: no busy loop
                    continue
                for timer_id, result in zip(ids, results, strict=True):
                    timer = result.get("timer")
                    if result["status"] == 201 and isinstance(timer, dict):
                        self.acknowledged[timer_id] = int(timer["due_ms"])
                    else:
                        self.failures[str(result["status"])] += 1
                        self.unacknowledged.add(timer_id)
                if any(result["status"] != 201 for result in results):
                    await asyncio.sleep(0.05)


def _json(answer: httpx.Response) -> dict[str, object] | None:
    with contextlib.suppress(ValueError):
        body = answer.json()
        return body if isinstance(body, dict) else None
    return None


@dataclass
class FaultReport:
    """What a fault did to the timers of one `Stream`, for timers due in [start_ms, end_ms]."""

    fault: str
    acknowledged: int
    unacknowledged: int
    received: int
    lost: list[str]
    early: list[tuple[str, float]]  # (id, ms early)
    duplicates: dict[str, int]  # id -> arrivals beyond the first
    stale: list[str]  # a timer that arrived with a lower attempt after a higher one, and how
    during: int
    late_max_s: float
    late_p99_s: float
    overall_late_max_s: float
    post_failures: dict[str, int]
    fault_s: float  # from the fault's start until the service was back

    def line(self) -> str:
        """One summary line: the figures issue 17 asks for each fault."""
        return (
            f"{self.fault}: acknowledged {self.acknowledged} (not acknowledged "
            f"{self.unacknowledged}: {dict(sorted(self.post_failures.items()))}), received "
            f"{self.received}, lost {len(self.lost)}, early {len(self.early)}, duplicates "
            f"{sum(self.duplicates.values())}, stale {len(self.stale)}; due during the fault "
            f"{self.during}: lateness max {self.late_max_s:.2f} s, p99 {self.late_p99_s:.2f} s "
            f"(target {LATENESS_TARGET_S:.0f} s); all timers max "
            f"{self.overall_late_max_s:.2f} s; the fault lasted {self.fault_s:.2f} s"
        )

    def assert_nothing_lost_or_early(self) -> None:
        assert self.acknowledged > 0, self.line()
        assert not self.lost, f"lost {self.lost[:10]}: {self.line()}"
        assert not self.early, f"early (id, ms early) {self.early[:10]}: {self.line()}"

    def assert_no_stale_fires(self) -> None:
        """No timer arrived with a lower attempt after a higher one: a worker that lost a
        lease did not fire that timer afterwards."""
        assert not self.stale, (
            f"fired from a stale lease (id: attempts, ms after the first arrival) "
            f"{self.stale[:10]}: {self.line()}"
        )

    def assert_no_duplicates(self) -> None:
        assert not self.duplicates, f"duplicates {list(self.duplicates)[:10]}: {self.line()}"

    def assert_lateness_within_target(self) -> None:
        assert self.during > 0, f"no timer fell due during the fault: {self.line()}"
        assert self.late_max_s <= LATENESS_TARGET_S, self.line()


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


async def settle(
    stream: Stream, receiver: Receiver, timeout_s: float, quiet_s: float = 1.5
) -> None:
    """Wait until every acknowledged timer has arrived (or `timeout_s`), then `quiet_s` more
    for strays: duplicates, and timers whose POST failed yet were stored."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        arrived = {received.timer_id for received in receiver.received}
        if arrived.issuperset(stream.acknowledged):
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(quiet_s)


def report(
    fault: str,
    stream: Stream,
    receiver: Receiver,
    start_ms: float,
    end_ms: float,
) -> FaultReport:
    """Judge the arrivals of `stream`'s timers; the fault lasted from `start_ms` to `end_ms`."""
    mine = [r for r in receiver.received if (r.timer_id or "").startswith(f"{stream.prefix}-")]
    counts = Counter(r.timer_id for r in mine)
    first: dict[str, float] = {}
    highest: dict[str, int] = {}
    stale: list[str] = []
    for received in sorted(mine, key=lambda r: r.at_ms):
        assert received.timer_id is not None
        first.setdefault(received.timer_id, received.at_ms)
        attempt = received.attempt or 0
        if attempt < highest.get(received.timer_id, 0):
            arrivals = sorted((r.at_ms, r.attempt) for r in mine if r.timer_id == received.timer_id)
            how = [f"{n} +{at - arrivals[0][0]:.0f}" for at, n in arrivals]
            stale.append(f"{received.timer_id}: {', '.join(how)}")
        highest[received.timer_id] = max(attempt, highest.get(received.timer_id, 0))
    early = [
        (str(r.timer_id), r.due_ms - r.at_ms)
        for r in mine
        if r.due_ms is None or r.at_ms < r.due_ms
    ]

    def lateness(timer_id: str, due_ms: int) -> float:
        return (first[timer_id] - due_ms) / 1000

    arrived = {tid: due for tid, due in stream.acknowledged.items() if tid in first}
    during = [lateness(tid, due) for tid, due in arrived.items() if start_ms <= due <= end_ms]
    return FaultReport(
        fault=fault,
        acknowledged=len(stream.acknowledged),
        unacknowledged=len(stream.unacknowledged),
        received=len(counts),
        lost=sorted(set(stream.acknowledged) - set(first)),
        early=early,
        duplicates={str(tid): n - 1 for tid, n in counts.items() if n > 1},
        stale=stale,
        during=len(during),
        late_max_s=max(during, default=0.0),
        late_p99_s=_p99(during),
        overall_late_max_s=max((lateness(t, d) for t, d in arrived.items()), default=0.0),
        post_failures=dict(stream.failures),
        fault_s=(end_ms - start_ms) / 1000,
    )


async def scrape(url: str, name: str) -> float:
    """Sum the samples of metric `name` on a Prometheus page (0 when it has none); a `name`
    with labels (``x{a="b"}``) matches that sample only."""
    async with httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(url)).text
    labels = "" if "{" in name else r"(?:\{[^}]*\})?"
    pattern = rf"^{re.escape(name)}{labels} (\S+)$"
    return sum(float(value) for value in re.findall(pattern, text, re.M))


def metrics_url(first_line: str) -> str:
    found = re.search(r"metrics (http://\S+)", first_line)
    assert found, f"no metrics URL in {first_line!r}"
    return found[1]


async def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s} s")
        await asyncio.sleep(0.05)
