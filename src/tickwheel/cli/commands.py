"""The client commands: add, get, reschedule, cancel, ls, dead, stats, against a running service."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tickwheel.cli.app import app, dead_app, fail, out
from tickwheel.cli.client import DEFAULT_API, ApiClient, ApiRequestFailed, ApiUnreachable
from tickwheel.cli.parse import parse_duration, parse_header, parse_instant, parse_time
from tickwheel.cli.secret_files import secret_from
from tickwheel.cli.show import (
    describe_target,
    print_json,
    print_line,
    shown,
    timer_table,
    timers_table,
)
from tickwheel.model import replace_controls

STATES = ("scheduled", "leased", "paused", "done", "dead")
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 3600.0
"""The bounds of ``ls --watch --interval``."""

ApiOption = Annotated[
    str,
    typer.Option("--api", envvar="TICKWHEEL_API", help="The service's URL.", show_default=True),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="TICKWHEEL_TOKEN", help="Bearer token of the API.", show_default=False
    ),
]
TokenFileOption = Annotated[
    str | None,
    typer.Option(
        "--token-file",
        envvar="TICKWHEEL_TOKEN_FILE",
        metavar="PATH",
        help="Read the bearer token from this file (keeps it out of `ps`).",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the API's JSON instead of a table.")
]


def client_of(ctx: typer.Context, api: str, token: str | None, token_file: str | None) -> ApiClient:
    """The client of the API the options name; a bad URL or token ends the command (status 2)."""
    token = secret_from(ctx, "token", token, token_file)
    try:
        return ApiClient(api, token)
    except ValueError as error:
        fail(str(error), 2)


def unreachable(error: ApiUnreachable) -> str:
    """The line for an API nothing answers at."""
    return f"{error}: is `tickwheel serve` running at {error.base_url}?"


def call(
    ctx: typer.Context, api: str, token: str | None, token_file: str | None, action: Any
) -> Any:
    """Run `action(client)`, turning API errors into one line on stderr and an exit status."""
    client = client_of(ctx, api, token, token_file)
    try:
        return action(client)
    except ApiRequestFailed as error:
        fail(str(error), 2 if error.bad_input else 1)
    except ApiUnreachable as error:
        fail(unreachable(error))


def callback_of(
    url: str, method: str, header: list[str] | None, data: str | None
) -> dict[str, Any]:
    """The API's `callback` from the options; a body that parses as JSON is sent as JSON."""
    headers = dict(parse_header(text) for text in header or ())
    if data is not None and not any(name.lower() == "content-type" for name in headers):
        try:
            json.loads(data)
            headers["content-type"] = "application/json"
        except ValueError:
            pass
    callback: dict[str, Any] = {"url": url, "method": method.upper(), "headers": headers}
    if data is not None:
        callback["body"] = data
    return callback


def when_of(in_: str | None, at: str | None) -> dict[str, Any]:
    """The API's ``delay`` or ``due`` from exactly one of ``--in`` and ``--at``."""
    if (in_ is None) == (at is None):
        raise typer.BadParameter("give exactly one of --in and --at", param_hint="'--in' / '--at'")
    if in_ is not None:
        return {"delay": parse_duration(in_)}
    assert at is not None
    return {"due": parse_time(at)}


def one_of(argument: str | None, queue: str | None, name: str) -> None:
    """Refuse both or neither of a positional `name` and ``--queue``, and empty ones."""
    if (argument is None) == (queue is None):
        raise typer.BadParameter(
            f"give exactly one of {name} and --queue Q", param_hint=f"'{name}' / '--queue'"
        )
    if argument == "" or queue == "":
        hint = "'--queue'" if queue == "" else f"'{name}'"
        raise typer.BadParameter("must not be empty", param_hint=hint)


def retry_of(max_attempts: int | None, timeout: str | None) -> dict[str, Any]:
    """The API's `retry` from the options; empty for the default policy."""
    retry: dict[str, Any] = {}
    if max_attempts is not None:
        retry["max_attempts"] = max_attempts
    if timeout is not None:
        retry["timeout"] = parse_duration(timeout)
    return retry


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
    method: Annotated[str, typer.Option("--method", help="The callback's HTTP method.")] = "POST",
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="A callback header, Name:value.")
    ] = None,
    data: Annotated[
        str | None,
        typer.Option("--data", "-d", help="The callback body (JSON gets a JSON content-type)."),
    ] = None,
    timer_id: Annotated[str | None, typer.Option("--id", help="The timer's id.")] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="The timer's queue.")] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace the timer --id names, whatever its spec.")
    ] = False,
    max_attempts: Annotated[
        int | None, typer.Option("--max-attempts", min=1, help="Attempts before dead-lettering.")
    ] = None,
    timeout: Annotated[
        str | None, typer.Option("--timeout", help="How long one attempt may take: 10s, 2m.")
    ] = None,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Schedule an HTTP callback: tickwheel add --in 30s --url https://example.com/hook."""
    if replace and timer_id is None:
        raise typer.BadParameter("--replace needs the --id of the timer", param_hint="'--replace'")
    body = when_of(in_, at)
    body["callback"] = callback_of(url, method, header, data)
    if timer_id is not None:
        body["id"] = timer_id
    if queue is not None:
        body["queue"] = queue
    retry = retry_of(max_attempts, timeout)
    if retry:
        body["retry"] = retry
    if replace:
        assert timer_id is not None
        response = call(ctx, api, token, token_file, lambda client: client.put(timer_id, body))
    else:
        response = call(ctx, api, token, token_file, lambda client: client.add(body))
    timer = response.body
    if as_json:
        print_json(timer)
        return
    if response.status == 201:
        what = "created"
    else:
        # a PUT of the spec already stored changes nothing, and answers 200 as a replace does
        what = "replaced (unchanged if the spec was the same)" if replace else "exists (unchanged)"
    out.print(f"{what} {timer['id']} · due {timer['due']} · {describe_target(timer)}", markup=False)


@app.command()
def get(
    ctx: typer.Context,
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")],
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one timer (finished ones too, while they are retained)."""
    timer = call(ctx, api, token, token_file, lambda client: client.get(timer_id))
    if as_json:
        print_json(timer)
    else:
        out.print(timer_table(timer))


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
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move a scheduled or paused timer (it stays paused) to a new due time:
    tickwheel reschedule ID --in 5m."""
    when = when_of(in_, at)
    timer = call(ctx, api, token, token_file, lambda client: client.reschedule(timer_id, when))
    if as_json:
        print_json(timer)
    else:
        out.print(f"rescheduled {timer['id']} · due {timer['due']}", markup=False)


@app.command()
def cancel(
    ctx: typer.Context,
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")],
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a scheduled timer (one that is firing or has fired cannot be cancelled)."""
    call(ctx, api, token, token_file, lambda client: client.cancel(timer_id))
    if as_json:
        print_json({"id": timer_id, "cancelled": True})
    else:
        out.print(f"cancelled {timer_id}", markup=False)


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
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
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
    filters = {"state": state, "queue": queue, "due_from": start, "due_to": end}
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

    def fetch(client: ApiClient) -> dict[str, Any]:
        return client.list("/v1/timers", limit, filters)

    if not watch:
        page = call(ctx, api, token, token_file, fetch)
        _print_page(page, what, as_json)
        return
    call(
        ctx,
        api,
        token,
        token_file,
        lambda client: _watch(lambda: fetch(client), what, period_s, api, as_json),
    )


def _watch(
    fetch: Callable[[], dict[str, Any]], what: str, period_s: float, api: str, as_json: bool
) -> None:
    """Show `fetch()`'s page every `period_s` until Ctrl-C, which ends it cleanly (status 0).

    The first page's error ends the command as any call's would; a later one is shown in the
    page's place (as ``{"error": ...}`` in JSON) and the next round tries again, so a restarting
    service does not end a watch.
    """
    live = Live(console=out, auto_refresh=False) if out.is_terminal and not as_json else None
    try:
        page: dict[str, Any] | str = fetch()
        if live is not None:
            live.start()
        while True:
            if as_json:
                print_line({"error": page} if isinstance(page, str) else page)
            else:
                shown = _watched(page, what, period_s, api)
                if live is not None:
                    live.update(shown, refresh=True)
                else:
                    out.print(shown)
            time.sleep(period_s)
            try:
                page = fetch()
            except (ApiRequestFailed, ApiUnreachable) as error:
                page = str(error)
    except KeyboardInterrupt:
        return
    finally:
        if live is not None:
            live.stop()


def _watched(page: dict[str, Any] | str, what: str, period_s: float, api: str) -> RenderableType:
    now = datetime.now(UTC).strftime("%H:%M:%S")
    header = Text(f"{api} · {now} UTC · every {period_s:g}s · Ctrl-C ends", style="dim")
    if isinstance(page, str):  # what went wrong
        failed = f"error: {replace_controls(page)} (trying again every {period_s:g}s)"
        return Group(header, Text(failed, style="red"))
    return Group(header, _page_view(page, what), Text(""))


def _print_page(page: dict[str, Any], what: str, as_json: bool) -> None:
    if as_json:
        print_json(page)
    else:
        out.print(_page_view(page, what))


def _page_view(page: dict[str, Any], what: str) -> RenderableType:
    timers = page["timers"]
    more = " (more: raise --limit)" if page.get("cursor") else ""
    if not timers:
        return Text(f"no {what}")
    one = what.replace("timers", "timer") if len(timers) == 1 else what
    return timers_table(timers, f"{len(timers)} {one}{more}")


@dead_app.callback(invoke_without_command=True)
def dead(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """List dead-lettered timers; tickwheel dead replay ID schedules one again."""
    if ctx.invoked_subcommand is not None:
        return
    page = call(ctx, api, token, token_file, lambda client: client.list("/v1/dead", limit))
    _print_page(page, "dead timers", as_json)


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
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Schedule a dead timer again, due now; with --queue, every dead timer of a queue."""
    one_of(timer_id, queue, "ID")
    if queue is not None:
        found = call(ctx, api, token, token_file, lambda client: client.replay_queue(queue))
        if as_json:
            print_json(found)
        else:
            count = found["replayed"]
            noun = "timer" if count == 1 else "timers"
            out.print(f"replayed {count} dead {noun} of queue {queue}", markup=False)
        return
    assert timer_id is not None
    timer = call(ctx, api, token, token_file, lambda client: client.replay(timer_id)).body
    if as_json:
        print_json(timer)
    else:
        out.print(f"replayed {timer['id']} · due {timer['due']}", markup=False)


@app.command()
def stats(
    ctx: typer.Context,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Count timers per state; show the earliest due time."""
    found = call(ctx, api, token, token_file, lambda client: client.stats())
    if as_json:
        print_json(found)
        return
    table = Table(box=None, header_style="bold")
    table.add_column("STATE")
    table.add_column("TIMERS", justify="right")
    for state, count in found["counts"].items():
        table.add_row(shown(state), str(count))
    out.print(table)
    out.print(f"earliest due: {found.get('earliest_due') or '-'}", markup=False)
