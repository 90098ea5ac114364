"""The schedule commands: tickwheel schedule add, ls, get, pause, resume, rm, runs."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import RenderableType

from tickwheel.cli.app import schedule_app
from tickwheel.cli.parse import parse_duration, parse_time
from tickwheel.cli.session import api, emit
from tickwheel.cli.show import (
    describe_rule,
    describe_target,
    runs_table,
    schedule_table,
    schedules_table,
)
from tickwheel.cli.target import (
    DataOption,
    HeaderOption,
    MaxAttemptsOption,
    MethodOption,
    TextOption,
    TimeoutOption,
    callback_of,
    retry_of,
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
    method: MethodOption = "POST",
    header: HeaderOption = None,
    data: DataOption = None,
    text: TextOption = None,
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
    max_attempts: MaxAttemptsOption = None,
    timeout: TimeoutOption = None,
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
        body["callback"] = callback_of(url, method, header, data, text)
    if payload is not None:
        try:
            body["payload"] = json.loads(payload)
        except ValueError as error:
            raise typer.BadParameter(f"is not JSON: {error}", param_hint="'--payload'") from None
    with api(ctx) as client:
        created = client.create_schedule(body)
    schedule = created.item.json
    line = (
        f"{'created' if created.new else 'exists (unchanged)'} {schedule['id']} · "
        f"{describe_rule(schedule)} · next run {schedule.get('next_run') or '-'} · "
        f"{describe_target(schedule)}"
    )
    emit(ctx, schedule, lambda: line)


@schedule_app.command("ls")
def list_schedules(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
) -> None:
    """List schedules with their next run (in id order on SQLite and memory stores)."""
    with api(ctx) as client:
        page = client.schedules(limit=limit)
    schedules = [schedule.json for schedule in page.items]

    def view() -> RenderableType | str:
        if not schedules:
            return "no schedules"
        more = " (more: raise --limit)" if page.cursor else ""
        noun = "schedules" if len(schedules) > 1 else "schedule"
        return schedules_table(schedules, f"{len(schedules)} {noun}{more}")

    emit(ctx, {"schedules": schedules, "cursor": page.cursor}, view)


@schedule_app.command("get")
def get(ctx: typer.Context, schedule_id: IdArgument) -> None:
    """Show one schedule and its next five runs."""
    with api(ctx) as client:
        schedule = client.get_schedule(schedule_id).json
    emit(ctx, schedule, lambda: schedule_table(schedule))


@schedule_app.command("pause")
def pause(ctx: typer.Context, schedule_id: IdArgument) -> None:
    """Pause a schedule: nothing fires until it is resumed."""
    with api(ctx) as client:
        schedule = client.pause_schedule(schedule_id)
    emit(ctx, schedule.json, lambda: f"paused {schedule.id}")


@schedule_app.command("resume")
def resume(ctx: typer.Context, schedule_id: IdArgument) -> None:
    """Resume a schedule; a run missed while paused comes up as its misfire policy says."""
    with api(ctx) as client:
        schedule = client.resume_schedule(schedule_id)
    next_run = schedule.json.get("next_run") or "-"
    emit(ctx, schedule.json, lambda: f"resumed {schedule.id} · next run {next_run}")


@schedule_app.command("rm")
def remove(ctx: typer.Context, schedule_id: IdArgument) -> None:
    """Delete a schedule and its pending run (one already firing runs to its end)."""
    with api(ctx) as client:
        client.remove_schedule(schedule_id)
    emit(ctx, {"id": schedule_id, "deleted": True}, lambda: f"deleted {schedule_id}")


@schedule_app.command("runs")
def runs(ctx: typer.Context, schedule_id: IdArgument) -> None:
    """Show a schedule's latest runs, newest first ("expired": no longer kept by the store)."""
    with api(ctx) as client:
        found = [run.json for run in client.schedule_runs(schedule_id)]

    def view() -> RenderableType | str:
        if not found:
            return f"no runs of {schedule_id}"
        return runs_table(found, f"runs of {schedule_id}, newest first")

    emit(ctx, {"runs": found}, view)
