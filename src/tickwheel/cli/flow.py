"""The flow-control commands: pause and resume a timer or a queue, limits, and the queues."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType

from tickwheel.cli.app import app, fail, limit_app
from tickwheel.cli.parse import parse_rate
from tickwheel.cli.session import api, emit
from tickwheel.cli.show import describe_limit, limits_table, queues_table
from tickwheel.cli.target import one_of
from tickwheel.errors import NotFound
from tickwheel.stores.limit import MAX_BURST, MAX_CONCURRENCY

TimerIdArgument = Annotated[
    str | None,
    typer.Argument(metavar="ID", help="The timer's id (or give --queue).", show_default=False),
]
QueueOption = Annotated[
    str | None, typer.Option("--queue", help="A whole queue instead of one timer.")
]
HostArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="HOST",
        help="A callback host as in its URL, with :port when not the default (or give --queue).",
        show_default=False,
    ),
]
LimitQueueOption = Annotated[
    str | None, typer.Option("--queue", help="Limit a queue's callbacks instead of a host's.")
]


def _queue_line(verb: str, queue: dict[str, Any]) -> str:
    counts = queue.get("counts") or {}
    return (
        f"{verb} queue {queue['name']} · {counts.get('scheduled', 0)} scheduled, "
        f"{counts.get('leased', 0)} leased, {counts.get('paused', 0)} paused"
    )


def _switch(ctx: typer.Context, paused: bool, timer_id: str | None, queue: str | None) -> None:
    """Pause or resume one timer or, with a queue, the queue; print what it is now."""
    one_of(timer_id, queue, "ID")
    verb = "paused" if paused else "resumed"
    with api(ctx) as client:
        if queue is not None:
            found = (client.pause_queue if paused else client.resume_queue)(queue).json
            line = _queue_line(verb, found)
        else:
            assert timer_id is not None
            found = (client.pause if paused else client.resume)(timer_id).json
            line = f"{verb} {found['id']} · due {found['due']}"
    emit(ctx, found, lambda: line)


@app.command()
def pause(ctx: typer.Context, timer_id: TimerIdArgument = None, queue: QueueOption = None) -> None:
    """Pause a timer (it keeps its id and attempts, and never fires until resumed), or with
    --queue a whole queue (workers claim nothing from it within a second; leases held finish)."""
    _switch(ctx, True, timer_id, queue)


@app.command()
def resume(ctx: typer.Context, timer_id: TimerIdArgument = None, queue: QueueOption = None) -> None:
    """Resume a paused timer (it fires at its due time, now if that has passed), or with
    --queue a paused queue."""
    _switch(ctx, False, timer_id, queue)


@app.command()
def queues(ctx: typer.Context) -> None:
    """List queues: timers per state, the oldest overdue timer's age, paused or not, limits."""
    with api(ctx) as client:
        found = [queue.json for queue in client.queues()]
    emit(ctx, {"queues": found}, lambda: queues_table(found) if found else "no queues")


@limit_app.command("set")
def set_limit(
    ctx: typer.Context,
    host: HostArgument = None,
    queue: LimitQueueOption = None,
    rate: Annotated[
        str | None,
        typer.Option("--rate", help="Callbacks a second on average: 50/s, 3000/m, 10/h, 50."),
    ] = None,
    burst: Annotated[
        int | None,
        typer.Option(
            "--burst", min=1, max=MAX_BURST, help="Callbacks at once above --rate (default: 1 s)."
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, max=MAX_CONCURRENCY, help="Callbacks in flight at most."
        ),
    ] = None,
) -> None:
    """Limit callbacks to a host (or with --queue, of a queue), for every worker together:
    tickwheel limit set api.example.com --rate 50/s --concurrency 10."""
    one_of(host, queue, "HOST")
    if rate is None and concurrency is None:
        raise typer.BadParameter(
            "give --rate, --concurrency or both", param_hint="'--rate' / '--concurrency'"
        )
    if burst is not None and rate is None:
        raise typer.BadParameter("needs a --rate", param_hint="'--burst'")
    per_s = None if rate is None else parse_rate(rate)
    with api(ctx) as client:
        if queue is not None:
            limited = client.set_queue_limit(
                queue, rate=per_s, burst=burst, concurrency=concurrency
            )
            found = limited.json
            line = f"limit on queue {limited.name}: {describe_limit(found.get('limit'))}"
        else:
            assert host is not None
            set_on = client.set_limit(host, rate=per_s, burst=burst, concurrency=concurrency)
            found = set_on.json
            line = f"limit on {set_on.host}: {describe_limit(found)}"
    emit(ctx, found, lambda: line)


@limit_app.command("ls")
def list_limits(ctx: typer.Context) -> None:
    """List the limits on hosts, then those on queues."""
    with api(ctx) as client:
        hosts = [limit.json for limit in client.limits()]
        queue_limits = [
            {"queue": queue.name, **queue.json["limit"]}
            for queue in client.queues()
            if queue.limit is not None
        ]

    def view() -> RenderableType | str:
        tables = [
            limits_table(rows, f"limits on {kind}s", kind)
            for rows, kind in ((hosts, "host"), (queue_limits, "queue"))
            if rows
        ]
        return Group(*tables) if tables else "no limits"

    emit(ctx, {"limits": hosts, "queue_limits": queue_limits}, view)


@limit_app.command("rm")
def remove_limit(
    ctx: typer.Context, host: HostArgument = None, queue: LimitQueueOption = None
) -> None:
    """Remove the limit on a host (or with --queue, a queue's); callbacks go out unlimited."""
    one_of(host, queue, "HOST")
    with api(ctx) as client:
        if queue is not None:
            try:
                client.remove_queue_limit(queue)
            except NotFound as error:
                if error.field != "queue":
                    raise
                fail(f"queue {queue!r} has no limit")  # a valid queue, without a limit
            what = f"queue {queue}"
        else:
            assert host is not None
            client.remove_limit(host)
            what = host
    removed = {"queue" if queue is not None else "host": queue or host, "removed": True}
    emit(ctx, removed, lambda: f"removed the limit on {what}")
