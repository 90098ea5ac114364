"""cProfile results as a table: the functions with the most own time, and time by area."""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

from harness.report import Table

AREAS = (("tickwheel", "/tickwheel/"), ("redis-py", "/redis/"), ("asyncio", "/asyncio/"))


def area_of(path: str) -> str:
    """Name the library a profiled function's file belongs to."""
    if path.startswith("~") or path.startswith("<"):
        return "C builtins"
    return next((name for name, part in AREAS if part in path), "other Python")


def profile_table(title: str, profiler: cProfile.Profile, top: int = 12) -> Table:
    """Tabulate the `top` functions by own time, with notes on areas and tickwheel's functions."""
    stats = pstats.Stats(profiler)
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in entries.values()) or 1.0
    rows = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)[:top]
    table = Table(title, ["function", "calls", "tottime s", "share", "cumtime s"])
    for (path, line, name), (_, calls, tt, ct, _) in rows:
        where = path if path.startswith(("~", "<")) else Path(path).name
        table.rows.append(
            [f"{where}:{line}({name})", f"{calls:,}", f"{tt:.3f}", f"{tt / total:.0%}", f"{ct:.3f}"]
        )
    areas: dict[str, float] = {}
    for (path, _, _), (_, _, tt, _, _) in entries.items():
        areas[area_of(path)] = areas.get(area_of(path), 0.0) + tt
    shares = ", ".join(
        f"{name} {tt / total:.0%}" for name, tt in sorted(areas.items(), key=lambda a: -a[1])
    )
    ours = sorted(
        (
            (ct, f"{name}")
            for (path, _, name), (_, _, _, ct, _) in entries.items()
            if "/tickwheel/" in path
        ),
        reverse=True,
    )[:8]
    table.notes = [
        f"total {total:.2f} s of profiled client time (cProfile slows it); sorted by own time",
        f"own time by area: {shares} (C builtins include epoll waits for Redis)",
        "tickwheel functions by cumulative s: " + ", ".join(f"{n} {ct:.2f}" for ct, n in ours),
    ]
    return table
