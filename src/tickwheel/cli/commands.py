"""The client commands: add, get, reschedule, cancel, ls, dead, stats, against a running service."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tickwheel.cli.app import app, dead_app, options, out
from tickwheel.cli.bulk import cancel_many
from tickwheel.cli.parse import parse_duration, parse_instant
from tickwheel.cli.session import api, emit, print_line
from tickwheel.cli.show import describe_target, shown, timer_table, timers_table
from tickwheel.cli.show_attempts import attempts_table
from tickwheel.cli.target import (
    DataOption,
    HeaderOption,
    MaxAttemptsOption,
    MethodOption,
    TextOption,
    TimeoutOption,
    callback_of,
    one_of,
    retry_of,
    when_of,
)
from tickwheel.client.views import Page, TimerInfo
from tickwheel.errors import ServiceError, ServiceUnreachable
from tickwheel.model import replace_controls

STATES = ("scheduled", "leased", "paused", "done", "dead")
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 3600.0
"""The bounds of ``ls --watch --interval``."""


@app.command()
def add(
    ctx: typer.Context,
    url: Annotated[str, typer.Option("--url", help="The callback URL.")],
    in_: Annotated[
        str | None,
        typer.Option("--in", help="Fire after this long: 500ms, 30s, 5m, 2h, 1h30m."),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", help="Fire at this time: RFC 3339 with offset, or epoch seconds."),
    ] = None,
    method: MethodOption = "POST",
    header: HeaderOption = None,
    data: DataOption = None,
    text: TextOption = None,
    timer_id: Annotated[str | None, typer.Option("--id", help="The timer's id.")] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="The timer's queue.")] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace the timer --id names, whatever its spec.")
    ] = False,
    max_attempts: MaxAttemptsOption = None,
    timeout: TimeoutOption = None,
) -> None:
    """Schedule an HTTP callback: tickwheel add --in 30s --url https://example.com/hook."""
    if replace and timer_id is None:
        raise typer.BadParameter("--replace needs the --id of the timer", param_hint="'--replace'")
    body = when_of(in_, at)
    body["callback"] = callback_of(url, method, header, data, text)
    optional = {"id": timer_id, "queue": queue, "retry": retry_of(max_attempts, timeout) or None}
    body.update({name: value for name, value in optional.items() if value is not None})
    with api(ctx) as client:
        created = client.create(body, replace=replace)
    timer = created.item
    if created.new:
        what = "created"
    else:
        # a PUT of the spec already stored changes nothing, and answers 200 as a replace does
        what = "replaced (unchanged if the spec was the same)" if replace else "exists (unchanged)"
    line = f"{what} {timer.id} · due {timer.json['due']} · {describe_target(timer.json)}"
    emit(ctx, timer.json, lambda: line)


@app.command()
def get(
    ctx: typer.Context,
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")],
) -> None:
    """Show one timer (finished ones too, while they are retained) and its attempts."""
    with api(ctx) as client:
        timer = client.get(timer_id)
        attempts = [attempt.json for attempt in client.attempts(timer_id)]
    shown_json = {**timer.json, "attempts": attempts}
    emit(ctx, shown_json, lambda: Group(timer_table(timer.json), Text(), attempts_table(attempts)))


@app.command()
def reschedule(
    ctx: typer.Context,
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")],
    in_: Annotated[
        str | None,
        typer.Option("--in", help="Fire this long from now: 500ms, 30s, 5m, 2h, 1h30m."),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option("--at", help="Fire at this time: RFC 3339 with offset, or epoch seconds."),
    ] = None,
) -> None:
    """Move a scheduled or paused timer (it stays paused) to a new due time:
    tickwheel reschedule ID --in 5m."""
    when = when_of(in_, at)
    with api(ctx) as client:
        timer = client.reschedule(timer_id, delay=when.get("delay"), due=when.get("due"))
    emit(ctx, timer.json, lambda: f"rescheduled {timer.id} · due {timer.json['due']}")


@app.command()
def cancel(
    ctx: typer.Context,
    timer_ids: Annotated[
        list[str], typer.Argument(metavar="ID...", help="The timer's id, or several ids.")
    ],
) -> None:
    """Cancel a scheduled timer (one that is firing or has fired cannot be cancelled); given
    several ids, cancel them 1,000 a request and list those that were not cancelled."""
    if len(timer_ids) > 1:
        cancel_many(ctx, timer_ids)
        return
    (timer_id,) = timer_ids
    with api(ctx) as client:
        client.cancel(timer_id)
    emit(ctx, {"id": timer_id, "cancelled": True}, lambda: f"cancelled {timer_id}")


@app.command("ls")
def list_timers(
    ctx: typer.Context,
    state: Annotated[
        str | None,
        typer.Option("--state", help=f"Only timers in this state: {', '.join(STATES)}."),
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="Only timers of this queue.")] = None,
    due_from: Annotated[
        str | None,
        typer.Option(
            "--due-from", help="Only timers due at or after this time (RFC 3339 or epoch s)."
        ),
    ] = None,
    due_to: Annotated[
        str | None,
        typer.Option("--due-to", help="Only timers due before this time (RFC 3339 or epoch s)."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", "-w", help="Show the list again every --interval (--json: a line a page)."
        ),
    ] = False,
    interval: Annotated[
        str, typer.Option("--interval", help="How often --watch refreshes: 2s, 500ms, 1m.")
    ] = "2s",
) -> None:
    """List timers (in id order on SQLite and memory stores; by shard on Redis).

    With --watch the list is shown again every 2 seconds until Ctrl-C."""
    if state is not None and state not in STATES:
        raise typer.BadParameter(f"must be one of {', '.join(STATES)}", param_hint="'--state'")
    if queue == "":
        raise typer.BadParameter("must not be empty", param_hint="'--queue'")
    start = None if due_from is None else parse_instant(due_from)
    end = None if due_to is None else parse_instant(due_to)
    if start and end and datetime.fromisoformat(start) >= datetime.fromisoformat(end):
        raise typer.BadParameter(
            "--due-from must be before --due-to", param_hint="'--due-from' / '--due-to'"
        )
    period_s = parse_duration(interval)
    if not MIN_INTERVAL_S <= period_s <= MAX_INTERVAL_S:
        raise typer.BadParameter(
            f"must be from {MIN_INTERVAL_S:g}s to {MAX_INTERVAL_S:g}s", param_hint="'--interval'"
        )
    what = " ".join(
        part
        for part in (state, "timers", None if queue is None else f"in queue {queue}")
        if part is not None
    )
    with api(ctx) as client:

        def fetch() -> Page[TimerInfo]:
            return client.ls(state=state, queue=queue, due_from=start, due_to=end, limit=limit)

        if watch:
            _watch(fetch, what, period_s, options(ctx).api, options(ctx).as_json)
            return
        page = fetch()
    emit(ctx, page_json(page), lambda: _page_view(page, what))


def page_json(page: Page[TimerInfo]) -> dict[str, Any]:
    """A page of timers as the API shows one."""
    return {"timers": [timer.json for timer in page.items], "cursor": page.cursor}


def _watch(
    fetch: Callable[[], Page[TimerInfo]], what: str, period_s: float, api_url: str, as_json: bool
) -> None:
    """Show `fetch()`'s page every `period_s` until Ctrl-C, which ends it cleanly (status 0).

    The first page's error ends the command as any call's would; a later one is shown in the
    page's place (as ``{"error": ...}`` in JSON) and the next round tries again, so a restarting
    service does not end a watch.
    """
    live = Live(console=out, auto_refresh=False) if out.is_terminal and not as_json else None
    try:
        page: Page[TimerInfo] | str = fetch()
        if live is not None:
            live.start()
        while True:
            if as_json:
                print_line({"error": page} if isinstance(page, str) else page_json(page))
            else:
                view = _watched(page, what, period_s, api_url)
                if live is not None:
                    live.update(view, refresh=True)
                else:  # the error line whole, as the lines of a page are
                    out.print(view, soft_wrap=True)
            time.sleep(period_s)
            try:
                page = fetch()
            except (ServiceError, ServiceUnreachable) as error:
                page = str(error)
    except KeyboardInterrupt:
        return
    finally:
        if live is not None:
            live.stop()


def _watched(
    page: Page[TimerInfo] | str, what: str, period_s: float, api_url: str
) -> RenderableType:
    now = datetime.now(UTC).strftime("%H:%M:%S")
    header = Text(f"{api_url} · {now} UTC · every {period_s:g}s · Ctrl-C ends", style="dim")
    if isinstance(page, str):  # what went wrong
        failed = f"error: {replace_controls(page)} (trying again every {period_s:g}s)"
        return Group(header, Text(failed, style="red"))
    return Group(header, _page_view(page, what), Text(""))


def _page_view(page: Page[TimerInfo], what: str) -> RenderableType:
    timers = [timer.json for timer in page.items]
    more = " (more: raise --limit)" if page.cursor else ""
    if not timers:
        return Text(f"no {what}")
    one = what.replace("timers", "timer") if len(timers) == 1 else what
    return timers_table(timers, f"{len(timers)} {one}{more}")


@dead_app.callback(invoke_without_command=True)
def dead(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
) -> None:
    """List dead-lettered timers; tickwheel dead replay ID schedules one again."""
    if ctx.invoked_subcommand is not None:
        return
    with api(ctx) as client:
        page = client.dead(limit=limit)
    emit(ctx, page_json(page), lambda: _page_view(page, "dead timers"))


@dead_app.command()
def replay(
    ctx: typer.Context,
    timer_id: Annotated[
        str | None,
        typer.Argument(
            metavar="ID", help="The dead timer's id (or give --queue).", show_default=False
        ),
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", help="Replay every dead timer of this queue.")
    ] = None,
) -> None:
    """Schedule a dead timer again, due now; with --queue, every dead timer of a queue."""
    one_of(timer_id, queue, "ID")
    with api(ctx) as client:
        if queue is not None:
            count = client.replay_queue(queue)
            noun = "timer" if count == 1 else "timers"
            line = f"replayed {count} dead {noun} of queue {queue}"
            emit(ctx, {"replayed": count}, lambda: line)
            return
        assert timer_id is not None
        timer = client.replay(timer_id)
    emit(ctx, timer.json, lambda: f"replayed {timer.id} · due {timer.json['due']}")


@app.command()
def stats(ctx: typer.Context) -> None:
    """Count timers per state; show the earliest due time."""
    with api(ctx) as client:
        found = client.stats()

    def view() -> RenderableType:
        table = Table(box=None, header_style="bold")
        table.add_column("STATE")
        table.add_column("TIMERS", justify="right")
        for state, count in found.counts.items():
            table.add_row(shown(state), str(count))
        earliest = found.json.get("earliest_due") or "-"
        return Group(table, Text(f"earliest due: {earliest}"))

    emit(ctx, found.json, view)
