"""The flow-control commands: pause and resume a timer or a queue, limits, and the queues."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tickwheel.cli.app import app, fail, limit_app, out
from tickwheel.cli.client import DEFAULT_API, ApiClient, ApiRequestFailed, Rows
from tickwheel.cli.commands import (
    ApiOption,
    JsonOption,
    TokenFileOption,
    TokenOption,
    call,
    one_of,
)
from tickwheel.cli.parse import parse_rate
from tickwheel.cli.show import describe_limit, limits_table, print_json, queues_table
from tickwheel.stores.base import MAX_BURST, MAX_CONCURRENCY

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


def _switch(
    ctx: typer.Context,
    paused: bool,
    timer_id: str | None,
    queue: str | None,
    where: tuple[str, str | None, str | None],
    as_json: bool,
) -> None:
    """Pause or resume one timer or, with a queue, the queue; print what it is now."""
    one_of(timer_id, queue, "ID")
    verb = "paused" if paused else "resumed"
    if queue is not None:
        switch_queue = ApiClient.pause_queue if paused else ApiClient.resume_queue
        found = call(ctx, *where, lambda client: switch_queue(client, queue))
        line = _queue_line(verb, found)
    else:
        assert timer_id is not None
        switch_timer = ApiClient.pause if paused else ApiClient.resume
        found = call(ctx, *where, lambda client: switch_timer(client, timer_id))
        line = f"{verb} {found['id']} · due {found['due']}"
    if as_json:
        print_json(found)
    else:
        out.print(line, markup=False)


@app.command()
def pause(
    ctx: typer.Context,
    timer_id: TimerIdArgument = None,
    queue: QueueOption = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pause a timer (it keeps its id and attempts, and never fires until resumed), or with
    --queue a whole queue (workers claim nothing from it within a second; leases held finish)."""
    _switch(ctx, True, timer_id, queue, (api, token, token_file), as_json)


@app.command()
def resume(
    ctx: typer.Context,
    timer_id: TimerIdArgument = None,
    queue: QueueOption = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Resume a paused timer (it fires at its due time, now if that has passed), or with
    --queue a paused queue."""
    _switch(ctx, False, timer_id, queue, (api, token, token_file), as_json)


@app.command()
def queues(
    ctx: typer.Context,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """List queues: timers per state, the oldest overdue timer's age, paused or not, limits."""
    found = call(ctx, api, token, token_file, lambda client: client.queues())
    if as_json:
        print_json({"queues": found})
    elif not found:
        out.print("no queues", markup=False)
    else:
        out.print(queues_table(found))


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
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
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
    limit = {
        "rate": None if rate is None else parse_rate(rate),
        "burst": burst,
        "concurrency": concurrency,
    }
    if queue is not None:
        found = call(
            ctx, api, token, token_file, lambda client: client.set_queue_limit(queue, limit)
        )
        line = f"limit on queue {found['name']}: {describe_limit(found.get('limit'))}"
    else:
        assert host is not None
        found = call(ctx, api, token, token_file, lambda client: client.set_limit(host, limit))
        line = f"limit on {found['host']}: {describe_limit(found)}"
    if as_json:
        print_json(found)
    else:
        out.print(line, markup=False)


@limit_app.command("ls")
def list_limits(
    ctx: typer.Context,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """List the limits on hosts, then those on queues."""

    def both(client: ApiClient) -> tuple[Rows, Rows]:
        limited = [queue for queue in client.queues() if queue.get("limit")]
        return client.limits(), [{"queue": queue["name"], **queue["limit"]} for queue in limited]

    hosts, queue_limits = call(ctx, api, token, token_file, both)
    if as_json:
        print_json({"limits": hosts, "queue_limits": queue_limits})
        return
    if not hosts and not queue_limits:
        out.print("no limits", markup=False)
    if hosts:
        out.print(limits_table(hosts, "limits on hosts", "host"))
    if queue_limits:
        out.print(limits_table(queue_limits, "limits on queues", "queue"))


@limit_app.command("rm")
def remove_limit(
    ctx: typer.Context,
    host: HostArgument = None,
    queue: LimitQueueOption = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove the limit on a host (or with --queue, a queue's); callbacks go out unlimited."""
    one_of(host, queue, "HOST")
    if queue is not None:

        def clear(client: ApiClient) -> bool:
            try:
                client.delete_queue_limit(queue)
            except ApiRequestFailed as error:
                if (error.status, error.field) == (404, "queue"):  # a valid queue, no limit
                    return False
                raise
            return True

        if not call(ctx, api, token, token_file, clear):
            fail(f"queue {queue!r} has no limit")
        what = f"queue {queue}"
    else:
        assert host is not None
        call(ctx, api, token, token_file, lambda client: client.delete_limit(host))
        what = host
    if as_json:
        print_json({"queue" if queue is not None else "host": queue or host, "removed": True})
    else:
        out.print(f"removed the limit on {what}", markup=False)
