"""The client commands: add, get, cancel, ls, dead, stats, against a running service."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from tickwheel.cli.app import app, dead_app, fail, out
from tickwheel.cli.client import DEFAULT_API, ApiClient, ApiRequestFailed, ApiUnreachable
from tickwheel.cli.parse import parse_duration, parse_header, parse_time
from tickwheel.cli.secret_files import secret_from
from tickwheel.cli.show import describe_target, print_json, timer_table, timers_table

STATES = ("scheduled", "leased", "done", "dead")

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


def call(
    ctx: typer.Context, api: str, token: str | None, token_file: str | None, action: Any
) -> Any:
    """Run `action(client)`, turning API errors into one line on stderr and an exit status."""
    token = secret_from(ctx, "token", token, token_file)
    try:
        client = ApiClient(api, token)
    except ValueError as error:
        fail(str(error), 2)
    try:
        return action(client)
    except ApiRequestFailed as error:
        fail(str(error), 2 if error.bad_input else 1)
    except ApiUnreachable as error:
        fail(f"{error}: is `tickwheel serve` running at {api}?")


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
    if (in_ is None) == (at is None):
        raise typer.BadParameter("give exactly one of --in and --at", param_hint="'--in' / '--at'")
    if replace and timer_id is None:
        raise typer.BadParameter("--replace needs the --id of the timer", param_hint="'--replace'")
    body: dict[str, Any] = {}
    if in_ is not None:
        body["delay"] = parse_duration(in_)
    else:
        assert at is not None
        body["due"] = parse_time(at)
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
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """List timers (in id order on SQLite and memory stores; by shard on Redis)."""
    if state is not None and state not in STATES:
        raise typer.BadParameter(f"must be one of {', '.join(STATES)}", param_hint="'--state'")
    page = call(ctx, api, token, token_file, lambda client: client.list("/v1/timers", limit, state))
    _print_page(page, "timers" if state is None else f"{state} timers", as_json)


def _print_page(page: dict[str, Any], what: str, as_json: bool) -> None:
    if as_json:
        print_json(page)
        return
    timers = page["timers"]
    more = " (more: raise --limit)" if page.get("cursor") else ""
    if timers:
        noun = what if len(timers) > 1 else what.removesuffix("s")
        out.print(timers_table(timers, f"{len(timers)} {noun}{more}"))
    else:
        out.print(f"no {what}", markup=False)


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
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The dead timer's id.")],
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Schedule a dead timer again, due now."""
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
        table.add_row(state, str(count))
    out.print(table)
    out.print(f"earliest due: {found.get('earliest_due') or '-'}", markup=False)
