"""The ``tickwheel`` command: run the service, and talk to a running one.

Exit statuses: 0 success, 1 failure (an API error, an unreachable service, a missing timer),
2 bad input (a usage error, or the API refusing the request as invalid).
"""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tickwheel.errors import InvalidArgument, StoreUnavailable, TickwheelError
from tickwheel.service.client import DEFAULT_API, ApiClient, ApiRequestFailed, ApiUnreachable

app = typer.Typer(
    name="tickwheel",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
dead_app = typer.Typer(
    help="List dead-lettered timers, or replay one: tickwheel dead replay ID.",
    no_args_is_help=False,
)
app.add_typer(dead_app, name="dead")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"tickwheel {version('tickwheel')}", markup=False)
        raise typer.Exit()


@app.callback()
def _main(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
) -> None:
    """Run work at a chosen future time: the timer service and its client."""


# piped output is read by scripts and people alike: no wrapping of rows at 80 columns
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False)

STATES = ("scheduled", "leased", "done", "dead")
_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_STEP = re.compile(r"\[(\d+)/(\d+)\] (.*)")


# --- parsing ---------------------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """Return seconds for ``500ms``, ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m`` or a bare number.

    Raises:
        typer.BadParameter: the text is no duration.
    """
    compact = text.strip().lower().replace(" ", "")
    if _NUMBER.fullmatch(compact):
        return float(compact)
    parts = _PART.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise typer.BadParameter(
            f"{text!r} is not a duration: write e.g. 500ms, 30s, 5m, 2h or 1h30m"
        )
    return sum(float(number) * _UNITS_S[unit] for number, unit in parts)


def parse_time(text: str) -> str | float:
    """Return the API's `due` for RFC 3339 with an offset or epoch seconds.

    Raises:
        typer.BadParameter: the text is neither, or an RFC 3339 time lacks its offset.
    """
    if _NUMBER.fullmatch(text.strip()):
        return float(text)
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise typer.BadParameter(
            f"{text!r} is not a time: give RFC 3339 with an offset "
            "(2030-01-01T09:00:00Z, 2030-01-01T10:00:00+01:00) or epoch seconds"
        )
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise typer.BadParameter(f"{text!r} is not a header: write Name:value")
    return name.strip(), value.strip()


# --- shared options --------------------------------------------------------------------------

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
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print the API's JSON instead of a table.")
]


def _fail(message: str, status: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(status)


def _call(api: str, token: str | None, action: Any) -> Any:
    """Run `action(client)`, turning API errors into one line on stderr and an exit status."""
    try:
        client = ApiClient(api, token)
    except ValueError as error:
        _fail(str(error), 2)
    try:
        return action(client)
    except ApiRequestFailed as error:
        _fail(str(error), 2 if error.bad_input else 1)
    except ApiUnreachable as error:
        _fail(f"{error}: is `tickwheel serve` running at {api}?")


def _print_json(body: Any) -> None:
    sys.stdout.write(json.dumps(body, indent=2) + "\n")


def _callback(timer: dict[str, Any]) -> str:
    callback = timer.get("callback")
    if not callback:
        return f"queue {timer.get('queue')}"
    return f"{callback.get('method')} {callback.get('url')}"


def _timers_table(timers: list[dict[str, Any]], title: str) -> Table:
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
        row.append(_callback(timer))
        if errors:
            row.append(timer.get("last_error") or "")
        table.add_row(*map(Text, row))  # Text: user data is never read as rich markup
    return table


def _timer_table(timer: dict[str, Any]) -> Table:
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
        ("callback", _callback(timer)),
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


# --- client commands -------------------------------------------------------------------------


@app.command()
def add(
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
    body["callback"] = callback
    if timer_id is not None:
        body["id"] = timer_id
    if queue is not None:
        body["queue"] = queue
    retry: dict[str, Any] = {}
    if max_attempts is not None:
        retry["max_attempts"] = max_attempts
    if timeout is not None:
        retry["timeout"] = parse_duration(timeout)
    if retry:
        body["retry"] = retry
    if replace:
        assert timer_id is not None
        response = _call(api, token, lambda client: client.put(timer_id, body))
    else:
        response = _call(api, token, lambda client: client.add(body))
    timer = response.body
    if as_json:
        _print_json(timer)
        return
    if response.status == 201:
        what = "created"
    else:
        # a PUT of the spec already stored changes nothing, and answers 200 as a replace does
        what = "replaced (unchanged if the spec was the same)" if replace else "exists (unchanged)"
    out.print(f"{what} {timer['id']} · due {timer['due']} · {_callback(timer)}", markup=False)


@app.command()
def get(
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")],
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one timer (finished ones too, while they are retained)."""
    timer = _call(api, token, lambda client: client.get(timer_id))
    if as_json:
        _print_json(timer)
    else:
        out.print(_timer_table(timer))


@app.command()
def cancel(
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The timer's id.")],
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Cancel a scheduled timer (one that is firing or has fired cannot be cancelled)."""
    _call(api, token, lambda client: client.cancel(timer_id))
    if as_json:
        _print_json({"id": timer_id, "cancelled": True})
    else:
        out.print(f"cancelled {timer_id}", markup=False)


@app.command("ls")
def list_timers(
    state: Annotated[
        str | None,
        typer.Option("--state", help=f"Only timers in this state: {', '.join(STATES)}."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List timers in id order (creation order for generated ids)."""
    if state is not None and state not in STATES:
        raise typer.BadParameter(f"must be one of {', '.join(STATES)}", param_hint="'--state'")
    page = _call(api, token, lambda client: client.list("/v1/timers", limit, state))
    _print_page(page, "timers" if state is None else f"{state} timers", as_json)


def _print_page(page: dict[str, Any], what: str, as_json: bool) -> None:
    if as_json:
        _print_json(page)
        return
    timers = page["timers"]
    more = " (more: raise --limit)" if page.get("cursor") else ""
    if timers:
        noun = what if len(timers) > 1 else what.removesuffix("s")
        out.print(_timers_table(timers, f"{len(timers)} {noun}{more}"))
    else:
        out.print(f"no {what}", markup=False)


@dead_app.callback(invoke_without_command=True)
def dead(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 100,
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """List dead-lettered timers; tickwheel dead replay ID schedules one again."""
    if ctx.invoked_subcommand is not None:
        return
    page = _call(api, token, lambda client: client.list("/v1/dead", limit))
    _print_page(page, "dead timers", as_json)


@dead_app.command()
def replay(
    timer_id: Annotated[str, typer.Argument(metavar="ID", help="The dead timer's id.")],
    api: ApiOption = DEFAULT_API,
    token: TokenOption = None,
    as_json: JsonOption = False,
) -> None:
    """Schedule a dead timer again, due now."""
    timer = _call(api, token, lambda client: client.replay(timer_id)).body
    if as_json:
        _print_json(timer)
    else:
        out.print(f"replayed {timer['id']} · due {timer['due']}", markup=False)


@app.command()
def stats(
    api: ApiOption = DEFAULT_API, token: TokenOption = None, as_json: JsonOption = False
) -> None:
    """Count timers per state; show the earliest due time."""
    found = _call(api, token, lambda client: client.stats())
    if as_json:
        _print_json(found)
        return
    table = Table(box=None, header_style="bold")
    table.add_column("STATE")
    table.add_column("TIMERS", justify="right")
    for state, count in found["counts"].items():
        table.add_row(state, str(count))
    out.print(table)
    out.print(f"earliest due: {found.get('earliest_due') or '-'}", markup=False)


# --- processes -------------------------------------------------------------------------------


def _settings_or_exit(**overrides: Any) -> Any:
    from tickwheel.service.settings import ServiceSettings

    try:
        return ServiceSettings.from_env(**overrides)
    except InvalidArgument as error:
        _fail(str(error), 2)


def _run_or_exit(main: Any) -> None:
    import logging

    from tickwheel.service.serve import run

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        run(main)
    except InvalidArgument as error:
        _fail(str(error), 2)
    except (OSError, StoreUnavailable, TickwheelError) as error:
        _fail(str(error))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        raise typer.Exit(130) from None


@app.command()
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on [default: 127.0.0.1].")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to listen on, 0 for any [default: 8080].")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="memory://, sqlite:///path.db, redis://host:port/db or redis+cluster://host:port "
            "[default: sqlite:///./tickwheel.db].",
        ),
    ] = None,
    allow_private_targets: Annotated[
        bool, typer.Option(help="Let callbacks reach loopback and private addresses.")
    ] = False,
    token: Annotated[str | None, typer.Option(help="Require Authorization: Bearer TOKEN.")] = None,
    signing_secret: Annotated[
        str | None, typer.Option(help="Sign callbacks with HMAC-SHA256.")
    ] = None,
    no_worker: Annotated[bool, typer.Option("--no-worker", help="Serve the API only.")] = False,
) -> None:
    """Run the HTTP API and a worker in one process (TICKWHEEL_* variables set the defaults)."""
    from tickwheel.service.serve import serve as run_service

    settings = _settings_or_exit(
        host=host,
        port=port,
        store_url=store,
        allow_private_targets=True if allow_private_targets else None,
        token=token,
        signing_secret=signing_secret,
        worker=False if no_worker else None,
    )
    _run_or_exit(run_service(settings))


@app.command()
def worker(
    store: Annotated[
        str | None,
        typer.Option(
            "--store", help="The store URL [default: TICKWHEEL_STORE or the SQLite file]."
        ),
    ] = None,
    queue: Annotated[
        list[str] | None, typer.Option("--queue", help="A queue to serve (repeat for more).")
    ] = None,
    allow_private_targets: Annotated[
        bool, typer.Option(help="Let callbacks reach loopback and private addresses.")
    ] = False,
    signing_secret: Annotated[
        str | None, typer.Option(help="Sign callbacks with HMAC-SHA256.")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Callbacks in flight at once [default: 512].")
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics (0: any)."
        ),
    ] = None,
) -> None:
    """Run a worker alone: fire due timers of a shared store (Redis) next to `serve --no-worker`."""
    from tickwheel.engine.settings import WorkerSettings
    from tickwheel.service.serve import work

    settings = _settings_or_exit(
        store_url=store,
        allow_private_targets=True if allow_private_targets else None,
        signing_secret=signing_secret,
    )
    try:
        tuning: dict[str, Any] = {"queues": tuple(queue or ("default",))}
        if concurrency is not None:
            tuning["concurrency"] = concurrency
        worker_settings = WorkerSettings(**tuning)
    except InvalidArgument as error:
        _fail(str(error), 2)
    _run_or_exit(
        work(
            settings.store_url,
            worker_settings,
            signing_secret=settings.signing_secret,
            allow_private_targets=settings.allow_private_targets,
            metrics_port=metrics_port,
        )
    )


@app.command()
def receiver(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9000,
    secret: Annotated[
        str | None,
        typer.Option(envvar="TICKWHEEL_SIGNING_SECRET", help="Verify Tickwheel-Signature with it."),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="Do not print each request.")] = False,
) -> None:
    """Run a tiny callback receiver that prints every request and checks its signature."""
    from tickwheel.service.receiver import run_receiver

    try:
        run_receiver(host, port, secret, quiet)
    except OSError as error:
        _fail(f"cannot listen on {host}:{port}: {error.strerror or error}")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def bench(ctx: typer.Context) -> None:
    """Run the engine benchmark (bench/engine.py); extra arguments go to it."""
    raise typer.Exit(_run_bench(list(ctx.args)))


def _bench_script() -> Path:
    # bench/ sits beside src/ in a checkout (an editable install); a wheel has no benchmarks
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        script = root / "bench" / "engine.py"
        if script.is_file():
            return script
    _fail("bench/engine.py not found: run `tickwheel bench` from a tickwheel checkout")


def _run_bench(args: list[str]) -> int:
    """Run the benchmark with this interpreter under a progress bar; return its exit status.

    The benchmark draws its own bar only on a terminal; piped, it writes ``[done/total] what``
    lines to stderr, which drive the bar here (on stderr, when that is a terminal) instead of
    scrolling by. Its stdout passes through as is, so ``tickwheel bench > results.md`` works.
    """
    import os
    import subprocess
    import threading

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    script = _bench_script()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(script), *args]
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = progress.add_task("bench/engine.py", total=None)

    def follow(stream: Any) -> None:
        for line in stream:
            text = line.rstrip("\n")
            step = _STEP.fullmatch(text)
            if step and not progress.disable:
                done, total, what = int(step[1]), int(step[2]), step[3]
                progress.update(task, completed=done, total=total, description=what[:50])
            else:
                progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    with (
        progress,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        ) as child,
    ):
        assert child.stdout is not None
        assert child.stderr is not None
        errors = threading.Thread(target=follow, args=(child.stderr,), daemon=True)
        errors.start()
        try:
            for line in child.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
            status = child.wait()
            errors.join(timeout=5)
            return status
        except KeyboardInterrupt:
            child.terminate()
            child.wait()
            return 130


def main() -> None:
    """Entry point of the ``tickwheel`` script and ``python -m tickwheel``."""
    app(prog_name="tickwheel")
