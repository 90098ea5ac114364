"""How the CLI shows timers, schedules, queues and limits: tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.table import Table
from rich.text import Text

from tickwheel.cli.parse import describe_rate
from tickwheel.model import replace_controls

QUEUE_STATES = ("scheduled", "leased", "paused", "done", "dead")


def shown(value: str, *, keep_lines: bool = False) -> Text:
    """`value` as rich text: never read as markup, and without control characters, as the
    service's text may come from a receiver or another user (`replace_controls`)."""
    return Text(replace_controls(value, keep_lines=keep_lines))


def print_json(body: Any) -> None:
    sys.stdout.write(json.dumps(body, indent=2) + "\n")


def print_line(body: Any) -> None:
    """Write `body` as one line of JSON and flush it: a reader of a stream sees it at once."""
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def describe_target(timer: dict[str, Any]) -> str:
    callback = timer.get("callback")
    if not callback:
        return f"queue {timer.get('queue')}"
    return f"{callback.get('method')} {callback.get('url')}"


def timers_table(timers: list[dict[str, Any]], title: str) -> Table:
    queues = any(timer["queue"] != "default" for timer in timers)
    errors = any(timer.get("last_error") for timer in timers)
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    table.add_column("ID", no_wrap=True)
    table.add_column("STATE", no_wrap=True)
    table.add_column("DUE", no_wrap=True)
    table.add_column("ATTEMPT", justify="right", no_wrap=True)
    if queues:
        table.add_column("QUEUE", no_wrap=True)
    table.add_column("CALLBACK", overflow="fold", min_width=20)
    if errors:
        table.add_column("LAST ERROR", overflow="fold", min_width=20)
    for timer in timers:
        row = [timer["id"], timer["state"], timer["due"], str(timer["attempt"])]
        if queues:
            row.append(timer["queue"])
        row.append(describe_target(timer))
        if errors:
            row.append(timer.get("last_error") or "")
        table.add_row(*map(shown, row))
    return table


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
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    table.add_column("ID", no_wrap=True)
    table.add_column("RULE", overflow="fold")
    table.add_column("NEXT RUN", no_wrap=True)
    table.add_column("RUNS", justify="right", no_wrap=True)
    table.add_column("STATE", no_wrap=True)
    table.add_column("TARGET", overflow="fold", min_width=20)
    for schedule in schedules:
        row = [
            schedule["id"],
            describe_rule(schedule),
            schedule.get("next_run") or "-",
            str(schedule["runs"]),
            schedule_state(schedule),
            describe_target(schedule),
        ]
        table.add_row(*map(shown, row))
    return table


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
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    table.add_column("NOMINAL", no_wrap=True)
    table.add_column("TIMER", no_wrap=True)
    table.add_column("STATE", no_wrap=True)
    table.add_column("ATTEMPT", justify="right", no_wrap=True)
    if errors:
        table.add_column("LAST ERROR", overflow="fold", min_width=20)
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
        table.add_row(*map(shown, row))
    return table


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
    table = Table(title=title, title_justify="left", box=None, header_style="bold")
    table.add_column(key.upper(), no_wrap=True)
    table.add_column("RATE", justify="right", no_wrap=True)
    table.add_column("BURST", justify="right", no_wrap=True)
    table.add_column("CONCURRENCY", justify="right", no_wrap=True)
    for limit in limits:
        rate = limit.get("rate")
        row = [
            limit[key],
            "-" if rate is None else describe_rate(rate),
            str(limit.get("burst") or "-"),
            str(limit.get("concurrency") or "-"),
        ]
        table.add_row(*map(shown, row))
    return table


def queues_table(queues: list[dict[str, Any]]) -> Table:
    table = Table(box=None, header_style="bold")
    table.add_column("QUEUE", no_wrap=True)
    table.add_column("", no_wrap=True)
    for state in QUEUE_STATES:
        table.add_column(state.upper(), justify="right", no_wrap=True)
    table.add_column("OLDEST OVERDUE", justify="right", no_wrap=True)
    table.add_column("LIMIT", overflow="fold")
    for queue in queues:
        counts = queue.get("counts") or {}
        overdue = queue.get("oldest_overdue_s")
        row = [
            queue["name"],
            "paused" if queue.get("paused") else "",
            *(str(counts.get(state, 0)) for state in QUEUE_STATES),
            "-" if overdue is None else f"{overdue:.1f}s",
            describe_limit(queue.get("limit")),
        ]
        table.add_row(*map(shown, row))
    return table
