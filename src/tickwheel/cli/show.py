"""How the CLI shows timers: tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.table import Table
from rich.text import Text


def print_json(body: Any) -> None:
    sys.stdout.write(json.dumps(body, indent=2) + "\n")


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
        table.add_row(*map(Text, row))  # Text: user data is never read as rich markup
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
            table.add_row(name, Text(value))
    return table
