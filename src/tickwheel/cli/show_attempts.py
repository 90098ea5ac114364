"""How ``tickwheel get`` shows a timer's attempt history: one line per attempt, newest first,
fitting the console (the body and the worker are cut first)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from tickwheel.cli.show import Column, listing


def _result(attempt: dict[str, Any]) -> str:
    """The HTTP status answered, or else the kind of failure."""
    status = attempt.get("status")
    return str(status) if status is not None else attempt.get("error") or "-"


def _retry_in(attempt: dict[str, Any]) -> str:
    """When the retry it led to is due, from when the attempt was sent."""
    next_due_ms = attempt.get("next_due_ms")
    if next_due_ms is None:
        return "-"
    return f"+{(next_due_ms - attempt['at_ms']) / 1000:.1f}s"


def attempts_table(attempts: list[dict[str, Any]]) -> Table | Text:
    """The attempts of the API's JSON as a table; a line when there are none."""
    if not attempts:
        return Text("no attempts recorded")
    columns = [
        Column("#", right=True),
        Column("SENT"),
        Column("OUTCOME"),
        Column("RESULT"),
        Column("MS", right=True),
        Column("RETRY"),
        Column("WORKER", name=True),
        Column("BODY", text=True),
    ]
    rows = [
        [
            str(attempt["attempt"]),
            attempt["at"],
            attempt["outcome"],
            _result(attempt),
            f"{attempt['latency_ms']:.1f}",
            _retry_in(attempt),
            attempt["worker"],
            " ".join((attempt.get("body") or "").split()),
        ]
        for attempt in attempts
    ]
    return listing(columns, rows, "attempts, newest first")
