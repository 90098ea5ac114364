"""The queue-defaults commands: what a queue's timers take when they fire without their own
retry policy or headers (``tickwheel defaults set | rm``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tickwheel.cli.app import app, fail
from tickwheel.cli.parse import parse_duration, parse_header
from tickwheel.cli.session import api, emit
from tickwheel.errors import NotFound

defaults_app = typer.Typer(
    help="A queue's defaults for timers without their own: tickwheel defaults set | rm.",
    no_args_is_help=True,
)
app.add_typer(defaults_app, name="defaults")

QueueArgument = Annotated[str, typer.Argument(metavar="QUEUE", help="The queue.")]


def describe_defaults(defaults: dict[str, Any] | None) -> str:
    """A queue's defaults in a line: the policy in short, then the header names."""
    if not defaults:
        return "none"
    parts = []
    retry = defaults.get("retry")
    if retry:
        parts.append(f"{retry['max_attempts']} attempts, {retry['timeout']:g} s each")
    if defaults.get("headers"):
        parts.append("headers " + ", ".join(defaults["headers"]))
    return "; ".join(parts) or "none"


@defaults_app.command("set")
def set_defaults(
    ctx: typer.Context,
    queue: QueueArgument,
    attempts: Annotated[
        int | None, typer.Option("--attempts", min=1, help="Attempts at most, the first included.")
    ] = None,
    timeout: Annotated[
        str | None, typer.Option("--timeout", help="One attempt's deadline: 500ms, 30s, 5m.")
    ] = None,
    min_backoff: Annotated[
        str | None, typer.Option("--min-backoff", help="The least wait after a failed attempt.")
    ] = None,
    max_backoff: Annotated[
        str | None,
        typer.Option("--max-backoff", help="The longest wait after a failed attempt."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", help="A header for every callback, Name:value."),
    ] = None,
) -> None:
    """Give a queue defaults, replacing any it had: a retry policy its timers without one of
    their own fire with (options not given: the built-in ones), and headers every callback
    carries under the timer's own: tickwheel defaults set billing --attempts 3 -H 'X-Team: ops'."""
    given = {
        "max_attempts": attempts,
        "timeout": None if timeout is None else parse_duration(timeout),
        "min_backoff": None if min_backoff is None else parse_duration(min_backoff),
        "max_backoff": None if max_backoff is None else parse_duration(max_backoff),
    }
    retry = {name: value for name, value in given.items() if value is not None}
    headers = dict(parse_header(line) for line in header or ())
    if not retry and not headers:
        raise typer.BadParameter("give a retry option, a --header or both", param_hint="QUEUE")
    with api(ctx) as client:
        found = client.set_queue_defaults(queue, retry=retry or None, headers=headers).json
    emit(ctx, found, lambda: f"defaults of queue {queue}: {describe_defaults(found['defaults'])}")


@defaults_app.command("rm")
def remove_defaults(ctx: typer.Context, queue: QueueArgument) -> None:
    """Remove a queue's defaults: its timers fire with their own, or the built-in policy."""
    with api(ctx) as client:
        try:
            client.remove_queue_defaults(queue)
        except NotFound as error:
            if error.field != "queue":
                raise
            fail(f"queue {queue!r} has no defaults")
    emit(ctx, {"queue": queue, "removed": True}, lambda: f"removed the defaults of queue {queue}")
