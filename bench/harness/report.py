"""Tables and progress lines: what the benchmarks print, as text and as Markdown."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

_T0 = time.perf_counter_ns()


@dataclass
class Table:
    """A titled table of string cells with optional notes."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def render_text(table: Table) -> str:
    """Render a table as aligned plain text."""
    cells = [table.headers, *table.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.headers))]

    def line(row: list[str]) -> str:
        parts = [row[0].ljust(widths[0])]
        parts += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    out = [table.title, "=" * len(table.title), line(table.headers), rule]
    out += [line(row) for row in table.rows]
    out += [f"  * {note}" for note in table.notes]
    return "\n".join(out)


def render_markdown(table: Table) -> str:
    """Render a table as GitHub Markdown."""
    out = [f"### {table.title}", ""]
    out.append("| " + " | ".join(table.headers) + " |")
    out.append("|" + "|".join([":--"] + ["--:"] * (len(table.headers) - 1)) + "|")
    out += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in table.rows
    ]
    if table.notes:
        out.append("")
        out += [f"- {note}" for note in table.notes]
    return "\n".join(out)


def markdown(tables: Sequence[Table]) -> str:
    """Render every table as one Markdown text."""
    return "\n\n".join(render_markdown(t) for t in tables) + "\n"


def write_markdown(path: str, tables: Sequence[Table], heading: str = "") -> None:
    """Write every table to `path` as Markdown, under a `# heading` when one is given."""
    with open(path, "w", encoding="utf-8") as f:
        f.write((f"# {heading}\n\n" if heading else "") + markdown(tables))


def emit(table: Table, tables: list[Table]) -> None:
    """Print a table to stdout now and keep it for the Markdown file."""
    tables.append(table)
    print(render_text(table) + "\n", flush=True)


def fmt(value: float | None, digits: int = 0) -> str:
    """Format a number, or a dash for None."""
    return "—" if value is None else f"{value:,.{digits}f}"


def verdict(ok: bool) -> str:
    """Return PASS or FAIL."""
    return "PASS" if ok else "FAIL"


def pct(samples: Sequence[float], q: float) -> float:
    """Return the nearest-rank percentile `q` (0 to 1) of `samples`."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def progress(message: str) -> None:
    """Print one progress line on stderr, stamped with the seconds since the run began."""
    print(f"[{(time.perf_counter_ns() - _T0) / 1e9:6.1f}s] {message}", file=sys.stderr, flush=True)


def finish(tables: list[Table], start_s: float, markdown_to: str | None, heading: str) -> None:
    """End a run: note how long it took and the load at the end under the last table, and
    print the tables as Markdown (``-``) or write them to the path `markdown_to`."""
    summary = (
        f"run took {time.monotonic() - start_s:.0f} s; load average at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(summary, flush=True)
    tables[-1].notes.append(summary)
    if markdown_to == "-":
        print("\n<!-- markdown for docs/benchmarks.md -->\n\n" + markdown(tables), flush=True)
    elif markdown_to:
        write_markdown(markdown_to, tables, heading)
