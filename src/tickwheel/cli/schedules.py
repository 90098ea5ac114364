"""The schedule commands: tickwheel schedule add, ls, get, pause, resume, rm, runs."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from tickwheel.cli.app import out, schedule_app
from tickwheel.cli.client import DEFAULT_API
from tickwheel.cli.commands import (
    ApiOption,
    JsonOption,
    TokenFileOption,
    TokenOption,
    call,
    callback_of,
    retry_of,
)
from tickwheel.cli.parse import parse_duration, parse_time
from tickwheel.cli.show import (
    describe_rule,
    describe_target,
    print_json,
    runs_table,
    schedule_table,
    schedules_table,
)
from tickwheel.schedule import Misfire

IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The schedule's id.")]


@schedule_app.command("add")
def add(
    ctx: typer.Context,
    cron: Annotated[
        str | None,
        typer.Option("--cron", help="A cron rule: 5 fields, or 6 with seconds first."),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option("--every", help="Fire at this interval: 30s, 5m, 1h (at least 1s)."),
    ] = None,
    tz: Annotated[
        str | None, typer.Option("--tz", help="The IANA time zone of --cron (default UTC).")
    ] = None,
    url: Annotated[str | None, typer.Option("--url", help="The callback URL.")] = None,
    method: Annotated[str, typer.Option("--method", help="The callback's HTTP method.")] = "POST",
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="A callback header, Name:value.")
    ] = None,
    data: Annotated[
        str | None,
        typer.Option("--data", "-d", help="The callback body (JSON gets a JSON content-type)."),
    ] = None,
    queue: Annotated[str | None, typer.Option("--queue", help="The occurrences' queue.")] = None,
    payload: Annotated[
        str | None,
        typer.Option("--payload", help="JSON handed to a queue consumer (instead of --url)."),
    ] = None,
    schedule_id: Annotated[str | None, typer.Option("--id", help="The schedule's id.")] = None,
    start: Annotated[
        str | None,
        typer.Option("--start", help="No run before this time (RFC 3339 or epoch seconds)."),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--end", help="No run from this time on (RFC 3339 or epoch seconds)."),
    ] = None,
    max_runs: Annotated[
        int | None, typer.Option("--max-runs", min=1, help="Stop after this many runs.")
    ] = None,
    jitter: Annotated[
        str | None,
        typer.Option("--jitter", help="Delay each run by a fixed random share of this: 30s."),
    ] = None,
    misfire: Annotated[
        Misfire | None,
        typer.Option("--misfire", help="Runs missed while down: skip, once (default), all."),
    ] = None,
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
    """Create a recurring timer: tickwheel schedule add --every 5m --url https://example.com/h."""
    if (cron is None) == (every is None):
        raise typer.BadParameter(
            "give exactly one of --cron and --every", param_hint="'--cron' / '--every'"
        )
    if url is None and payload is None:
        raise typer.BadParameter(
            "give --url (an HTTP callback) or --payload (for a queue consumer)",
            param_hint="'--url' / '--payload'",
        )
    body: dict[str, Any] = {"cron": cron} if cron is not None else {}
    if every is not None:
        body["every"] = parse_duration(every)
    optional = {
        "timezone": tz,
        "id": schedule_id,
        "queue": queue,
        "start": None if start is None else parse_time(start),
        "end": None if end is None else parse_time(end),
        "max_runs": max_runs,
        "jitter": None if jitter is None else parse_duration(jitter),
        "misfire": None if misfire is None else misfire.value,
        "retry": retry_of(max_attempts, timeout) or None,
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    if url is not None:
        body["callback"] = callback_of(url, method, header, data)
    if payload is not None:
        try:
            body["payload"] = json.loads(payload)
        except ValueError as error:
            raise typer.BadParameter(f"is not JSON: {error}", param_hint="'--payload'") from None
    response = call(ctx, api, token, token_file, lambda client: client.add_schedule(body))
    schedule = response.body
    if as_json:
        print_json(schedule)
        return
    what = "created" if response.status == 201 else "exists (unchanged)"
    out.print(
        f"{what} {schedule['id']} · {describe_rule(schedule)} · next run "
        f"{schedule.get('next_run') or '-'} · {describe_target(schedule)}",
        markup=False,
    )


@schedule_app.command("ls")
def list_schedules(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """List schedules with their next run (in id order on SQLite and memory stores)."""
    page = call(ctx, api, token, token_file, lambda client: client.list_schedules(limit))
    if as_json:
        print_json(page)
        return
    schedules = page["schedules"]
    if not schedules:
        out.print("no schedules", markup=False)
        return
    more = " (more: raise --limit)" if page.get("cursor") else ""
    noun = "schedules" if len(schedules) > 1 else "schedule"
    out.print(schedules_table(schedules, f"{len(schedules)} {noun}{more}"))


@schedule_app.command("get")
def get(
    ctx: typer.Context,
    schedule_id: IdArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one schedule and its next five runs."""
    schedule = call(ctx, api, token, token_file, lambda client: client.get_schedule(schedule_id))
    if as_json:
        print_json(schedule)
    else:
        out.print(schedule_table(schedule))


@schedule_app.command("pause")
def pause(
    ctx: typer.Context,
    schedule_id: IdArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pause a schedule: nothing fires until it is resumed."""
    schedule = call(ctx, api, token, token_file, lambda client: client.pause_schedule(schedule_id))
    if as_json:
        print_json(schedule)
    else:
        out.print(f"paused {schedule['id']}", markup=False)


@schedule_app.command("resume")
def resume(
    ctx: typer.Context,
    schedule_id: IdArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Resume a schedule; a run missed while paused comes up as its misfire policy says."""
    schedule = call(ctx, api, token, token_file, lambda client: client.resume_schedule(schedule_id))
    if as_json:
        print_json(schedule)
    else:
        next_run = schedule.get("next_run") or "-"
        out.print(f"resumed {schedule['id']} · next run {next_run}", markup=False)


@schedule_app.command("rm")
def remove(
    ctx: typer.Context,
    schedule_id: IdArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Delete a schedule and its pending run (one already firing runs to its end)."""
    call(ctx, api, token, token_file, lambda client: client.delete_schedule(schedule_id))
    if as_json:
        print_json({"id": schedule_id, "deleted": True})
    else:
        out.print(f"deleted {schedule_id}", markup=False)


@schedule_app.command("runs")
def runs(
    ctx: typer.Context,
    schedule_id: IdArgument,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    token_file: TokenFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a schedule's latest runs, newest first ("expired": no longer kept by the store)."""
    found = call(ctx, api, token, token_file, lambda client: client.schedule_runs(schedule_id))
    if as_json:
        print_json(found)
        return
    if not found["runs"]:
        out.print(f"no runs of {schedule_id}", markup=False)
        return
    out.print(runs_table(found["runs"], f"runs of {schedule_id}, newest first"))
