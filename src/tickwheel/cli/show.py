"""How the CLI shows timers, schedules, queues and limits to people (``--json`` prints the API's
JSON instead). Tables fit the console's width: a long field is cut with …, never wrapped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

from tickwheel.cli.app import out
from tickwheel.cli.parse import describe_rate
from tickwheel.model import replace_controls

QUEUE_STATES = ("scheduled", "leased", "paused", "done", "dead")
TEXT_FLOOR = 10
"""The narrowest a free-text column (a URL, an error) is cut to before a name is cut."""
NAME_FLOOR = 12
"""The narrowest a name (an id, a queue, a host) is cut to before anything else is."""


@dataclass(frozen=True, slots=True)
class Column:
    """A column of a listing. When a row is too long, `text` columns (free text) are cut first,
    then `name` ones (ids, queues, hosts), and the others (times, counts) only if that is not
    enough."""

    header: str
    right: bool = False
    text: bool = False
    name: bool = False


def listing(columns: list[Column], rows: list[list[str]], title: str | None = None) -> Table:
    """A table of `rows` that fits the console's width: the longest cells are cut with …,
    free text first, then names, so that times and counts stay whole while they can."""
    cells = [[replace_controls(value) for value in row] for row in rows]
    natural = [
        max([cell_len(column.header), *(cell_len(row[at]) for row in cells)])
        for at, column in enumerate(columns)
    ]
    # box=None pads each column with a space on either side
    widths = _narrowed(natural, columns, (out.width or 100) - 2 * len(columns))
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    for column, width in zip(columns, widths, strict=True):
        justify: JustifyMethod = "right" if column.right else "left"
        table.add_column(column.header, justify=justify, width=width, no_wrap=True)
    for row in cells:
        texts = [Text(value) for value in row]
        for text, width in zip(texts, widths, strict=True):
            text.truncate(width, overflow="ellipsis")
        table.add_row(*texts)
    return table


def _narrowed(natural: list[int], columns: list[Column], budget: int) -> list[int]:
    """Widths within `budget`: the widest free-text column loses a cell at a time down to
    `TEXT_FLOOR`, then the widest name down to `NAME_FLOOR`, then the widest of all down to
    its header."""
    widths = list(natural)
    pairs = list(zip(columns, natural, strict=True))
    for floors in (
        [min(TEXT_FLOOR, width) if column.text else width for column, width in pairs],
        [min(NAME_FLOOR, width) if column.name else width for column, width in pairs],
        [min(max(cell_len(column.header), 3), width) for column, width in pairs],
    ):
        while sum(widths) > budget:
            over = [at for at, width in enumerate(widths) if width > floors[at]]
            if not over:
                break
            widest = max(over, key=lambda at: widths[at])
            widths[widest] -= 1
    return widths


def shown(value: str, *, keep_lines: bool = False) -> Text:
    """`value` as rich text: never read as markup, and without control characters, as the
    service's text may come from a receiver or another user (`replace_controls`)."""
    return Text(replace_controls(value, keep_lines=keep_lines))


def describe_target(timer: dict[str, Any]) -> str:
    callback = timer.get("callback")
    if not callback:
        return f"queue {timer.get('queue')}"
    return f"{callback.get('method')} {callback.get('url')}"


def timers_table(timers: list[dict[str, Any]], title: str) -> Table:
    queues = any(timer["queue"] != "default" for timer in timers)
    errors = any(timer.get("last_error") for timer in timers)
    columns = [
        Column("ID", name=True),
        Column("STATE"),
        Column("DUE"),
        Column("ATTEMPT", right=True),
    ]
    if queues:
        columns.append(Column("QUEUE", name=True))
    columns.append(Column("CALLBACK", text=True))
    if errors:
        columns.append(Column("LAST ERROR", text=True))
    rows = []
    for timer in timers:
        row = [timer["id"], timer["state"], timer["due"], str(timer["attempt"])]
        if queues:
            row.append(timer["queue"])
        row.append(describe_target(timer))
        if errors:
            row.append(timer.get("last_error") or "")
        rows.append(row)
    return listing(columns, rows, title)


def timer_table(timer: dict[str, Any]) -> Table:
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    callback = timer.get("callback") or {}
    retry = timer.get("retry") or {}
    rows = [
        ("id", timer["id"]),
        ("state", timer["state"]),
        ("due", f"{timer['due']} ({timer['due_ms']} ms)"),
        ("attempt", str(timer["attempt"])),
        ("queue", timer["queue"]),
        ("callback", describe_target(timer)),
        ("headers", ", ".join(f"{k}: {v}" for k, v in callback.get("headers", {}).items())),
        ("body", callback.get("body") or ""),
        ("payload", "" if timer.get("payload") is None else json.dumps(timer["payload"])),
        (
            "retry",
            f"{retry.get('max_attempts')} attempts, backoff {retry.get('min_backoff')}"
            f"-{retry.get('max_backoff')} s, timeout {retry.get('timeout')} s",
        ),
        ("created", timer["created"]),
        ("updated", timer["updated"]),
        ("last error", timer.get("last_error") or ""),
    ]
    for name, value in rows:
        if value:
            table.add_row(name, shown(value, keep_lines=True))
    return table


def describe_rule(schedule: dict[str, Any]) -> str:
    if schedule.get("cron") is not None:
        return f"cron {schedule['cron']} ({schedule.get('timezone')})"
    return f"every {schedule.get('every'):g}s"


def schedules_table(schedules: list[dict[str, Any]], title: str) -> Table:
    columns = [
        Column("ID", name=True),
        Column("RULE", text=True),
        Column("NEXT RUN"),
        Column("RUNS", right=True),
        Column("STATE"),
        Column("TARGET", text=True),
    ]
    rows = [
        [
            schedule["id"],
            describe_rule(schedule),
            schedule.get("next_run") or "-",
            str(schedule["runs"]),
            schedule_state(schedule),
            describe_target(schedule),
        ]
        for schedule in schedules
    ]
    return listing(columns, rows, title)


def schedule_state(schedule: dict[str, Any]) -> str:
    if schedule.get("next_run") is None:
        return "ended"
    return "paused" if schedule.get("paused") else "active"


def schedule_table(schedule: dict[str, Any]) -> Table:
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    callback = schedule.get("callback") or {}
    retry = schedule.get("retry") or {}
    limits = [
        f"from {schedule['start']}",
        f"until {schedule['end']}" if schedule.get("end") else "",
        f"at most {schedule['max_runs']} runs" if schedule.get("max_runs") else "",
    ]
    rows = [
        ("id", schedule["id"]),
        ("rule", describe_rule(schedule)),
        ("state", schedule_state(schedule)),
        ("next run", schedule.get("next_run") or ""),
        ("upcoming", "\n".join(schedule.get("upcoming") or ())),
        ("runs", str(schedule["runs"])),
        ("limits", ", ".join(limit for limit in limits if limit)),
        ("jitter", f"{schedule['jitter']:g}s" if schedule.get("jitter") else ""),
        ("misfire", schedule.get("misfire") or ""),
        ("queue", schedule["queue"]),
        ("target", describe_target(schedule)),
        ("headers", ", ".join(f"{k}: {v}" for k, v in callback.get("headers", {}).items())),
        ("body", callback.get("body") or ""),
        ("payload", "" if schedule.get("payload") is None else json.dumps(schedule["payload"])),
        (
            "retry",
            f"{retry.get('max_attempts')} attempts, backoff {retry.get('min_backoff')}"
            f"-{retry.get('max_backoff')} s, timeout {retry.get('timeout')} s",
        ),
        ("created", schedule["created"]),
        ("updated", schedule["updated"]),
    ]
    for name, value in rows:
        if value:
            table.add_row(name, shown(value, keep_lines=True))
    return table


def runs_table(runs: list[dict[str, Any]], title: str) -> Table:
    errors = any(run.get("last_error") for run in runs)
    columns = [
        Column("NOMINAL"),
        Column("TIMER", name=True),
        Column("STATE"),
        Column("ATTEMPT", right=True),
    ]
    if errors:
        columns.append(Column("LAST ERROR", text=True))
    rows = []
    for run in runs:
        # a null state: the store no longer keeps that occurrence's timer
        row = [
            run["nominal"],
            run["timer_id"],
            run["state"] or "expired",
            "-" if run["attempt"] is None else str(run["attempt"]),
        ]
        if errors:
            row.append(run.get("last_error") or "")
        rows.append(row)
    return listing(columns, rows, title)


def describe_limit(limit: dict[str, Any] | None) -> str:
    if not limit:
        return "-"
    parts = []
    if limit.get("rate") is not None:
        burst = limit.get("burst")
        parts.append(describe_rate(limit["rate"]) + ("" if burst is None else f" burst {burst}"))
    if limit.get("concurrency") is not None:
        parts.append(f"{limit['concurrency']} at once")
    return ", ".join(parts)


def limits_table(limits: list[dict[str, Any]], title: str, key: str) -> Table:
    """A table of limits, each named by its `key` field (``host`` or ``queue``)."""
    columns = [
        Column(key.upper(), name=True),
        Column("RATE", right=True),
        Column("BURST", right=True),
        Column("CONCURRENCY", right=True),
    ]
    rows = [
        [
            limit[key],
            "-" if limit.get("rate") is None else describe_rate(limit["rate"]),
            str(limit.get("burst") or "-"),
            str(limit.get("concurrency") or "-"),
        ]
        for limit in limits
    ]
    return listing(columns, rows, title)


def queues_table(queues: list[dict[str, Any]]) -> Table:
    columns = [
        Column("QUEUE", name=True),
        Column(""),
        *(Column(state.upper(), right=True) for state in QUEUE_STATES),
        Column("OLDEST OVERDUE", right=True),
        Column("LIMIT", text=True),
    ]
    rows = []
    for queue in queues:
        counts = queue.get("counts") or {}
        overdue = queue.get("oldest_overdue_s")
        rows.append(
            [
                queue["name"],
                "paused" if queue.get("paused") else "",
                *(str(counts.get(state, 0)) for state in QUEUE_STATES),
                "-" if overdue is None else f"{overdue:.1f}s",
                describe_limit(queue.get("limit")),
            ]
        )
    return listing(columns, rows)
