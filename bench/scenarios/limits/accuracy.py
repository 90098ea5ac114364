"""How closely a shared limit holds its rate over a long run, two workers on one Redis."""

from __future__ import annotations

from collections import Counter

from harness.report import Table, fmt

from scenarios.limits.runs import Fired


def per_second(fired: Fired) -> list[int]:
    """Arrivals in each whole second from the first due time to the last arrival."""
    counts = Counter(int((at - fired.first_due_ms) // 1000) for at in fired.arrivals)
    return [counts.get(n, 0) for n in range(max(counts) + 1)] if counts else []


def most_in_one_second(times_ms: list[float]) -> int:
    """The most arrivals in any window of one second (sliding, not aligned)."""
    times_ms = sorted(times_ms)
    most, first = 0, 0
    for last, at in enumerate(times_ms):
        while at - times_ms[first] >= 1000:
            first += 1
        most = max(most, last - first + 1)
    return most


def accuracy_table(fired: Fired, rate: float, burst: int, offered: float, span_s: float) -> Table:
    """The limiter's accuracy: what went through in the run against what the limit allows."""
    seconds = per_second(fired)
    steady = seconds[1 : int(span_s)]  # the first second carries the burst
    allowed = rate * span_s + burst
    through = sum(1 for at in fired.arrivals if at < fired.first_due_ms + span_s * 1000)
    mean = sum(steady) / len(steady) if steady else 0.0
    table = Table(
        f"Limiter accuracy: rate {rate:g}/s, burst {burst}, offered {offered:g}/s for "
        f"{span_s:g} s, two workers on one Redis",
        ["measure", "value"],
    )
    table.rows = [
        ["timers", fmt(fired.count)],
        ["arrived (all, after the backlog drained)", fmt(len(fired.arrivals))],
        ["arrived early", fmt(fired.early)],
        [f"through in the {span_s:g} s", fmt(through)],
        ["the limit allows (rate x span + burst)", fmt(allowed)],
        ["through / allowed", f"{through / allowed:.4f}"],
        ["most started in any one-second window", fmt(most_in_one_second(fired.started))],
        ["most arrived in any one-second window", fmt(most_in_one_second(fired.arrivals))],
        ["rate + burst", fmt(rate + burst)],
        ["whole seconds 2..span: mean, min, max", f"{mean:.1f}, {min(steady, default=0)}, "
         f"{max(steady, default=0)}"],
        ["sent back to the store to wait there", fmt(fired.deferred)],
    ]  # fmt: skip
    table.notes.append(
        "started: the worker hands the callback to its HTTP client, once granted; arrived: the "
        "receiver read it, later by the connection wait and the delivery, which bunch on a "
        "busy machine"
    )
    return table
